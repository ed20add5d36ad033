package redshardotel

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

func sdkHistogram(t testing.TB) (metric.Float64Histogram, *sdkmetric.ManualReader) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	h, err := mp.Meter("test").Float64Histogram("d")
	if err != nil {
		t.Fatal(err)
	}
	return h, r
}

// TestOpHookBoundsAttributeSets checks that past maxOps distinct operations
// the hook stops keeping attribute sets but still records.
func TestOpHookBoundsAttributeSets(t *testing.T) {
	hist, r := sdkHistogram(t)
	h := newOpHook(new(atomic.Bool), hist, nil)
	process := h.ProcessHook(func(context.Context, redis.Cmder) error { return nil })
	for i := 0; i < maxOps+10; i++ {
		_ = process(context.Background(), redis.NewCmd(context.Background(), fmt.Sprintf("cmd%d", i)))
	}
	if n := len(*h.ops.Load()); n != maxOps {
		t.Errorf("%d attribute sets kept, want %d", n, maxOps)
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if n := len(rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints); n != maxOps+10 {
		t.Errorf("%d points, want %d", n, maxOps+10)
	}
}

// TestOpHookConcurrent builds attribute sets from many goroutines, for
// the race detector.
func TestOpHookConcurrent(t *testing.T) {
	hist, _ := sdkHistogram(t)
	h := newOpHook(new(atomic.Bool), hist, nil)
	process := h.ProcessHook(func(context.Context, redis.Cmder) error { return nil })
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 200; i++ {
				_ = process(context.Background(), redis.NewCmd(context.Background(), fmt.Sprintf("cmd%d", i%50)))
			}
		})
	}
	wg.Wait()
	if n := len(*h.ops.Load()); n != 50 {
		t.Errorf("%d attribute sets, want 50", n)
	}
}

// BenchmarkHook is the cost of the hook around a command that costs
// nothing: with a no-op histogram (the hook's own work: two clock reads and
// an attribute set lookup) and with the SDK's.
func BenchmarkHook(b *testing.B) {
	sdk, _ := sdkHistogram(b)
	base := []attribute.KeyValue{semconv.DBSystemNameRedis, ShardKey.String("shard-0"), semconv.ServerAddress("127.0.0.1"), semconv.ServerPort(6379)}
	for _, tc := range []struct {
		name string
		hist metric.Float64Histogram
	}{
		{"noop", noop.Float64Histogram{}},
		{"sdk", sdk},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := newOpHook(new(atomic.Bool), tc.hist, base)
			process := h.ProcessHook(func(context.Context, redis.Cmder) error { return nil })
			cmd := redis.NewStringCmd(context.Background(), "get", "k")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_ = process(ctx, cmd)
			}
		})
	}
}
