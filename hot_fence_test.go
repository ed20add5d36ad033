package redshard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
)

// TestHotHitFenced: a fenced fleet process refuses a read of a key the
// change it has not seen moves, even when the key is hot and its reply is
// in the local cache (the fence is decided before the cache is asked); a
// key that stays is still answered from the cache.
func TestHotHitFenced(t *testing.T) {
	f := newFleet(t, 2)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(1))
	cut := &cutRegistry{Registry: f.open(t)}
	c, err := redshard.NewClient(&redshard.Options{Registry: cut, Fleet: &redshard.FleetOptions{MemberID: "cut"},
		Health:  &redshard.HealthOptions{Disable: true},
		HotKeys: &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour, Detector: hotFrozenDetector()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	moving, staying := keyMoving(t, f, 1)
	for _, k := range []string{moving, staying} {
		if err := c.Set(ctx, k, "v0", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	hotWarm(t, c, moving, staying)
	for _, k := range []string{moving, staying} {
		if err := c.Get(ctx, k).Err(); err != nil { // fills the cache
			t.Fatal(err)
		}
	}
	hits := c.Stats().Hot.CacheHits
	if v, err := c.Get(ctx, moving).Result(); err != nil || v != "v0" {
		t.Fatalf("GET %s = %q, %v", moving, v, err)
	}
	if c.Stats().Hot.CacheHits != hits+1 {
		t.Fatal("the moving key's GET was not a cache hit before the fence")
	}
	cut.setCut(true)
	waitFenced(t, c, true)
	applied := make(chan fleet.ApplyReport, 1)
	go func() { applied <- f.apply(t, ctx, f.doc(2)) }()
	select {
	case <-applied:
	case <-time.After(30 * time.Second):
		t.Fatal("Apply did not go on without the cut-off process")
	}
	if v, err := c.Get(ctx, moving).Result(); !errors.Is(err, redshard.ErrFenced) {
		t.Fatalf("fenced GET of a moved, cached key = %q, %v; want ErrFenced", v, err)
	}
	hits = c.Stats().Hot.CacheHits
	if v, err := c.Get(ctx, staying).Result(); err != nil || v != "v0" {
		t.Fatalf("fenced GET of a key that stays = %q, %v", v, err)
	}
	if c.Stats().Hot.CacheHits != hits+1 {
		t.Error("the staying key's GET was not a cache hit while fenced")
	}
	cut.setCut(false)
	waitFenced(t, c, false)
}
