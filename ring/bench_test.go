package ring_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/ring"
)

// benchKeys is precomputed so that formatting keys is not measured.
var benchKeys = func() []string {
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	return keys
}()

const benchMask = 1<<16 - 1

var benchSizes = []int{10, 100, 1000}

func shardNodes(n int) []ring.Node {
	nodes := make([]ring.Node, n)
	for i := range nodes {
		nodes[i] = ring.Node{Name: "shard-" + strconv.Itoa(i)}
	}
	return nodes
}

// openGoRedisRing returns a go-redis Ring over n shards that are never
// dialed: the heartbeat does not ping, and every dial is counted in dials
// and refused.
func openGoRedisRing(n int, dials *atomic.Int64) *redis.Ring {
	addrs := make(map[string]string, n)
	for i := range n {
		addrs["shard-"+strconv.Itoa(i)] = "127.0.0.1:" + strconv.Itoa(i+1)
	}
	return redis.NewRing(&redis.RingOptions{
		Addrs:              addrs,
		HeartbeatFrequency: time.Hour,
		HeartbeatFn:        func(context.Context, *redis.Client) bool { return true },
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("benchmark: no dialing")
		},
	})
}

// newGoRedisRing is openGoRedisRing for one benchmark: the cleanup closes
// the Ring and fails the benchmark if anything was dialed.
func newGoRedisRing(b *testing.B, n int) *redis.Ring {
	b.Helper()
	var dials atomic.Int64
	rg := openGoRedisRing(n, &dials)
	b.Cleanup(func() {
		if err := rg.Close(); err != nil {
			b.Error(err)
		}
		if d := dials.Load(); d != 0 {
			b.Errorf("go-redis dialed %d times", d)
		}
	})
	return rg
}

func mustNew(b testing.TB, nodes []ring.Node, cfg *ring.Config) *ring.Ring {
	b.Helper()
	r, err := ring.New(nodes, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkLookup compares choosing the shard of a key with this package
// (LookupIndex) and with go-redis's Ring (GetShardClientForKey).
func BenchmarkLookup(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("redshard/%d", n), func(b *testing.B) {
			r := mustNew(b, shardNodes(n), nil)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r.LookupIndex(benchKeys[i&benchMask])
			}
		})
	}
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("goredis/%d", n), func(b *testing.B) {
			rg := newGoRedisRing(b, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := rg.GetShardClientForKey(benchKeys[i&benchMask]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLookupParallel is BenchmarkLookup from GOMAXPROCS goroutines.
func BenchmarkLookupParallel(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("redshard/%d", n), func(b *testing.B) {
			r := mustNew(b, shardNodes(n), nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				sum := 0
				for i := 0; pb.Next(); i++ {
					sum += r.LookupIndex(benchKeys[i&benchMask])
				}
				runtime.KeepAlive(sum)
			})
		})
	}
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("goredis/%d", n), func(b *testing.B) {
			rg := newGoRedisRing(b, n)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					if _, err := rg.GetShardClientForKey(benchKeys[i&benchMask]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkHash is the floor for a lookup: hashing the same keys alone.
func BenchmarkHash(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		xxhash.Sum64String(benchKeys[i&benchMask])
	}
}

// BenchmarkHashParallel is BenchmarkHash from GOMAXPROCS goroutines.
func BenchmarkHashParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var sum uint64
		for i := 0; pb.Next(); i++ {
			sum += xxhash.Sum64String(benchKeys[i&benchMask])
		}
		runtime.KeepAlive(sum)
	})
}

// retained returns the heap bytes still reachable from what build returns.
func retained(build func() any) float64 {
	var before, after runtime.MemStats
	// Two collections each side: a build's scratch goes back to a
	// sync.Pool, which keeps it through one collection (as its victim)
	// and drops it at the second; it is not the ring's.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

// BenchmarkNew builds rings of default weights; retained-B is the heap one
// ring keeps alive. The goredis rows build go-redis Rings for comparison
// (closing them is not timed).
func BenchmarkNew(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("redshard/%d", n), func(b *testing.B) {
			nodes := shardNodes(n)
			b.ReportAllocs()
			for b.Loop() {
				mustNew(b, nodes, nil)
			}
			b.ReportMetric(retained(func() any { return mustNew(b, nodes, nil) }), "retained-B")
		})
	}
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("goredis/%d", n), func(b *testing.B) {
			var dials atomic.Int64
			b.ReportAllocs()
			for b.Loop() {
				rg := openGoRedisRing(n, &dials)
				b.StopTimer()
				rg.Close()
				b.StartTimer()
			}
			b.ReportMetric(retained(func() any { return newGoRedisRing(b, n) }), "retained-B")
			if d := dials.Load(); d != 0 {
				b.Errorf("go-redis dialed %d times", d)
			}
		})
	}
}

