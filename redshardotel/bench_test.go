package redshardotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/redshardotel"
)

// benchClient is a client over 3 miniredis shards, instrumented with the
// provider mp returns (none if mp is nil).
func benchClient(b *testing.B, mp func(*testing.B) metric.MeterProvider, opt redshard.Options) *redshard.Client {
	b.Helper()
	for i := 0; i < 3; i++ {
		m := miniredis.RunT(b)
		opt.Shards = append(opt.Shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: m.Addr()})
	}
	c, err := redshard.NewClient(&opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if mp != nil {
		if _, err := redshardotel.InstrumentMetrics(c, redshardotel.WithMeterProvider(mp(b))); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// modes: no instrumentation; the hooks with a no-op provider (their own
// cost: clocks, attribute lookup); the hooks with the SDK aggregating
// (a manual reader, never collected).
var modes = []struct {
	name string
	mp   func(*testing.B) metric.MeterProvider
}{
	{"plain", nil},
	{"noop", func(*testing.B) metric.MeterProvider { return noop.NewMeterProvider() }},
	{"instrumented", func(b *testing.B) metric.MeterProvider {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		return mp
	}},
}

// BenchmarkGet is a GET that reaches a shard: both hooks run.
func BenchmarkGet(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			c := benchClient(b, m.mp, redshard.Options{})
			c.Set(ctx, "k", "v", 0)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Get(ctx, "k").Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetParallel is BenchmarkGet from GOMAXPROCS goroutines.
func BenchmarkGetParallel(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			c := benchClient(b, m.mp, redshard.Options{})
			c.Set(ctx, "k", "v", 0)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.Get(ctx, "k").Err(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkCachedGet is a GET of a hot key answered from the local cache:
// only the command hook runs, and the command itself is cheapest, so the
// hook's cost shows most.
func BenchmarkCachedGet(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			t0 := time.Unix(1_700_000_000, 0)
			c := benchClient(b, m.mp, redshard.Options{HotKeys: &redshard.HotKeyOptions{
				Mitigation: redshard.LocalCache, MaxStaleness: time.Hour,
				Detector: frozenDetectorAt(t0),
			}})
			c.Set(ctx, "k", "v", 0)
			for i := 0; i < 20; i++ {
				c.Type(ctx, "k")
			}
			c.HotKeys()
			c.Get(ctx, "k") // fills the cache
			hits := c.Stats().Hot.CacheHits
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Get(ctx, "k").Err(); err != nil {
					b.Fatal(err)
				}
			}
			if got := c.Stats().Hot.CacheHits - hits; got < int64(b.N) {
				b.Fatalf("%d cache hits for %d GETs: the benchmark measured shard reads", got, b.N)
			}
		})
	}
}
