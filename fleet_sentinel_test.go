package redshard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
)

// fakeSentinel stands in for Sentinel in tests on miniredis, which has
// none: as Options.NewFailoverShardClient it connects every Sentinel
// shard to one server, with the connection settings of the
// FailoverOptions redshard built, and records those options.
type fakeSentinel struct {
	primary string // the address Sentinel would report for every master
	mu      sync.Mutex
	got     []*redis.FailoverOptions // guarded by mu
}

func (fs *fakeSentinel) newClient(_ redshard.Shard, opt *redis.FailoverOptions) *redis.Client {
	fs.mu.Lock()
	fs.got = append(fs.got, opt)
	fs.mu.Unlock()
	return redis.NewClient(&redis.Options{
		Addr: fs.primary, Username: opt.Username, Password: opt.Password, DB: opt.DB,
		Protocol: opt.Protocol, OnConnect: opt.OnConnect, PoolSize: opt.PoolSize, MaxRetries: opt.MaxRetries,
		DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout,
	})
}

// built returns the options of the clients built so far.
func (fs *fakeSentinel) built() []*redis.FailoverOptions {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.got)
}

// sentinelDoc is a registry document: the address shards s0.. on addrs,
// then the Sentinel shard "sm" of master m1, known to sentinels.
func sentinelDoc(addrs []string, sentinels ...string) json.RawMessage {
	var shards []map[string]any
	for i, a := range addrs {
		shards = append(shards, map[string]any{"name": fmt.Sprintf("s%d", i), "addr": a})
	}
	shards = append(shards, map[string]any{"name": "sm", "sentinel": map[string]any{"master": "m1", "addrs": sentinels}})
	b, _ := json.Marshal(map[string]any{"shards": shards})
	return b
}

// TestFleetSentinelShard: a registry document's Sentinel shard is served
// by every follower with its own connection settings, the document
// carrying none: one follower takes them from ShardOptions, one from
// FailoverShardOptions (with Sentinel's own password). A change of the
// fleet moves keys off it like any shard, and keeps its client.
func TestFleetSentinelShard(t *testing.T) {
	f := newFleet(t, 3)
	for _, m := range f.mini {
		m.RequireAuth("pw") // only the process's settings know it
	}
	ctx := context.Background()
	so := &redis.Options{Password: "pw", DB: 2, ReadTimeout: 750 * time.Millisecond, PoolSize: 7}
	noHealth := &redshard.HealthOptions{Disable: true}
	driver := &fakeSentinel{primary: f.addrs[2]}
	apply := func(doc json.RawMessage) {
		t.Helper()
		if _, err := fleet.Apply(ctx, f.reg, doc, fleet.ApplyOptions{Driver: "test",
			Client: &redshard.Options{ShardOptions: so, Health: noHealth, NewFailoverShardClient: driver.newClient}}); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	apply(sentinelDoc(f.addrs[:1], "127.0.0.1:26379", "127.0.0.1:26380"))

	fromShard := &fakeSentinel{primary: f.addrs[2]}
	p1, err := redshard.NewClient(&redshard.Options{Registry: f.open(t), Fleet: &redshard.FleetOptions{MemberID: "p1"},
		ShardOptions: so, Health: noHealth, NewFailoverShardClient: fromShard.newClient})
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	fromTemplate := &fakeSentinel{primary: f.addrs[2]}
	p2, err := redshard.NewClient(&redshard.Options{Registry: f.open(t), Fleet: &redshard.FleetOptions{MemberID: "p2"},
		Health: noHealth, NewFailoverShardClient: fromTemplate.newClient,
		FailoverShardOptions: &redis.FailoverOptions{
			MasterName: "ignored", SentinelAddrs: []string{"ignored:1"},
			SentinelPassword: "watch", Password: "pw", DB: 2,
		},
		// The address shards need the password too.
		ShardOptions: &redis.Options{Password: "pw", DB: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()

	// Keys on the Sentinel shard land on the server "Sentinel" reports,
	// in the DB of the process's settings.
	var onSentinel []string
	for i := 0; len(onSentinel) < 20; i++ {
		k := fmt.Sprintf("k%d", i)
		if err := p1.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if s, _ := p1.ShardFor(k); s == "sm" {
			onSentinel = append(onSentinel, k)
		}
	}
	f.mini[2].Select(2)
	for _, k := range onSentinel {
		if got, err := f.mini[2].Get(k); err != nil || got != k {
			t.Fatalf("%s on the Sentinel shard's server, DB 2: %q, %v", k, got, err)
		}
		if got, err := p2.Get(ctx, k).Result(); err != nil || got != k {
			t.Fatalf("p2 GET %s = %q, %v", k, got, err)
		}
	}
	for _, tc := range []struct {
		name string
		fs   *fakeSentinel
		want redis.FailoverOptions
	}{
		{"from ShardOptions", fromShard, redis.FailoverOptions{Password: "pw", DB: 2, ReadTimeout: 750 * time.Millisecond, PoolSize: 7}},
		{"from FailoverShardOptions", fromTemplate, redis.FailoverOptions{Password: "pw", DB: 2, SentinelPassword: "watch"}},
	} {
		got := tc.fs.built()
		if len(got) == 0 {
			t.Fatalf("%s: no Sentinel client built", tc.name)
		}
		o := got[0]
		if o.MasterName != "m1" || !slices.Equal(o.SentinelAddrs, []string{"127.0.0.1:26379", "127.0.0.1:26380"}) ||
			o.Password != tc.want.Password || o.DB != tc.want.DB || o.SentinelPassword != tc.want.SentinelPassword ||
			o.ReadTimeout != tc.want.ReadTimeout || o.PoolSize != tc.want.PoolSize {
			t.Errorf("%s: the Sentinel shard's options: %+v", tc.name, o)
		}
	}

	// A change adds s1: keys move off the Sentinel shard to it, and both
	// followers find every key where the new ring puts it.
	apply(sentinelDoc(f.addrs[:2], "127.0.0.1:26380", "127.0.0.1:26379"))
	moved := 0
	for _, k := range onSentinel {
		for _, c := range []*redshard.Client{p1, p2} {
			if got, err := c.Get(ctx, k).Result(); err != nil || got != k {
				t.Fatalf("after the change: GET %s = %q, %v", k, got, err)
			}
		}
		if s, _ := p1.ShardFor(k); s != "sm" {
			moved++
		}
	}
	if moved == 0 {
		t.Fatalf("no key moved off the Sentinel shard: the test proves nothing")
	}
	// Every phase of the change parsed the documents again, with the
	// Sentinels listed in another order: the shard is the same server,
	// reached the same way, so its client was kept. (The clients that
	// read the shard's beacon once, when the process starts or catches
	// up, are short-lived and carry no admission: not counted.)
	for _, fs := range []*fakeSentinel{fromShard, fromTemplate} {
		admitted := 0
		for _, o := range fs.built() {
			if o.OnConnect != nil {
				admitted++
			}
		}
		if admitted != 1 {
			t.Errorf("%d clients with the fleet's admission built for the Sentinel shard, want 1 (rebuilt at a phase)", admitted)
		}
	}
}
