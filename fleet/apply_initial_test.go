package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/ring"
)

// TestApplyRefusesMisplacedData: apply on an empty registry over servers
// whose keys were placed by another ring (Recipe1's, the document asking
// Recipe2) refuses, publishes nothing and says what to do; it used to
// publish epoch 1 with "no key moves", and most keys then read as
// missing. The document the data was placed by is accepted, and the
// recipe change after it moves the keys.
func TestApplyRefusesMisplacedData(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	var shards []redshard.Shard
	for i, a := range f.addrs {
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("s%d", i), Addr: a})
	}
	w, err := redshard.NewClient(&redshard.Options{Shards: shards, Health: &redshard.HealthOptions{Disable: true}})
	if err != nil {
		t.Fatal(err)
	}
	const keys = 300
	for i := range keys {
		if err := w.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()

	_, err = fleet.Apply(ctx, f.reg, recipeDoc(t, f, 3, ring.Recipe2), fleet.ApplyOptions{Driver: "test",
		Client: &redshard.Options{Health: &redshard.HealthOptions{Disable: true}}})
	if !errors.Is(err, redshard.ErrMisplacedData) || !strings.Contains(err.Error(), "Apply first the document the data was placed by") {
		t.Fatalf("Apply(Recipe2) over Recipe1's data = %v; want ErrMisplacedData saying what to do", err)
	}
	if cur, err := f.reg.Get(ctx); err != nil || cur.Version() != (registry.Version{}) {
		t.Fatalf("registry after the refusal: %s, %v; want it still empty", cur.Version(), err)
	}

	f.apply(t, ctx, f.doc(3)) // the data's own ring: accepted
	rep := f.apply(t, ctx, recipeDoc(t, f, 3, ring.Recipe2))
	if rep.Rebalance.Moved < keys/2 {
		t.Errorf("the recipe change moved %d of %d keys; most should move", rep.Rebalance.Moved, keys)
	}
	// A steady process (openSteady): every GET of its is checked, so its
	// fence must not depend on the scheduler. With fleetTTL a loaded
	// machine could fence it: a lease of a second run out, or its start's
	// read of the servers' beacons (bounded by a quarter TTL, 500ms) cut
	// short, and a fenced process may refuse a key.
	c := f.client(t, f.openSteady(t), "p0")
	for i := range keys {
		k := fmt.Sprintf("k%d", i)
		if got, err := c.Get(ctx, k).Int(); err != nil || got != i {
			t.Errorf("GET %s = %d, %v; want %d", k, got, err, i)
		}
	}
}

// TestApplyAcceptsAFewForeignKeys: a few keys of another application on
// the servers (placed by no ring) do not stop the first apply; the fleet
// leaves them alone.
func TestApplyAcceptsAFewForeignKeys(t *testing.T) {
	f := newFleet(t, 2)
	for i, m := range f.mini {
		for j := range 3 {
			if err := m.Set(fmt.Sprintf("other-app:%d:%d", i, j), "not the fleet's"); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.apply(t, context.Background(), f.doc(2))
	for i, m := range f.mini {
		for j := range 3 {
			if k := fmt.Sprintf("other-app:%d:%d", i, j); !m.Exists(k) {
				t.Errorf("server %d lost %s", i, k)
			}
		}
	}
}
