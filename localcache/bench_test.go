package localcache_test

import (
	"math/rand/v2"
	"strconv"
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
