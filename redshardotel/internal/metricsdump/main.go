// Command metricsdump runs a small workload on a redshard client over
// embedded miniredis shards, instrumented with redshardotel, and prints
// every metric of one collection: name, kind, unit, and each point's
// attributes and value. It needs no server and no network:
//
//	go run ./internal/metricsdump
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/redshardotel"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx := context.Background()
	var shards []redshard.Shard
	for i, w := range []float64{1, 1, 2} {
		m, err := miniredis.Run()
		if err != nil {
			return err
		}
		defer m.Close()
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: m.Addr(), Weight: w})
	}
	c, err := redshard.NewClient(&redshard.Options{
		Shards: shards,
		HotKeys: &redshard.HotKeyOptions{
			Mitigation: redshard.LocalCache, MaxStaleness: time.Minute,
			Detector: &hotkey.Config{MinRate: 1, MinShare: 0.05},
		},
	})
	if err != nil {
		return err
	}
	defer c.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	inst, err := redshardotel.InstrumentMetrics(c, redshardotel.WithMeterProvider(mp), redshardotel.WithHotKeyNames(true))
	if err != nil {
		return err
	}
	defer inst.Unregister()

	workload(ctx, c)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return err
	}
	dump(os.Stdout, rm)
	return nil
}

// workload runs plain commands, a hot key, refused and failed commands and
// a GetOrLoad.
func workload(ctx context.Context, c *redshard.Client) {
	for i := 0; i < 10; i++ {
		c.Set(ctx, fmt.Sprintf("user:%d", i), "v", 0)
	}
	c.MGet(ctx, "user:1", "user:2", "user:3")
	c.Get(ctx, "missing")       // redis.Nil: no error
	c.LPush(ctx, "user:1", "x") // WRONGTYPE
	c.Rename(ctx, a(c), b(c))   // refused: the keys live on two shards
	c.Set(ctx, "celebrity", "v", 0)
	for i := 0; i < 40; i++ { // hot enough for MinShare 0.05
		c.Type(ctx, "celebrity")
	}
	c.HotKeys() // refresh the hot set
	for i := 0; i < 20; i++ {
		c.Get(ctx, "celebrity") // the first fills the local cache, the rest hit it
	}
	load := func(context.Context) (string, error) { return "loaded", nil }
	c.GetOrLoad(ctx, "profile:7", time.Minute, load)
	c.GetOrLoad(ctx, "profile:7", time.Minute, load)
}

// a and b are two keys on different shards.
func a(c *redshard.Client) string { return keyNot(c, "") }
func b(c *redshard.Client) string { s, _ := c.ShardFor(a(c)); return keyNot(c, s) }

func keyNot(c *redshard.Client, shard string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if s, _ := c.ShardFor(k); s != shard {
			return k
		}
	}
}

func dump(w *os.File, rm metricdata.ResourceMetrics) {
	var ms []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		ms = append(ms, sm.Metrics...)
	}
	slices.SortFunc(ms, func(x, y metricdata.Metrics) int { return strings.Compare(x.Name, y.Name) })
	enc := attribute.DefaultEncoder()
	for _, m := range ms {
		var lines []string
		kind := ""
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			kind = "histogram"
			for _, p := range d.DataPoints {
				lines = append(lines, fmt.Sprintf("{%s} count=%d sum=%.6fs", p.Attributes.Encoded(enc), p.Count, p.Sum))
			}
		case metricdata.Sum[int64]:
			kind = "counter"
			for _, p := range d.DataPoints {
				lines = append(lines, fmt.Sprintf("{%s} %d", p.Attributes.Encoded(enc), p.Value))
			}
		case metricdata.Gauge[int64]:
			kind = "gauge"
			for _, p := range d.DataPoints {
				lines = append(lines, fmt.Sprintf("{%s} %d", p.Attributes.Encoded(enc), p.Value))
			}
		case metricdata.Gauge[float64]:
			kind = "gauge"
			for _, p := range d.DataPoints {
				lines = append(lines, fmt.Sprintf("{%s} %.4g", p.Attributes.Encoded(enc), p.Value))
			}
		}
		slices.Sort(lines)
		fmt.Fprintf(w, "%s %s %s\n", m.Name, kind, m.Unit)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}
