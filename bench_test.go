package redshard_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// stubHook answers every command without I/O, so a benchmark through it
// measures only the client-side cost of getting a command to a shard.
type stubHook struct{}

func (stubHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (stubHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error { return nil }
}
func (stubHook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(context.Context, []redis.Cmder) error { return nil }
}

// overheadClients returns a redshard client over 4 shards and the client of
// the shard that owns "bench:key", built the same way.
func overheadClients(b *testing.B, stub bool) (*redshard.Client, *redis.Client) {
	return overheadClientsWith(b, stub, false)
}

// overheadClientsWith is overheadClients with Options.AutoPipeline set to
// autopipe.
func overheadClientsWith(b *testing.B, stub, autopipe bool) (*redshard.Client, *redis.Client) {
	opt := &redshard.Options{AutoPipeline: autopipe}
	if stub {
		// Stub shards have no server: a heartbeat would mark them down.
		opt.Health = &redshard.HealthOptions{Disable: true}
		opt.NewShardClient = func(s redshard.Shard, o *redis.Options) *redis.Client {
			c := redis.NewClient(o)
			c.AddHook(stubHook{})
			return c
		}
		for i := 0; i < 4; i++ {
			opt.Shards = append(opt.Shards, redshard.Shard{Name: fmt.Sprint("s", i), Addr: fmt.Sprintf("127.0.0.1:%d", 1+i)})
		}
	} else {
		cl := newCluster(b, 1, 1, 1, 1)
		opt.Shards = cl.shards
	}
	c, err := redshard.NewClient(opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	_, direct := c.ShardFor("bench:key")
	return c, direct
}

// ringOver returns a go-redis redis.Ring over the shards of c, the
// yardstick for redshard's own routing cost; with stub, its shard clients
// answer without I/O as c's do.
func ringOver(b *testing.B, c *redshard.Client, stub bool) *redis.Ring {
	addrs := map[string]string{}
	for _, s := range c.Shards() {
		addrs[s.Name] = s.Addr
	}
	r := redis.NewRing(&redis.RingOptions{
		Addrs: addrs,
		NewClient: func(o *redis.Options) *redis.Client {
			cl := redis.NewClient(o)
			if stub {
				cl.AddHook(stubHook{})
			}
			return cl
		},
	})
	b.Cleanup(func() { r.Close() })
	return r
}

// cpuPerOp starts measuring the process's CPU time; the returned func, called
// once the benchmark's loop is done, reports it per operation as cpu-ns/op
// (every thread's, so the runtime's and the parallel goroutines' too). On a
// machine that other work keeps busy, ns/op also counts the time the
// benchmark waited for a core; cpu-ns/op does not.
func cpuPerOp(b *testing.B) func() {
	start, ok := processCPU()
	return func() {
		if end, ok2 := processCPU(); ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// BenchmarkClientOverhead compares each command through redshard with the
// same command on the owning shard's go-redis client. "stub" shards answer
// without I/O, so redshard minus direct is exactly the routing cost;
// "miniredis" shards show it against a real round trip.
func BenchmarkClientOverhead(b *testing.B) {
	ctx := context.Background()
	mgetKeys := make([]string, 10)
	for i := range mgetKeys {
		mgetKeys[i] = fmt.Sprintf("bench:m:%d", i)
	}
	for _, backend := range []string{"stub", "miniredis"} {
		c, direct := overheadClients(b, backend == "stub")
		c.Set(ctx, "bench:key", "value", 0)
		for _, k := range mgetKeys {
			c.Set(ctx, k, "v", 0)
		}
		apc, apDirect := overheadClientsWith(b, backend == "stub", true)
		directAP, err := apDirect.AutoPipeline()
		if err != nil {
			b.Fatal(err)
		}
		// direct-autopipeline: the owning shard's own go-redis
		// AutoPipeliner; redshard-autopipeline: Options.AutoPipeline.
		clients := []struct {
			name string
			c    redis.Cmdable
		}{{"direct", direct}, {"redshard", c}, {"direct-autopipeline", directAP}, {"redshard-autopipeline", apc}}
		// go-redis's Ring on the same shards (its MGET and pipelines
		// are not split: each goes whole to its first key's shard).
		clients = append(clients, struct {
			name string
			c    redis.Cmdable
		}{"goredis-ring", ringOver(b, c, backend == "stub")})
		for _, cl := range clients {
			cl.c.Set(ctx, "bench:key", "value", 0) // Ring places keys elsewhere
			b.Run(backend+"/GET/"+cl.name, func(b *testing.B) {
				b.ReportAllocs()
				defer cpuPerOp(b)()
				for b.Loop() {
					cl.c.Get(ctx, "bench:key")
				}
			})
			b.Run(backend+"/SET/"+cl.name, func(b *testing.B) {
				b.ReportAllocs()
				defer cpuPerOp(b)()
				for b.Loop() {
					cl.c.Set(ctx, "bench:key", "value", 0)
				}
			})
			// The same GET and SET from GOMAXPROCS goroutines at once:
			// what routing costs when every core sends commands (shared
			// counters, shared cache lines).
			b.Run(backend+"/GET-parallel/"+cl.name, func(b *testing.B) {
				b.ReportAllocs()
				defer cpuPerOp(b)()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						cl.c.Get(ctx, "bench:key")
					}
				})
			})
			b.Run(backend+"/SET-parallel/"+cl.name, func(b *testing.B) {
				b.ReportAllocs()
				defer cpuPerOp(b)()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						cl.c.Set(ctx, "bench:key", "value", 0)
					}
				})
			})
			// direct: one MGET of the 10 keys on one shard; redshard: the
			// same MGET split over the 4 shards that own them.
			b.Run(backend+"/MGET10/"+cl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					cl.c.MGet(ctx, mgetKeys...)
				}
			})
			// direct: 100 GETs in one pipeline to one shard; redshard: the
			// same 100 GETs split into one pipeline per shard.
			b.Run(backend+"/Pipeline100/"+cl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					p := cl.c.Pipeline()
					for i := 0; i < 100; i++ {
						p.Get(ctx, mgetKeys[i%10])
					}
					p.Exec(ctx)
				}
			})
		}
	}
}

