package redshard_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// TestHotHitSkipsShards: under Options.AutoPipeline too, a read answered
// from the local cache reaches no shard client: not its AutoPipeliner, not
// a batch (a shard hook sees every command and batch a shard gets).
func TestHotHitSkipsShards(t *testing.T) {
	for _, autopipe := range []bool{false, true} {
		t.Run(fmt.Sprintf("autopipeline=%v", autopipe), func(t *testing.T) {
			hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache},
				func(o *redshard.Options) { o.AutoPipeline = autopipe })
			hc.c.Set(ctx, "celebrity", "v", 0)
			hotWarm(t, hc.c, "celebrity")
			if err := hc.c.Get(ctx, "celebrity").Err(); err != nil { // fills the cache
				t.Fatal(err)
			}
			h := &countHook{}
			hc.c.AddHook(h)
			hits := hc.c.Stats().Hot.CacheHits
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 50 {
						if v, err := hc.c.Get(ctx, "celebrity").Result(); err != nil || v != "v" {
							t.Errorf("GET = %q, %v", v, err)
						}
					}
				})
			}
			wg.Wait()
			if got := hc.c.Stats().Hot.CacheHits - hits; got != 400 {
				t.Fatalf("%d of 400 reads were cache hits", got)
			}
			if n := h.n.Load(); n != 0 {
				t.Fatalf("cache hits handed %d commands to shard clients", n)
			}
		})
	}
}

// TestHotHitAllocs: a cache hit allocates nothing beyond go-redis's own
// command, and an MGET of cached hot keys nothing per key beyond go-redis's
// arguments and the reply (before: a sub-key per read, a command per key).
func TestHotHitAllocs(t *testing.T) {
	if hotRace {
		t.Skip("allocation counts differ under the race detector")
	}
	hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache}, nil)
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprint("hot", i)
		hc.c.Set(ctx, keys[i], "v", 0)
	}
	hotWarm(t, hc.c, keys...)
	for _, k := range keys {
		hc.c.Get(ctx, k)
	}
	// What go-redis itself allocates for the same calls: a client whose
	// hook answers without I/O.
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	plain.AddHook(stubHook{})
	t.Cleanup(func() { plain.Close() })
	ownGet := testing.AllocsPerRun(200, func() { plain.Get(ctx, keys[0]) })
	ownMGet := testing.AllocsPerRun(200, func() { plain.MGet(ctx, keys...) })

	get := testing.AllocsPerRun(200, func() { hc.c.Get(ctx, keys[0]) })
	if get > ownGet {
		t.Errorf("a cache hit allocates %v times, want at most go-redis's own %v", get, ownGet)
	}
	hits := hc.c.Stats().Hot.CacheHits
	mget := testing.AllocsPerRun(200, func() { hc.c.MGet(ctx, keys...) })
	if got := hc.c.Stats().Hot.CacheHits - hits; got < 200*16 {
		t.Fatalf("%d of %d keys were cache hits", got, 201*16)
	}
	// redshard's own: the reply slice, and routing's list of the key
	// positions (more than fit its 8 on the stack).
	if mget > ownMGet+2 {
		t.Errorf("an MGET of 16 cached keys allocates %v times, want at most go-redis's own %v + 2", mget, ownMGet)
	}
}
