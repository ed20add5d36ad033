package redshardotel_test

import (
	"context"
	"net"
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
)

// redisotelHook returns a shard hook factory that runs redisotel's tracing
// hook. redisotel exports no hook value, only InstrumentTracing(rdb), which
// adds one to a *redis.Client; so each shard gets a client of its own that
// never connects, InstrumentTracing adds the hook to it, and a last hook
// added after it hands each command back to the shard client's chain
// (carried in the context) instead of sending it.
func redisotelHook(t testing.TB, opts ...redisotel.TracingOption) func(redshard.Shard) redis.Hook {
	return func(s redshard.Shard) redis.Hook {
		host := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		t.Cleanup(func() { _ = host.Close() })
		if err := redisotel.InstrumentTracing(host, append(opts, redisotel.WithAttributes(attribute.String("redshard.shard", s.Name)))...); err != nil {
			t.Errorf("InstrumentTracing: %v", err)
		}
		host.AddHook(handBack{})
		return &hostHook{host: host}
	}
}

// continuation carries the shard client's own chain through host's hooks.
type continuation struct {
	process  redis.ProcessHook
	pipeline redis.ProcessPipelineHook
	err      error // what pipeline returned
}

type contKey struct{}

// hostHook sends a shard client's commands through host's hooks.
type hostHook struct{ host *redis.Client }

func (h *hostHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hostHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.host.Process(context.WithValue(ctx, contKey{}, &continuation{process: next}), cmd)
	}
}

func (h *hostHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c := &continuation{pipeline: next}
		ctx = context.WithValue(ctx, contKey{}, c)
		pipe := h.host.Pipeline()
		for _, cmd := range cmds {
			_ = pipe.Process(ctx, cmd)
		}
		_, _ = pipe.Exec(ctx) // its error is the first command's; the chain's is c.err
		return c.err
	}
}

// handBack is host's innermost hook: it ends host's chain by calling the
// shard client's.
type handBack struct{}

func (handBack) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, net.ErrClosed // host never connects
	}
}

func (handBack) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return ctx.Value(contKey{}).(*continuation).process(ctx, cmd)
	}
}

func (handBack) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c := ctx.Value(contKey{}).(*continuation)
		c.err = c.pipeline(ctx, cmds)
		return c.err
	}
}

// TestTracingOneSpanPerShardCommand checks that a tracing hook added with
// AddShardHook sees the traffic each shard really gets: an MGET of keys on
// two shards is two MGET spans, one per shard, children of the caller's
// span; a cross-shard RENAME, refused before routing, is none.
func TestTracingOneSpanPerShardCommand(t *testing.T) {
	cl := newCluster(t, 3, redshard.Options{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cl.c.AddShardHook(redisotelHook(t, redisotel.WithTracerProvider(tp), redisotel.WithDBStatement(false)))

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
	cl.c.AddShardHook(redisotelHook(t, redisotel.WithTracerProvider(tp)))
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
