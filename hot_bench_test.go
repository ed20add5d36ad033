package redshard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// hotBenchClient returns a LocalCache client over 4 miniredis shards with
// keys hot0..hot{n-1} written and hot, and cold keys cold0..cold{n-1}
// written (not hot).
func hotBenchClient(b *testing.B, n int, autopipe bool) *redshard.Client {
	b.Helper()
	opt := &redshard.Options{
		Shards:       newCluster(b, 1, 1, 1, 1).shards,
		AutoPipeline: autopipe,
		HotKeys: &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour,
			Detector: hotFrozenDetector()},
	}
	c, err := redshard.NewClient(opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	var hot []string
	for i := range n {
		k := fmt.Sprint("hot", i)
		hot = append(hot, k)
		c.Set(ctx, k, "a value of some thirty bytes..", 0)
		c.Set(ctx, fmt.Sprint("cold", i), "v", 0)
	}
	hotWarm(b, c, hot...)
	for _, k := range hot { // fill the cache
		if err := c.Get(ctx, k).Err(); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// BenchmarkHotRead is a GET of a hot key answered from the local cache:
// the whole client-side cost of a hit, alone and from many goroutines, with
// and without Options.AutoPipeline (a hit must not enter a batch).
func BenchmarkHotRead(b *testing.B) {
	for _, ap := range []bool{false, true} {
		for _, par := range []bool{false, true} {
			name := "plain"
			if ap {
				name = "autopipeline"
			}
			if par {
				name += "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				c := hotBenchClient(b, 1, ap)
				ctx := context.Background()
				before := c.Stats().Hot.CacheHits
				b.ReportAllocs()
				b.ResetTimer()
				if par {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							_ = c.Get(ctx, "hot0").Err()
						}
					})
				} else {
					for range b.N {
						_ = c.Get(ctx, "hot0").Err()
					}
				}
				b.StopTimer()
				if hits := c.Stats().Hot.CacheHits - before; hits < int64(b.N) {
					b.Fatalf("%d of %d reads were hits", hits, b.N)
				}
			})
		}
	}
}

// BenchmarkHotMGET is an MGET of 16 hot keys, all answered from the local
// cache, and of 8 hot and 8 cold keys (the cold ones sent as one MGET).
func BenchmarkHotMGET(b *testing.B) {
	for _, cold := range []int{0, 8} {
		b.Run(fmt.Sprintf("hot%d-cold%d", 16-cold, cold), func(b *testing.B) {
			c := hotBenchClient(b, 16, false)
			var keys []string
			for i := range 16 - cold {
				keys = append(keys, fmt.Sprint("hot", i))
			}
			for i := range cold {
				keys = append(keys, fmt.Sprint("cold", i))
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := c.MGet(ctx, keys...).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHotPipeline is a pipeline of 16 GETs of hot keys, all answered
// from the local cache.
func BenchmarkHotPipeline(b *testing.B) {
	c := hotBenchClient(b, 16, false)
	ctx := context.Background()
	cmds := make([]*redis.StringCmd, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range cmds {
				cmds[i] = p.Get(ctx, hotKeyName(i))
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

var hotKeyNames = func() (n [16]string) {
	for i := range n {
		n[i] = fmt.Sprint("hot", i)
	}
	return n
}()

func hotKeyName(i int) string { return hotKeyNames[i] }

// BenchmarkHotPipelineWrites is a pipeline of 100 SETs of keys that are
// not hot, with LocalCache on: what the hot-key layer adds to a batch it
// answers nothing of (every write is noted, and invalidated once it ran).
func BenchmarkHotPipelineWrites(b *testing.B) {
	c := hotBenchClient(b, 1, false)
	ctx := context.Background()
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprint("cold", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Set(ctx, k, "v", 0)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
