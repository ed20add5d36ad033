package redshardotel_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/redshardotel"
)

// traceShards adds redisotel's tracing hook to every shard client of cl,
// with the shard's name as an attribute.
func traceShards(t testing.TB, cl *cluster, opts ...redisotel.TracingOption) {
	t.Helper()
	err := redshardotel.InstrumentShards(cl.c, func(s redshard.Shard, host *redis.Client) error {
		return redisotel.InstrumentTracing(host, append(opts, redisotel.WithAttributes(attribute.String("redshard.shard", s.Name)))...)
	})
	if err != nil {
		t.Fatalf("InstrumentShards: %v", err)
	}
}

// TestTracingOneSpanPerShardCommand checks that redisotel's tracing hook,
// added to the shard clients with InstrumentShards (AddShardHook), sees the traffic each shard really gets: an MGET of keys on
// two shards is two MGET spans, one per shard, children of the caller's
// span; a cross-shard RENAME, refused before routing, is none.
func TestTracingOneSpanPerShardCommand(t *testing.T) {
	cl := newCluster(t, 3, redshard.Options{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	traceShards(t, cl, redisotel.WithTracerProvider(tp), redisotel.WithDBStatement(false))

	a, b := cl.keyOn(t, "shard-0", "a"), cl.keyOn(t, "shard-1", "b")
	cl.c.Set(ctx, a, "1", 0)
	cl.c.Set(ctx, b, "2", 0)
	rec.Reset()

	parentCtx, parent := tp.Tracer("test").Start(ctx, "handler")
	got, err := cl.c.MGet(parentCtx, a, b).Result()
	parent.End()
	if err != nil || !slices.Equal(got, []any{"1", "2"}) {
		t.Fatalf("MGET = %v, %v", got, err)
	}

	var mgets []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() != "handler" {
			mgets = append(mgets, s)
		}
	}
	if len(mgets) != 2 {
		t.Fatalf("%d spans for an MGET on two shards, want 2: %v", len(mgets), spanNames(rec.Ended()))
	}
	shards := map[string]bool{}
	for _, s := range mgets {
		if s.Name() != "mget" || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %q kind %v, want a client span named mget", s.Name(), s.SpanKind())
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %q is not a child of the caller's span", s.Name())
		}
		shard, port := "", ""
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "redshard.shard":
				shard = kv.Value.AsString()
			case "server.port":
				port = kv.Value.Emit()
			}
		}
		shards[shard] = true
		if want := server(cl.mini[shard])["server.port"]; port != want {
			t.Errorf("span on %s has server.port %q, want %q", shard, port, want)
		}
	}
	if !shards["shard-0"] || !shards["shard-1"] {
		t.Errorf("MGET spans on shards %v, want shard-0 and shard-1", shards)
	}

	// A pipeline over two shards: one span per shard pipeline. (go-redis
	// opens pipeline connections apart from the others: their handshakes
	// make spans of their own.)
	rec.Reset()
	if _, err := cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, a)
		p.Get(ctx, b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range rec.Ended() {
		if s.Name() == "redis.pipeline get" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d GET pipeline spans for a pipeline on two shards, want 2: %v", n, spanNames(rec.Ended()))
	}

	rec.Reset()
	if err := cl.c.Rename(ctx, a, b).Err(); err == nil {
		t.Fatal("RENAME across shards succeeded")
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("a refused RENAME made %d shard spans: %v", n, spanNames(rec.Ended()))
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	return strings.Join(names, ", ")
}

// TestTracingHookConcurrent runs commands from many goroutines through
// the traced shard clients, for the race detector.
func TestTracingHookConcurrent(t *testing.T) {
	cl := newCluster(t, 2, redshard.Options{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	traceShards(t, cl, redisotel.WithTracerProvider(tp))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 20; i++ {
				if err := cl.c.Set(ctx, "k", "v", 0).Err(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for _, s := range rec.Ended() {
		if s.Name() == "set" {
			n++
		}
	}
	if n != 160 {
		t.Errorf("%d set spans for 160 SETs", n)
	}
}

func TestInstrumentShardsErrors(t *testing.T) {
	cl := newCluster(t, 2, redshard.Options{})
	noop := func(redshard.Shard, *redis.Client) error { return nil }
	if err := redshardotel.InstrumentShards(nil, noop); !errors.Is(err, redshardotel.ErrNilClient) {
		t.Errorf("nil client: %v, want ErrNilClient", err)
	}
	if err := redshardotel.InstrumentShards(cl.c, nil); err == nil {
		t.Error("nil instrument accepted")
	}
	// The host never connects: a command sent to it fails, once per shard.
	err := redshardotel.InstrumentShards(cl.c, func(s redshard.Shard, host *redis.Client) error {
		return host.Ping(ctx).Err()
	})
	if err == nil || !strings.Contains(err.Error(), "shard-0") || !strings.Contains(err.Error(), "shard-1") {
		t.Errorf("instrument errors: %v, want one per shard", err)
	}
	// The client still works.
	if err := cl.c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestInstrumentShardsPassesResults checks that commands, pipelines and
// transactions through a host return what they would without it, and that
// a shard added later is instrumented too.
func TestInstrumentShardsPassesResults(t *testing.T) {
	cl := newCluster(t, 2, redshard.Options{})
	var mu sync.Mutex
	seen := map[string]int{} // shard -> operations its host's hook saw
	err := redshardotel.InstrumentShards(cl.c, func(s redshard.Shard, host *redis.Client) error {
		host.AddHook(countHook{fn: func() { mu.Lock(); seen[s.Name]++; mu.Unlock() }})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a := cl.keyOn(t, "shard-0", "a")
	cl.c.Set(ctx, a, "1", 0)
	if got, err := cl.c.Get(ctx, a).Result(); err != nil || got != "1" {
		t.Fatalf("GET = %q, %v", got, err)
	}
	if err := cl.c.Get(ctx, "missing:"+a).Err(); err != redis.Nil {
		t.Fatalf("GET missing = %v, want redis.Nil", err)
	}
	cmds, err := cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, a)
		p.LPush(ctx, a, "x") // WRONGTYPE
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") || cmds[0].(*redis.IntCmd).Val() != 2 {
		t.Fatalf("pipeline: %v, %v", cmds, err)
	}
	tx, err := cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, a)
		p.Get(ctx, a)
		return nil
	})
	if err != nil || tx[1].(*redis.StringCmd).Val() != "3" {
		t.Fatalf("transaction: %v, %v", tx, err)
	}

	extra := newCluster(t, 1, redshard.Options{}).mini["shard-0"]
	if err := cl.c.SetShards(ctx, append(cl.c.Shards(), redshard.Shard{Name: "shard-new", Addr: extra.Addr()})); err != nil {
		t.Fatal(err)
	}
	cl.c.Set(ctx, cl.keyOn(t, "shard-new", "n"), "v", 0)
	mu.Lock()
	defer mu.Unlock()
	if seen["shard-0"] < 5 || seen["shard-new"] < 1 {
		t.Errorf("operations seen by the hosts' hooks: %v, want >= 5 on shard-0 and >= 1 on shard-new", seen)
	}
}

// countHook calls fn for each command and pipeline.
type countHook struct{ fn func() }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.fn(); return next(ctx, cmd) }
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.fn(); return next(ctx, cmds) }
}