// BenchmarkAddShard adds a 1001st shard to a 1000-shard ring: by a full New,
// by With (which reuses the old ring's points), and with go-redis's SetAddrs
// (which alternately adds and removes the shard).
func BenchmarkAddShard(b *testing.B) {
	old := shardNodes(1000)
	grown := shardNodes(1001)
	b.Run("redshard/New", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			mustNew(b, grown, nil)
		}
	})
	b.Run("redshard/With", func(b *testing.B) {
		r := mustNew(b, old, nil)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.With(grown); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("goredis/SetAddrs", func(b *testing.B) {
		rg := newGoRedisRing(b, 1000)
		addrs := make([]map[string]string, 2)
		for k, n := range []int{1001, 1000} {
			addrs[k] = make(map[string]string, n)
			for i := range n {
				addrs[k]["shard-"+strconv.Itoa(i)] = "127.0.0.1:" + strconv.Itoa(i+1)
			}
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			rg.SetAddrs(addrs[i%2])
		}
	})
}

// maxShare is the hottest node's exact share over the mean (see Shares).
func maxShare(r *ring.Ring) float64 {
	hot := 0.0
	for _, s := range r.Shares() {
		hot = max(hot, s*float64(r.Len()))
	}
	return hot
}

// recipes are the placement recipes the benchmarks compare, each with its
// default VnodesPerWeight.
var recipes = []struct {
	name string
	cfg  *ring.Config
}{
	{"recipe1", nil},
	{"recipe2", &ring.Config{Recipe: ring.Recipe2}},
}

// BenchmarkBuild builds rings of equal "shard-%d" nodes under each recipe.
// Besides the time and allocations of a build it reports heap-B, the heap
// one ring keeps alive, and balance, the hottest node's exact share over
// the mean; both are deterministic.
func BenchmarkBuild(b *testing.B) {
	for _, rc := range recipes {
		for _, n := range benchSizes {
			b.Run(rc.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				nodes := shardNodes(n)
				b.ReportAllocs()
				for b.Loop() {
					mustNew(b, nodes, rc.cfg)
				}
				b.ReportMetric(retained(func() any { return mustNew(b, nodes, rc.cfg) }), "heap-B")
				b.ReportMetric(maxShare(mustNew(b, nodes, rc.cfg)), "balance")
			})
		}
	}
}

// streamMemory reads and writes a buffer of size bytes, one word a cache
// line, on its own goroutine until the returned function is called, as an
// application around the ring would: the ring's lines are evicted from
// the caches the two share.
func streamMemory(size int) (stop func()) {
	buf := make([]uint64, size/8)
	var quit atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !quit.Load() {
			for i := 0; i < len(buf); i += 8 {
				buf[i]++
			}
		}
	}()
	return func() {
		quit.Store(true)
		<-done
	}
}

// keyGen writes "key:" and a decimal number into a buffer the caller
// reuses, so that a benchmark's keys stay in the L1 cache while their
// positions still spread over the whole ring (a precomputed key set would
// itself be evicted by the streaming, and every lookup of both contenders
// would wait on memory for its key).
type keyGen struct{ buf [24]byte }

func (g *keyGen) key(i int) string {
	b := strconv.AppendUint(append(g.buf[:0], "key:"...), uint64(i), 10)
	return unsafe.String(&b[0], len(b))
}

// BenchmarkLookupCachePressure times LookupIndex on a ring of each recipe
// and go-redis Ring's GetShardClientForKey (a rendezvous hash over every
// shard) in alternating runs of 256 keys, while another goroutine streams
// through 64 MB (stream) or 64 KB, which stays in its core's caches
// (quiet). ns/op is for one run of each. recipe1-ns, recipe2-ns and
// goredis-ns are the median time of one lookup over the runs, floor-ns
// that of making the key and hashing it alone, and goredis/recipe1 and
// goredis/recipe2 the ratios of the medians in the same run: a run during
// which another process had the core is an outlier the median ignores,
// which a sum of the runs would not.
func BenchmarkLookupCachePressure(b *testing.B) {
	for _, load := range []struct {
		name  string
		bytes int
	}{{"quiet", 64 << 10}, {"stream", 64 << 20}} {
		for _, n := range benchSizes {
			b.Run(load.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				lookupPressure(b, n, load.bytes)
			})
		}
	}
}

// lookupPressure is one BenchmarkLookupCachePressure: n shards, and a
// goroutine streaming through streamBytes.
func lookupPressure(b *testing.B, n, streamBytes int) {
	const run = 256
	rings := make([]*ring.Ring, len(recipes))
	for i, rc := range recipes {
		rings[i] = mustNew(b, shardNodes(n), rc.cfg)
	}
	rg := newGoRedisRing(b, n)
	stop := streamMemory(streamBytes)
	defer stop()
	// runs[i] for rings[i], then go-redis, then the floor.
	runs := make([][]time.Duration, len(rings)+2)
	var g keyGen
	sum, k := 0, 0
	var h uint64
	for b.Loop() {
		for i, r := range rings {
			t0 := time.Now()
			for j := range run {
				sum += r.LookupIndex(g.key(k + j))
			}
			runs[i] = append(runs[i], time.Since(t0))
		}
		t0 := time.Now()
		for j := range run {
			if _, err := rg.GetShardClientForKey(g.key(k + j)); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for j := range run {
			h += xxhash.Sum64String(ring.HashTag(g.key(k + j)))
		}
		runs[len(rings)] = append(runs[len(rings)], t1.Sub(t0))
		runs[len(rings)+1] = append(runs[len(rings)+1], time.Since(t1))
		k += run
	}
	runtime.KeepAlive(sum)
	runtime.KeepAlive(h)
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / run
	}
	theirs := median(runs[len(rings)])
	b.ReportMetric(theirs, "goredis-ns")
	b.ReportMetric(median(runs[len(rings)+1]), "floor-ns")
	for i, rc := range recipes {
		ours := median(runs[i])
		b.ReportMetric(ours, rc.name+"-ns")
		b.ReportMetric(theirs/ours, "goredis/"+rc.name)
	}
}
