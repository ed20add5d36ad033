package integration_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// TestHotAdmittedKeysThroughMoves: keys cached by admission (not hot) on
// their owner move to a new server, are written there through the client,
// and move back when that server leaves; reads through the client then
// return the last write, never the reply cached on the first owner before
// the keys left it (issue 27: reads never go backwards, through any
// change). With and without AutoPipeline.
func TestHotAdmittedKeysThroughMoves(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(fmt.Sprintf("autopipeline=%v", ap), func(t *testing.T) {
			ctx := context.Background()
			base, _ := startServers(t, 2)
			c, err := redshard.NewClient(&redshard.Options{Shards: base, AutoPipeline: ap,
				HotKeys: &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour, Tracking: redshard.TrackingOn}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			keys := make([]string, 300)
			for i := range keys {
				keys[i] = fmt.Sprint("moves:", i)
				if err := c.Set(ctx, keys[i], "v1", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			// Cached by admission: a second read of each is a hit.
			for range 2 {
				for _, k := range keys {
					if v, err := c.Get(ctx, k).Result(); err != nil || v != "v1" {
						t.Fatalf("GET %s = %q, %v", k, v, err)
					}
				}
			}
			if hits := c.Stats().Hot.CacheHits; hits < int64(len(keys))/2 {
				t.Fatalf("%d cache hits for %d keys read twice: the keys are not cached; the test proves nothing", hits, len(keys))
			}
			extra := redistest.Start(t)
			grown := append(slices.Clone(base), redshard.Shard{Name: "extra", Addr: extra.Addr()})
			if err := c.SetShards(ctx, grown); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for _, k := range keys {
				want[k] = "v1"
				if name, _ := c.ShardFor(k); name == "extra" {
					want[k] = "v2"
					if err := c.Set(ctx, k, "v2", 0).Err(); err != nil {
						t.Fatal(err)
					}
					if v, err := c.Get(ctx, k).Result(); err != nil || v != "v2" { // cached again, on extra
						t.Fatalf("GET %s on the new server = %q, %v", k, v, err)
					}
				}
			}
			moved := 0
			for _, v := range want {
				if v == "v2" {
					moved++
				}
			}
			if moved == 0 {
				t.Fatal("no key moved to the new server")
			}
			if err := c.SetShards(ctx, base); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				for _, k := range keys {
					if v, err := c.Get(ctx, k).Result(); err != nil || v != want[k] {
						t.Fatalf("GET %s after it moved back = %q, %v; want %s (%d keys moved)", k, v, err, want[k], moved)
					}
				}
			}
		})
	}
}
