package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/conformance"
)

// newClusterWith is newCluster with the Options adjusted by set before the
// client is made.
func newClusterWith(t testing.TB, set func(*redshard.Options), weights ...float64) *cluster {
	t.Helper()
	cl := &cluster{mini: map[string]*miniredis.Miniredis{}}
	for i, w := range weights {
		m := miniredis.RunT(t)
		name := fmt.Sprintf("shard-%d", i)
		cl.mini[name] = m
		cl.shards = append(cl.shards, redshard.Shard{Name: name, Addr: m.Addr(), Weight: w})
	}
	opt := &redshard.Options{Shards: cl.shards}
	set(opt)
	c, err := redshard.NewClient(opt)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cl.c = c
	return cl
}

func TestAutoPipelineRoutesEachCommand(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			cl := newCluster(t, 1, 1, 1)
			get := cl.c.AutoPipeline
			if async {
				get = cl.c.AsyncAutoPipeline
			}
			ap, err := get()
			if err != nil {
				t.Fatal(err)
			}
			if ap.IsBlocking() == async {
				t.Fatalf("IsBlocking = %v", ap.IsBlocking())
			}
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Go(func() {
					for i := 0; i < 50; i++ {
						k := fmt.Sprintf("ap:%d:%d", g, i)
						set := ap.Set(ctx, k, i, 0)
						if err := ap.Get(ctx, k).Err(); err != nil { // ordered after the SET
							t.Errorf("GET %s: %v", k, err)
						}
						if err := set.Err(); err != nil {
							t.Errorf("SET %s: %v", k, err)
						}
					}
				})
			}
			wg.Wait()
			for g := 0; g < 8; g++ {
				for i := 0; i < 50; i++ {
					k := fmt.Sprintf("ap:%d:%d", g, i)
					owner, _ := cl.c.ShardFor(k)
					if got, err := cl.mini[owner].Get(k); err != nil || got != fmt.Sprint(i) {
						t.Fatalf("%s on its owner %s = %q, %v", k, owner, got, err)
					}
				}
			}
			a, b := cl.twoShardKeys(t)
			mget := ap.MGet(ctx, a, "ap:0:1", b) // split over shards
			rename := ap.Rename(ctx, a, b)       // refused, alone
			wrong := ap.LPush(ctx, "ap:0:2", "x")
			dbsize := ap.DBSize(ctx) // fanned out
			if v, err := mget.Result(); err != nil || len(v) != 3 || v[1] != "1" || v[0] != nil {
				t.Fatalf("MGET = %v, %v", v, err)
			}
			if err := rename.Err(); !errors.Is(err, redshard.ErrCrossShard) {
				t.Fatalf("cross-shard RENAME = %v, want ErrCrossShard", err)
			}
			if err := wrong.Err(); err == nil || !isWrongType(err) {
				t.Fatalf("LPUSH on a string = %v, want WRONGTYPE", err)
			}
			if n, err := dbsize.Result(); err != nil || n != 400 {
				t.Fatalf("DBSIZE = %d, %v, want 400", n, err)
			}
			if err := ap.Close(); err != nil {
				t.Fatal(err)
			}
			if err := ap.Get(ctx, "ap:0:1").Err(); !errors.Is(err, redis.ErrClosed) {
				t.Fatalf("GET after the AutoPipeliner's Close = %v", err)
			}
			if ap2, err := get(); err != nil || ap2 == ap {
				t.Fatalf("after Close, a new AutoPipeliner: %p, %v", ap2, err)
			}
			if err := cl.c.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := get(); !errors.Is(err, redis.ErrClosed) {
				t.Fatalf("AutoPipeline after the client's Close = %v", err)
			}
		})
	}
}

func isWrongType(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(err.Error()) >= 9 && err.Error()[:9] == "WRONGTYPE"
}

func TestAutoPipelineClosedWithClient(t *testing.T) {
	cl := newCluster(t, 1, 1)
	ap, err := cl.c.AsyncAutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]*redis.StatusCmd, 100)
	for i := range cmds {
		cmds[i] = ap.Set(ctx, fmt.Sprint("k", i), i, 0)
	}
	if err := cl.c.Close(); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds { // every command settled: run, or refused as closed
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.ErrClosed) {
			t.Fatalf("SET %d: %v", i, err)
		}
	}
	if !ap.IsClosed() {
		t.Fatal("the client's Close left its AutoPipeliner open")
	}
}