// BenchmarkGetParallel shows the routing path under concurrency, with and
// without Options.AutoPipeline, against the owning shard's own client (and
// its AutoPipeliner).
func BenchmarkGetParallel(b *testing.B) {
	ctx := context.Background()
	for _, autopipe := range []bool{false, true} {
		c, direct := overheadClientsWith(b, true, autopipe)
		var dc redis.Cmdable = direct
		name := ""
		if autopipe {
			ap, err := direct.AutoPipeline()
			if err != nil {
				b.Fatal(err)
			}
			dc, name = ap, "-autopipeline"
		}
		for _, cl := range []struct {
			name string
			c    redis.Cmdable
		}{{"direct" + name, dc}, {"redshard" + name, c}, {"goredis-ring", ringOver(b, c, true)}} {
			if autopipe && cl.name == "goredis-ring" {
				continue // Ring refuses AutoPipeline; its row is the one above
			}
			b.Run(cl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						cl.c.Get(ctx, "bench:key")
					}
				})
			})
		}
	}
}

// absentStubHook is stubHook, except that scripts (the take of a move)
// answer nil: every key is absent from its previous owner, so a change's
// handoff settles keys without moving anything.
type absentStubHook struct{ stubHook }

func (absentStubHook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if n := c.Name(); n == "evalsha" || n == "eval" {
				c.SetErr(redis.Nil)
			}
		}
		return nil
	}
}

// BenchmarkDuringChange is the per-command cost of the membership protocol
// on stub shards: with no change in progress, and during a change for a key
// whose owner did not change and for one already handed off (the done-set).
func BenchmarkDuringChange(b *testing.B) {
	ctx := context.Background()
	var shards []redshard.Shard
	for i := 0; i < 5; i++ {
		shards = append(shards, redshard.Shard{Name: fmt.Sprint("s", i), Addr: fmt.Sprintf("127.0.0.1:%d", 1+i)})
	}
	c, err := redshard.NewClient(&redshard.Options{
		Shards: shards[:4],
		Health: &redshard.HealthOptions{Disable: true},
		NewShardClient: func(s redshard.Shard, o *redis.Options) *redis.Client {
			cl := redis.NewClient(o)
			cl.AddHook(absentStubHook{})
			return cl
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.Run("no-change", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Get(ctx, "bench:key")
		}
	})
	before := map[string]string{}
	for i := 0; i < 1000; i++ {
		k := fmt.Sprint("bench:", i)
		before[k], _ = c.ShardFor(k)
	}
	if err := c.SetShards(ctx, shards); err != nil {
		b.Fatal(err)
	}
	var stayed, moved string
	for k, s := range before {
		if now, _ := c.ShardFor(k); now == s && stayed == "" {
			stayed = k
		} else if now != s && moved == "" {
			moved = k
		}
	}
	if err := c.Get(ctx, moved).Err(); err != nil {
		b.Fatal(err) // hands the key off: absent on its previous owner
	}
	for _, k := range []struct{ name, key string }{{"change/unmoved-key", stayed}, {"change/moved-key", moved}} {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Get(ctx, k.key)
			}
		})
		b.Run(k.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.Get(ctx, k.key)
				}
			})
		})
	}
}
