package localcache_test

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
)

func BenchmarkGet(b *testing.B) {
	for _, n := range []int{1, 1024} {
		c := newCache(b, nil)
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "user:" + strconv.Itoa(i)
			c.Set(i%8, keys[i], "get", i, 64, hour)
		}
		c.Wait()
		name := "hit/keys=" + strconv.Itoa(n)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := i % n
				if _, ok := c.Get(k%8, keys[k], "get"); !ok {
					b.Fatal("miss")
				}
				i++
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(n)
				for pb.Next() {
					k := i % n
					if _, ok := c.Get(k%8, keys[k], "get"); !ok {
						b.Error("miss")
						return
					}
					i++
				}
			})
		})
	}
	c := newCache(b, nil)
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Get(0, "absent", "get")
		}
	})
}

func BenchmarkSet(b *testing.B) {
	for _, n := range []int{1, 1024} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "user:" + strconv.Itoa(i)
		}
		name := "keys=" + strconv.Itoa(n)
		b.Run(name, func(b *testing.B) {
			c := newCache(b, nil)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.Set(0, keys[i%n], "get", i, 64, hour)
				i++
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			c := newCache(b, nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(n)
				for pb.Next() {
					c.Set(0, keys[i%n], "get", i, 64, hour)
					i++
				}
			})
		})
	}
}

// BenchmarkGetZipf reads keys drawn from a Zipf distribution (s=1.2) over
// a million names, as redshard bench's zipf workload does, from a cache
// holding the 100,000 most read ones: the hits of a skewed workload, with
// the key space's memory traffic that BenchmarkGet's few keys do not have.
func BenchmarkGetZipf(b *testing.B) {
	const held, space, draws = 100_000, 1_000_000, 1 << 20
	c := newCache(b, nil)
	keys := make([]string, space)
	for i := range keys {
		keys[i] = "bp:key:" + strconv.Itoa(i)
	}
	for i := range held {
		c.Set(i%4, keys[i], "get", keys[i], 100, hour)
		if i%1024 == 0 {
			c.Wait() // ristretto drops sets its buffer cannot take
		}
	}
	c.Wait()
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.2, 1, space-1)
	order := make([]int, draws)
	for i := range order {
		order[i] = int(z.Uint64())
	}
	b.ReportAllocs()
	b.ResetTimer()
	var hits atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i, n := rand.IntN(draws), int64(0)
		for pb.Next() {
			k := order[i&(draws-1)]
			if _, ok := c.Get(k%4, keys[k], "get"); ok {
				n++
			}
			i++
		}
		hits.Add(n)
	})
	b.ReportMetric(float64(hits.Load())/float64(b.N), "hits/op")
}