// TestAutoPipelineConformance runs the drop-in table through redshard's
// AutoPipeliner, and through a client with Options.AutoPipeline, against a
// plain go-redis client: the same results.
func TestAutoPipelineConformance(t *testing.T) {
	for _, mode := range []string{"Client.AutoPipeline", "Options.AutoPipeline"} {
		t.Run(mode, func(t *testing.T) {
			single := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
			defer single.Close()
			cl := newClusterWith(t, func(o *redshard.Options) { o.AutoPipeline = mode == "Options.AutoPipeline" }, 1, 1, 2, 1)
			var c redis.UniversalClient = cl.c
			if mode == "Client.AutoPipeline" {
				ap, err := cl.c.AutoPipeline()
				if err != nil {
					t.Fatal(err)
				}
				c = ap
			}
			for _, st := range conformance.Steps() {
				want := st.Run(ctx, single)
				got := st.Run(ctx, c)
				if got == want {
					continue
				}
				if mode == "Client.AutoPipeline" && st.Name == "Watch tagged" {
					// Documented: the AutoPipeliner's Watch runs on the front.
					continue
				}
				t.Errorf("%s:\n  single server: %s\n  redshard:      %s", st.Name, want, got)
			}
		})
	}
}

// apCountHook counts what reaches a shard: single commands and pipelines,
// with the largest pipeline seen. With hold set, the first command waits
// until release is closed.
type apCountHook struct {
	cmds, pipes, maxBatch atomic.Int64
	mu                    sync.Mutex
	names                 map[string]int // commands by name and first argument, "get k"
	hold                  chan struct{}
	held                  chan struct{}
	once                  sync.Once
}

func newAPCountHook() *apCountHook { return &apCountHook{names: map[string]int{}} }

func (h *apCountHook) note(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		args := c.Args()
		for _, a := range args[1:] {
			h.names[fmt.Sprint(c.Name(), " ", a)]++
		}
	}
}

func (h *apCountHook) count(name, arg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.names[name+" "+arg]
}

func (h *apCountHook) wait() {
	if h.hold != nil {
		h.once.Do(func() {
			close(h.held)
			<-h.hold
		})
	}
}

func (h *apCountHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *apCountHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		h.note(cmd)
		h.wait()
		return next(ctx, cmd)
	}
}
func (h *apCountHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipes.Add(1)
		h.note(cmds...)
		for {
			m := h.maxBatch.Load()
			if int64(len(cmds)) <= m || h.maxBatch.CompareAndSwap(m, int64(len(cmds))) {
				break
			}
		}
		h.wait()
		return next(ctx, cmds)
	}
}

// TestOptionsAutoPipelineBatchesPerShard holds one command on its shard and
// checks that the commands of other goroutines to that shard, queued
// meanwhile, go out as one pipeline.
func TestOptionsAutoPipelineBatchesPerShard(t *testing.T) {
	cl := newClusterWith(t, func(o *redshard.Options) { o.AutoPipeline = true }, 1, 1)
	h := newAPCountHook()
	h.hold, h.held = make(chan struct{}), make(chan struct{})
	cl.c.AddHook(h)
	keys := cl.keysOn(t, "shard-0", "b", 11)
	for _, k := range keys {
		cl.mini["shard-0"].Set(k, "v:"+k)
	}
	ap := cl.c.ShardAutoPipeliner("shard-0")
	if ap == nil {
		t.Fatal("no AutoPipeliner on shard-0")
	}
	var wg sync.WaitGroup
	wg.Go(func() { // held on the shard: the batch in flight
		if v, err := cl.c.Get(ctx, keys[0]).Result(); err != nil || v != "v:"+keys[0] {
			t.Errorf("GET %s = %q, %v", keys[0], v, err)
		}
	})
	<-h.held
	for _, k := range keys[1:] {
		wg.Go(func() {
			if v, err := cl.c.Get(ctx, k).Result(); err != nil || v != "v:"+k {
				t.Errorf("GET %s = %q, %v", k, v, err)
			}
		})
	}
	// Every GET queued behind the held one: its caller waits on its batch.
	for waitingOnBatch() < len(keys) {
		runtime.Gosched()
	}
	close(h.hold)
	wg.Wait()
	if got := h.maxBatch.Load(); got != int64(len(keys)-1) {
		t.Fatalf("largest pipeline to shard-0: %d commands, want %d", got, len(keys)-1)
	}
}

