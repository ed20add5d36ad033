package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/registry"
)

const sentinelConfig = `{"shards": [
  {"name": "cache-a", "addr": "10.0.0.1:6379"},
  {"name": "cache-s", "sentinel": {"master": "m1", "addrs": ["10.0.0.9:26379", "10.0.0.8:26379"]}, "weight": 2}
], "password_env": "REDSHARD_TEST_PW", "sentinel_password_env": "REDSHARD_TEST_SENTINEL_PW"}`

// TestRingDocSentinel: a Sentinel shard is published as its master and its
// Sentinels (sorted), never its credentials, and reads back as the same
// shard, which the library reads too.
func TestRingDocSentinel(t *testing.T) {
	t.Setenv("REDSHARD_TEST_PW", "server-secret")
	t.Setenv("REDSHARD_TEST_SENTINEL_PW", "sentinel-secret")
	opt, err := redshard.LoadConfig(writeFile(t, "fleet.json", sentinelConfig))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := encodeRingDoc(opt)
	if err != nil {
		t.Fatalf("encodeRingDoc: %v", err)
	}
	const want = `{"shards":[{"name":"cache-a","addr":"10.0.0.1:6379","weight":1},` +
		`{"name":"cache-s","sentinel":{"master":"m1","addrs":["10.0.0.8:26379","10.0.0.9:26379"]},"weight":2}]}`
	if string(doc) != want {
		t.Errorf("document\n%s\nwant\n%s", doc, want)
	}
	if strings.Contains(string(doc), "secret") {
		t.Errorf("the document carries a secret: %s", doc)
	}
	// The same shards in another order, Sentinels too: the same document.
	opt2 := *opt
	opt2.Shards = slices.Clone(opt.Shards)
	slices.Reverse(opt2.Shards)
	f := *opt2.Shards[0].Failover
	f.SentinelAddrs = slices.Clone(f.SentinelAddrs)
	slices.Reverse(f.SentinelAddrs)
	opt2.Shards[0].Failover = &f
	if doc2, err := encodeRingDoc(&opt2); err != nil || string(doc2) != string(doc) {
		t.Errorf("reordered: %s, %v; want %s", doc2, err, doc)
	}

	shards, _, err := decodeRingDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 2 || shards[0].Failover != nil || shards[0].Addr != "10.0.0.1:6379" {
		t.Fatalf("decoded %+v", shards)
	}
	s := shards[1]
	if s.Name != "cache-s" || s.Addr != "" || s.Weight != 2 || s.Failover == nil || s.Failover.MasterName != "m1" ||
		!slices.Equal(s.Failover.SentinelAddrs, []string{"10.0.0.8:26379", "10.0.0.9:26379"}) || s.Failover.Password != "" {
		t.Fatalf("decoded Sentinel shard %+v (Failover %+v)", s, s.Failover)
	}
	if !sameShards(shards, opt.Shards) {
		t.Errorf("decoded %v, want the file's %v", shards, opt.Shards)
	}
	// Encoded again, the decoded shards give the same document.
	if doc3, err := encodeRingDoc(&redshard.Options{Shards: shards}); err != nil || string(doc3) != string(doc) {
		t.Errorf("round trip: %s, %v; want %s", doc3, err, doc)
	}
	// The library reads the document as its registry's.
	lib, err := redshard.LoadConfig(writeFile(t, "doc.json", string(doc)))
	if err != nil {
		t.Fatalf("the library refuses the document: %v", err)
	}
	if !sameShards(lib.Shards, opt.Shards) {
		t.Errorf("the library reads %v, want %v", lib.Shards, opt.Shards)
	}
}

// TestPlanSentinel: plan names a Sentinel shard by its master, and a new
// list of Sentinels for the same master is a change that moves no key.
func TestPlanSentinel(t *testing.T) {
	t.Setenv("REDSHARD_TEST_PW", "x")
	t.Setenv("REDSHARD_TEST_SENTINEL_PW", "y")
	cur := writeFile(t, "cur.json", sentinelConfig)
	next := writeFile(t, "next.json", strings.Replace(sentinelConfig, `"10.0.0.9:26379", "10.0.0.8:26379"`, `"10.0.0.7:26379"`, 1))
	code, out, errOut := runCmd(t, "plan", "--config", cur, "--to-config", next)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		`sentinel master "m1"`,
		"sentinels 10.0.0.9:26379,10.0.0.8:26379 -> 10.0.0.7:26379 (keys stay)",
		"keys that change owner: 0.00%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output:\n%s\nwant %q", out, want)
		}
	}
	// A shard that becomes another master is named both ways.
	other := writeFile(t, "other.json", strings.Replace(sentinelConfig, `"master": "m1"`, `"master": "m2"`, 1))
	if _, out, _ := runCmd(t, "plan", "--config", cur, "--to-config", other); !strings.Contains(out, `sentinel master "m1" -> sentinel master "m2"`) {
		t.Errorf("output:\n%s\nwant the change of master", out)
	}
}

// TestStatusSentinel: status names a Sentinel shard by its master, and a
// change of its Sentinels as such.
func TestStatusSentinel(t *testing.T) {
	since := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := registry.Config{
		Epoch: 2, Phase: registry.Prepare, PrevEpoch: 1, Change: "c", Driver: "d", Since: since,
		Doc:     json.RawMessage(`{"shards":[{"name":"a","addr":"10.0.0.1:6379"},{"name":"s","sentinel":{"master":"m1","addrs":["10.0.0.7:26379"]},"weight":2},{"name":"t","sentinel":{"master":"m2","addrs":["10.0.0.7:26379"]}}]}`),
		PrevDoc: json.RawMessage(`{"shards":[{"name":"a","addr":"10.0.0.1:6379"},{"name":"s","sentinel":{"master":"m1","addrs":["10.0.0.8:26379","10.0.0.9:26379"]}}]}`),
	}
	u, _ := parseRegistryURL("redis://10.0.0.9:6379/redshard:registry:web")
	var b bytes.Buffer
	if err := writeStatus(&b, u, cfg, nil, since); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`s      sentinel master "m1"       2  weight 1 -> 2, sentinels 10.0.0.8:26379,10.0.0.9:26379 -> 10.0.0.7:26379`,
		`t      sentinel master "m2"       1  added`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status:\n%s\nwant %q", b.String(), want)
		}
	}
}
