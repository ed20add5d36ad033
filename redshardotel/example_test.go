package redshardotel_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/redshardotel"
)

// Example instruments a client over two embedded shards and lists the
// metrics one collection exports. A real program passes its own meter
// provider (with an OTLP or Prometheus exporter), or sets the global one.
func Example() {
	ctx := context.Background()
	var shards []redshard.Shard
	for _, name := range []string{"cache-a", "cache-b"} {
		m, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		defer m.Close()
		shards = append(shards, redshard.Shard{Name: name, Addr: m.Addr()})
	}
	rdb, err := redshard.NewClient(&redshard.Options{
		Shards:  shards,
		HotKeys: &redshard.HotKeyOptions{Mitigation: redshard.LocalCache},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	inst, err := redshardotel.InstrumentMetrics(rdb, redshardotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	defer inst.Unregister()

	var c redis.UniversalClient = rdb // the application does not change
	c.Set(ctx, "user:1", "ada", 0)
	c.Get(ctx, "user:1")
	c.Get(ctx, "user:2") // redis.Nil: a miss, not an error

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	var names []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names = append(names, m.Name+" ("+m.Unit+")")
		}
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Println(n)
	}
	// Output:
	// db.client.operation.duration (s)
	// redis.client.csc.requests ({request})
	// redshard.client.operation.duration (s)
	// redshard.failover.commands ({command})
	// redshard.handoff.active (1)
	// redshard.handoff.errors ({error})
	// redshard.handoff.moved ({key})
	// redshard.hot.coalesced ({request})
	// redshard.hot.invalidations ({key})
	// redshard.hot.tracking.lost ({event})
	// redshard.hotkeys.count ({key})
	// redshard.load.canceled ({request})
	// redshard.load.coalesced ({request})
	// redshard.load.errors ({flight})
	// redshard.load.lease.waits ({wait})
	// redshard.load.leases ({flight})
	// redshard.load.loads ({call})
	// redshard.load.requests ({request})
	// redshard.load.store.errors ({value})
	// redshard.outage.keys.cleaned ({key})
	// redshard.rebalance.epoch (1)
	// redshard.rebalance.estimate ({key})
	// redshard.rebalance.failed ({key})
	// redshard.rebalance.moved ({key})
	// redshard.rebalance.running (1)
	// redshard.rebalance.runs ({run})
	// redshard.rebalance.scanned ({key})
	// redshard.ring.epoch (1)
	// redshard.shard.downs ({event})
	// redshard.shard.share (1)
	// redshard.shard.up ({shard})
	// redshard.shard.weight (1)
}

// ExampleErrorType shows the error.type values of a few errors.
func ExampleErrorType() {
	for _, err := range []error{
		nil,
		redis.Nil,
		fmt.Errorf("rename a b: %w", redshard.ErrCrossShard),
		context.Canceled,
	} {
		fmt.Printf("%q\n", redshardotel.ErrorType(err))
	}
	// Output:
	// ""
	// ""
	// "redshard.cross_shard"
	// "canceled"
}

// ExampleInstrumentShards traces every shard client with redisotel: an
// MGET over two shards is one span per shard.
func ExampleInstrumentShards() {
	ctx := context.Background()
	var shards []redshard.Shard
	for _, name := range []string{"cache-a", "cache-b"} {
		m, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		defer m.Close()
		shards = append(shards, redshard.Shard{Name: name, Addr: m.Addr()})
	}
	rdb, err := redshard.NewClient(&redshard.Options{Shards: shards})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(ctx)
	err = redshardotel.InstrumentShards(rdb, func(s redshard.Shard, host *redis.Client) error {
		return redisotel.InstrumentTracing(host, redisotel.WithTracerProvider(tp),
			redisotel.WithAttributes(attribute.String("redshard.shard", s.Name)))
	})
	if err != nil {
		log.Fatal(err)
	}

	a, b := keyOn(rdb, "cache-a"), keyOn(rdb, "cache-b")
	rdb.MSet(ctx, a, "1", b, "2") // opens a connection to each shard
	spans.Reset()                 // forget the connections' handshakes

	rdb.MGet(ctx, a, b)
	var names []string
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "redshard.shard" {
				names = append(names, s.Name()+" on "+kv.Value.AsString())
			}
		}
	}
	slices.Sort(names)
	fmt.Println(strings.Join(names, "\n"))
	// Output:
	// mget on cache-a
	// mget on cache-b
}

// keyOn returns a key the named shard owns.
func keyOn(rdb *redshard.Client, shard string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("key:%d", i)
		if name, _ := rdb.ShardFor(k); name == shard {
			return k
		}
	}
}
