package hotkey_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// benchKeys returns 1<<16 keys drawn from the named distribution.
func benchKeys(dist string) []string {
	const n = 1 << 16
	keys := make([]string, n)
	r := rand.New(rand.NewPCG(1, 1))
	z := rand.NewZipf(r, 1.1, 1, 1_000_000-1)
	for i := range keys {
		switch dist {
		case "single":
			keys[i] = "celebrity"
		case "zipf":
			keys[i] = "key:" + strconv.FormatUint(z.Uint64(), 10)
		case "uniform":
			keys[i] = "key:" + strconv.Itoa(i)
		}
	}
	return keys
}

var dists = []string{"single", "zipf", "uniform"}

func BenchmarkObserve(b *testing.B) {
	for _, dist := range dists {
		keys := benchKeys(dist)
		b.Run(dist, func(b *testing.B) {
			d := mustNew(b, nil)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d.Observe(keys[i&(len(keys)-1)])
				i++
			}
		})
		b.Run(dist+"/parallel", func(b *testing.B) {
			d := mustNew(b, nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(len(keys))
				for pb.Next() {
					d.Observe(keys[i&(len(keys)-1)])
					i++
				}
			})
		})
	}
}

func BenchmarkIsHot(b *testing.B) {
	d := mustNew(b, nil)
	for _, k := range benchKeys("zipf")[:20_000] {
		d.Observe(k)
	}
	top := d.Top(1)
	if len(top) == 0 || !top[0].Hot {
		b.Fatalf("no hot key: %v", top)
	}
	for _, tc := range []struct{ name, key string }{{"hot", top[0].Key}, {"cold", "key:999999"}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d.IsHot(tc.key) != (tc.name == "hot") {
					b.Fatal("wrong answer")
				}
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d.IsHot(tc.key) != (tc.name == "hot") {
						b.Error("wrong answer")
						return
					}
				}
			})
		})
	}
}
