//go:build unix

package integration_test

import (
	"context"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// BenchmarkRealGet measures the client's CPU per GET against four real
// redis-servers, for redshard and for go-redis's Ring over the same
// servers, 64 goroutines each (as `redshard bench` runs). Besides ns/op
// (wall time, which on a shared machine moves with everything else) it
// reports the process's CPU time per operation, user and system, read
// from getrusage: the servers are other processes, so it is the client's
// own cost, and it moves far less with load than throughput does. Run the
// systems interleaved and compare medians:
//
//	go test ./integration_test -run XX -bench RealGet -count 10
func BenchmarkRealGet(b *testing.B) {
	const (
		shards = 4
		keys   = 10_000
	)
	list := benchShards(b, shards)
	addrs := map[string]string{}
	for _, s := range list {
		addrs[s.Name] = s.Addr
	}
	rs, err := redshard.NewClient(&redshard.Options{Shards: list})
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	defer ring.Close()

	ctx := context.Background()
	val := string(make([]byte, 100))
	names := make([]string, keys)
	for i := range names {
		names[i] = "bench:" + strconv.Itoa(i)
	}
	// Each system reads keys it wrote: the two place keys differently.
	for _, c := range []redis.Cmdable{rs, ring} {
		pipe := c.Pipeline()
		for _, k := range names {
			pipe.Set(ctx, k, val, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}

	for _, sys := range []struct {
		name string
		c    redis.Cmdable
	}{{"redshard", rs}, {"goredis-ring", ring}} {
		b.Run(sys.name, func(b *testing.B) {
			benchGets(b, names, func(i int) error { return sys.c.Get(ctx, names[i]).Err() })
		})
	}
}

// benchShards starts n redis-servers, shards "s0".."s<n-1>" of weight 1.
func benchShards(b *testing.B, n int) []redshard.Shard {
	var list []redshard.Shard
	for i := range n {
		srv := redistest.Start(b)
		list = append(list, redshard.Shard{Name: "s" + strconv.Itoa(i), Addr: srv.Addr(), Weight: 1})
	}
	return list
}

// benchGets runs get(i), the GET of names[i], from 64 goroutines over the
// keys in a fixed stride, and reports the process's CPU time per GET
// (user, system and both) besides ns/op.
func benchGets(b *testing.B, names []string, get func(i int) error) {
	b.SetParallelism(32) // 64 goroutines on this 2-core machine
	user0, kern0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i = (i + 7919) % len(names)
			if err := get(i); err != nil {
				b.Errorf("GET %s: %v", names[i], err)
				return
			}
		}
	})
	b.StopTimer()
	user1, kern1 := processCPU()
	n := float64(b.N)
	b.ReportMetric(float64((user1-user0).Microseconds())/n, "user-µs/op")
	b.ReportMetric(float64((kern1-kern0).Microseconds())/n, "sys-µs/op")
	b.ReportMetric(float64((user1-user0+kern1-kern0).Microseconds())/n, "cpu-µs/op")
}

// processCPU returns the CPU time this process has used in user mode and
// in the kernel.
func processCPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// BenchmarkRealAutoPipeline compares Options.AutoPipeline, with go-redis's
// default (half-duplex) AutoPipeliner per shard and with FullDuplex, to
// go-redis's own AutoPipeliners per shard with the keys placed by hand
// (the shard redshard's ring names), on four real redis-servers, 64
// goroutines of GETs. Nothing carries a hook: under FullDuplex a hooked
// client runs each command's hooks on a goroutine of its own. ns/op is
// wall time per GET (its inverse is the throughput), cpu-µs/op the
// client's CPU per GET. Run interleaved and compare same-run medians:
//
//	go test ./integration_test -run XX -bench RealAutoPipeline -count 5
func BenchmarkRealAutoPipeline(b *testing.B) {
	const (
		shards = 4
		keys   = 10_000
	)
	list := benchShards(b, shards)
	apOptions := func(fd bool) *redis.AutoPipelineOptions {
		o := redis.DefaultBlockingAutoPipelineOptions()
		o.FullDuplex = fd
		return o
	}
	newRedshard := func(o *redis.AutoPipelineOptions) *redshard.Client {
		c, err := redshard.NewClient(&redshard.Options{Shards: list, AutoPipeline: true, AutoPipelineOptions: o})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	withDelay := func(d time.Duration, adaptive bool) *redis.AutoPipelineOptions {
		o := apOptions(false)
		o.MaxFlushDelay, o.AdaptiveDelay = d, adaptive
		return o
	}
	concurrent := func(n int) *redis.AutoPipelineOptions {
		o := apOptions(false)
		o.Unordered, o.MaxConcurrentBatches = true, n
		return o
	}
	rs, rsFD := newRedshard(apOptions(false)), newRedshard(apOptions(true))
	rsC2, rsC4 := newRedshard(concurrent(2)), newRedshard(concurrent(4))
	rsDelay, rsAdaptive := newRedshard(withDelay(100*time.Microsecond, false)), newRedshard(withDelay(100*time.Microsecond, true))

	ctx := context.Background()
	val := string(make([]byte, 100))
	names := make([]string, keys)
	owner := make([]int, keys) // index in list of each key's shard
	for i := range names {
		names[i] = "bench:" + strconv.Itoa(i)
		s, _ := rs.ShardFor(names[i])
		owner[i] = slices.IndexFunc(list, func(x redshard.Shard) bool { return x.Name == s })
	}
	pipe := rs.Pipeline()
	for _, k := range names {
		pipe.Set(ctx, k, val, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	// byHand returns the AutoPipeliners of a plain client per shard.
	byHand := func(fd bool) []*redis.AutoPipeliner {
		var aps []*redis.AutoPipeliner
		for _, s := range list {
			c := redis.NewClient(&redis.Options{Addr: s.Addr, AutoPipelineOptions: apOptions(fd)})
			b.Cleanup(func() { c.Close() })
			ap, err := c.AutoPipeline()
			if err != nil {
				b.Fatal(err)
			}
			aps = append(aps, ap)
		}
		return aps
	}
	hand, handFD := byHand(false), byHand(true)
	viaRedshard := func(c *redshard.Client) func(i int) error {
		return func(i int) error { return c.Get(ctx, names[i]).Err() }
	}
	viaHand := func(aps []*redis.AutoPipeliner) func(i int) error {
		return func(i int) error { return aps[owner[i]].Get(ctx, names[i]).Err() }
	}
	for _, sys := range []struct {
		name string
		get  func(i int) error
	}{
		{"redshard-ap", viaRedshard(rs)},
		{"redshard-ap-fullduplex", viaRedshard(rsFD)},
		{"redshard-ap-2batches", viaRedshard(rsC2)},
		{"redshard-ap-4batches", viaRedshard(rsC4)},
		{"redshard-ap-delay100us", viaRedshard(rsDelay)},
		{"redshard-ap-adaptive100us", viaRedshard(rsAdaptive)},
		{"goredis-ap-per-shard", viaHand(hand)},
		{"goredis-ap-fullduplex-per-shard", viaHand(handFD)},
	} {
		b.Run(sys.name, func(b *testing.B) { benchGets(b, names, sys.get) })
	}
}