// TestOptionsAutoPipelineUnbatched: what must not share a batch is sent as
// without AutoPipeline, with the same outcome.
func TestOptionsAutoPipelineUnbatched(t *testing.T) {
	cl := newClusterWith(t, func(o *redshard.Options) { o.AutoPipeline = true }, 1, 1)
	h := newAPCountHook()
	cl.c.AddHook(h)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := cl.c.Get(cctx, "k").Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("GET with a cancelled context = %v", err)
	}
	// A blocking command waits on its own connection while others go on.
	done := make(chan error, 1)
	go func() { done <- cl.c.BLPop(ctx, 0, "q").Err() }()
	for cl.c.Get(ctx, "k").Err() != redis.Nil {
		t.Fatal("GET k while BLPOP waits")
	}
	if err := cl.c.RPush(ctx, "q", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("BLPOP: %v", err)
	}
	// Transactions and Watch keep their connection.
	err := cl.c.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Get(ctx, "{w}n").Int()
		if err != nil && err != redis.Nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "{w}n", n+1, 0)
			return nil
		})
		return err
	}, "{w}n")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if n, _ := cl.c.Get(ctx, "{w}n").Int(); n != 1 {
		t.Fatalf("{w}n = %d after Watch", n)
	}
	// WithTimeout's timeout is applied: the command is sent alone, on the
	// caller's context, not in a batch (which runs on the AutoPipeliner's).
	ch := &callerCtxHook{}
	cl.c.AddHook(ch)
	mark := context.WithValue(ctx, callerMark{}, true)
	if err := cl.c.WithTimeout(time.Second).Set(mark, "t", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n := ch.caller.Load(); n != 1 {
		t.Fatalf("WithTimeout SET: sent on the caller's context %d times, want 1", n)
	}
	if err := cl.c.Set(mark, "t", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n := ch.caller.Load(); n != 1 {
		t.Fatalf("plain SET: sent on the caller's context (%d), want in a batch", n)
	}
}

// With ContextTimeoutEnabled, a command whose context has a deadline is
// sent alone, on the caller's context (the deadline bounds its I/O); one
// without rides a batch, which runs on the AutoPipeliner's context. (A lone
// batched command is Processed too, so what tells them apart is the
// context the shard's hook sees.)
func TestOptionsAutoPipelineDeadlineUnbatched(t *testing.T) {
	cl := newClusterWith(t, func(o *redshard.Options) {
		o.AutoPipeline = true
		o.ShardOptions = &redis.Options{ContextTimeoutEnabled: true}
	}, 1, 1)
	h := &callerCtxHook{}
	cl.c.AddHook(h)
	mark := context.WithValue(ctx, callerMark{}, true)
	dctx, cancel := context.WithTimeout(mark, time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		caller int64
	}{{"with a deadline", dctx, 1}, {"without", mark, 0}} {
		before := h.caller.Load()
		if err := cl.c.Set(tc.ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if n := h.caller.Load() - before; n != tc.caller {
			t.Errorf("SET %s: sent on the caller's context %d times, want %d", tc.name, n, tc.caller)
		}
	}
}

type callerMark struct{}

// callerCtxHook counts the SETs a shard gets on a context that carries
// callerMark: the caller's own, not a batch's.
type callerCtxHook struct{ caller atomic.Int64 }

func (h *callerCtxHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *callerCtxHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.saw(ctx, cmd)
		return next(ctx, cmd)
	}
}
func (h *callerCtxHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.saw(ctx, cmd)
		}
		return next(ctx, cmds)
	}
}
func (h *callerCtxHook) saw(ctx context.Context, cmd redis.Cmder) {
	if cmd.Name() == "set" && ctx.Value(callerMark{}) != nil {
		h.caller.Add(1)
	}
}

// waitingOnBatch counts the goroutines waiting for an AutoPipeliner batch.
func waitingOnBatch() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "redis/go-redis/v9.AutoFuture.Wait(")
}

func TestAutoPipelineOptionsValidated(t *testing.T) {
	_, err := redshard.NewClient(&redshard.Options{
		Shards:              []redshard.Shard{{Name: "a", Addr: "127.0.0.1:1"}},
		AutoPipelineOptions: &redis.AutoPipelineOptions{MaxConcurrentBatches: 4},
	})
	if !errors.Is(err, redshard.ErrInvalidOptions) {
		t.Fatalf("MaxConcurrentBatches without Unordered: %v, want ErrInvalidOptions", err)
	}
}
