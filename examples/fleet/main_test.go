package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/redshardtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestDemo runs the embedded fleet: a shard added under load loses
// nothing, and every phase is shown.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	tot, err := demo(context.Background(), &out, demoOptions{Processes: 3, Workers: 2, Keys: 300, Load: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Every error must be a refusal under the lease (a loaded machine
	// causes a few); the ledger counts those writes as uncertain.
	if tot.bad() != 0 || tot.Errors.Load() != tot.Refused.Load() || tot.ReadsChecked.Load() == 0 || tot.FinalChecked.Load() == 0 {
		t.Errorf("totals: %s, %d refused (first error %v)", tot, tot.Refused.Load(), tot.FirstError())
	}
	for _, want := range []string{"epoch 2 prepare: 4 live", "late: ", "Rebalance moves the data", "epoch 2 stable: 4 live (4 on epoch 2 stable); all acknowledged", "lost 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output has no %q:\n%s", want, out.String())
		}
	}
}

// TestFollowKeepsOtherKeys runs one process of a "real" fleet (miniredis
// servers behind a registry): it deletes the keys it wrote, and no other,
// and refuses to start on keys that are not its own.
func TestFollowKeepsOtherKeys(t *testing.T) {
	ctx := context.Background()
	f := redshardtest.NewFleet(t, &redshardtest.FleetOptions{Weights: []float64{1, 1}})
	servers := f.Servers
	for i, name := range []string{"a", "b"} {
		if err := servers[i].Set("app:"+name, "not the demo's"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Apply(ctx, redshardtest.Doc(f.Shards...), fleet.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	url := "redis://" + f.RegistryServer.Addr() + "/" + redshardtest.RegistryName

	var out bytes.Buffer
	tot, err := follow(ctx, &out, followOptions{URL: url, ID: "web-1", Workers: 2, Keys: 100, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if tot.bad() != 0 || tot.Errors.Load() != 0 || tot.Ops.Load() == 0 {
		t.Errorf("totals: %s", tot)
	}
	var left []string
	for _, m := range servers {
		for _, k := range m.Keys() {
			if !strings.HasPrefix(k, redshard.InternalKeyPrefix) {
				left = append(left, k)
			}
		}
	}
	slices.Sort(left)
	if want := []string{"app:a", "app:b"}; !slices.Equal(left, want) {
		t.Errorf("keys left: %q, want only the ones it did not write: %q\n%s", left, want, out.String())
	}

	servers[0].Set("fleet:web-2:7", "someone else's")
	servers[1].Set("fleet:web-2:7", "someone else's")
	_, err = follow(ctx, &out, followOptions{URL: url, ID: "web-2", Workers: 1, Keys: 10, Duration: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "exist already") {
		t.Errorf("follow over existing keys: %v, want a refusal", err)
	}
	if v, _ := servers[0].Get("fleet:web-2:7"); v != "someone else's" {
		t.Errorf("a refused run changed a key it did not write: %q", v)
	}
}

func TestParseRegistryURL(t *testing.T) {
	if addr, name, err := parseRegistryURL("redis://127.0.0.1:7000/redshard:registry:demo"); err != nil || addr != "127.0.0.1:7000" || name != "redshard:registry:demo" {
		t.Errorf("got %q %q %v", addr, name, err)
	}
	for _, bad := range []string{"etcd://h:1/p", "redis://h:1", "redis://h/n", "redis://h:1/"} {
		if _, _, err := parseRegistryURL(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
