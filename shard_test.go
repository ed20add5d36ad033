package redshard_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// pingCounter counts successful PINGs through the client it is added to.
type pingCounter struct{ ok chan<- struct{} }

func (p pingCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p pingCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && cmd.Name() == "ping" {
			select {
			case p.ok <- struct{}{}:
			default:
			}
		}
		return err
	}
}
func (p pingCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestNewShardClientReachesEveryConnection: shards whose addresses only a
// custom dialer can reach work for commands, heartbeats and hot-key reads,
// because every connection redshard opens goes through NewShardClient.
func TestNewShardClientReachesEveryConnection(t *testing.T) {
	real := map[string]string{}
	var shards []redshard.Shard
	for _, name := range []string{"a", "b"} {
		m := miniredis.RunT(t)
		fake := name + ".shard.invalid:6379"
		real[fake] = m.Addr()
		shards = append(shards, redshard.Shard{Name: name, Addr: fake})
	}
	pings := make(chan struct{}, 1)
	var mu sync.Mutex
	built := map[string]int{} // shard -> clients built
	c, err := redshard.NewClient(&redshard.Options{
		Shards:  shards,
		Health:  &redshard.HealthOptions{Interval: 10 * time.Millisecond, Timeout: time.Second},
		HotKeys: &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, Detector: hotFrozenDetector()},
		NewShardClient: func(s redshard.Shard, opt *redis.Options) *redis.Client {
			mu.Lock()
			built[s.Name]++
			mu.Unlock()
			addr := real[opt.Addr]
			opt.Dialer = func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
			cl := redis.NewClient(opt)
			if opt.PoolSize == 1 && opt.MaxRetries == -1 { // the heartbeat
				cl.AddHook(pingCounter{ok: pings})
			}
			return cl
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil { // first use: starts the heartbeat
		t.Fatal(err)
	}
	for range 6 { // heartbeats succeed: 3 rounds of 2 shards
		select {
		case <-pings:
		case <-time.After(10 * time.Second):
			t.Fatal("no successful heartbeat through NewShardClient's dialer")
		}
	}
	for i := range 40 { // make k hot and read it through the hot path
		if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
			t.Fatalf("GET = %q, %v", v, err)
		}
		if i == 20 {
			c.HotKeys() // refreshes the frozen detector's hot set
		}
	}
	st := c.Stats()
	if st.ShardDowns != 0 {
		t.Errorf("ShardDowns = %d; a heartbeat ignored NewShardClient", st.ShardDowns)
	}
	if st.Hot.CacheHits+st.Hot.CacheMisses == 0 {
		t.Errorf("no hot read was served: %+v", st.Hot)
	}
	owner, _ := c.ShardFor("k")
	mu.Lock()
	defer mu.Unlock()
	// command client + heartbeat, and the tracking probe's reader on the owner.
	if built[owner] < 3 {
		t.Errorf("NewShardClient built %d clients for %s, want >= 3 (command, heartbeat, tracking reader)", built[owner], owner)
	}
}

// TestMembershipChangesRetainNothing: the backends of removed shards leave
// the client once closed, however many changes run.
func TestMembershipChangesRetainNothing(t *testing.T) {
	defer redshard.SetRetireGrace(time.Millisecond)()
	cl := newCluster(t, 1, 1, 1)
	ctx := t.Context()
	for i := range 5 {
		if err := cl.c.SetShards(ctx, cl.shards[:2]); err != nil {
			t.Fatalf("round %d: remove: %v", i, err)
		}
		if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cl.c.SetShards(ctx, cl.shards); err != nil {
			t.Fatalf("round %d: add: %v", i, err)
		}
		if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for cl.c.Retiring() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d groups of removed shards still held after 5 changes", cl.c.Retiring())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCloseWaitsForLoads: Close cancels a running GetOrLoad load and returns
// only after it has returned.
func TestCloseWaitsForLoads(t *testing.T) {
	cl := newCluster(t, 1, 1)
	c, err := redshard.NewClient(&redshard.Options{Shards: cl.shards})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var returned atomic.Bool
	errc := make(chan error, 1)
	go func() {
		_, err := c.GetOrLoad(context.Background(), "k", 0, func(ctx context.Context) (string, error) {
			close(started)
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond) // a slow clean-up Close must wait for
			returned.Store(true)
			return "", ctx.Err()
		})
		errc <- err
	}()
	<-started
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Error("Close returned while the load was still running")
	}
	if err := <-errc; err == nil {
		t.Error("GetOrLoad succeeded after Close cancelled its load")
	}
	if _, err := c.GetOrLoad(context.Background(), "k", 0, func(context.Context) (string, error) { return "v", nil }); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("GetOrLoad after Close = %v, want redis.ErrClosed", err)
	}
}

// recordHook records the commands it sees and their errors.
type recordHook struct {
	mu   sync.Mutex
	seen []string
}

func (h *recordHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *recordHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.mu.Lock()
		defer h.mu.Unlock()
		e := "ok"
		if err != nil {
			e = err.Error()
		}
		h.seen = append(h.seen, cmd.Name()+" "+e)
		return err
	}
}
func (h *recordHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.seen = append(h.seen, "pipeline "+cmds[0].Name())
		return err
	}
}

func (h *recordHook) list() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.seen, "; ")
}

// TestCommandAndShardHooks: command hooks see the caller's commands, refused
// ones included; shard hooks are built per shard, for shards added later too.
func TestCommandAndShardHooks(t *testing.T) {
	cl := newCluster(t, 1, 1)
	ctx := t.Context()
	cmdHook := &recordHook{}
	cl.c.AddCommandHook(cmdHook)
	var mu sync.Mutex
	perShard := map[string]*recordHook{}
	cl.c.AddShardHook(func(s redshard.Shard) redis.Hook {
		mu.Lock()
		defer mu.Unlock()
		h := &recordHook{}
		perShard[s.Name] = h
		return h
	})
	a, b := cl.twoShardKeys(t)
	cl.c.MGet(ctx, a, b)
	if err := cl.c.Rename(ctx, a, b).Err(); !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("RENAME = %v, want ErrCrossShard", err)
	}
	cl.c.Pipelined(ctx, func(p redis.Pipeliner) error { p.Get(ctx, a); return nil })
	got := cmdHook.list()
	for _, want := range []string{"mget ok", "rename " + redshard.ErrCrossShard.Error(), "pipeline get"} {
		if !strings.Contains(got, want) {
			t.Errorf("command hook saw %q; want %q in it", got, want)
		}
	}
	mu.Lock()
	for _, name := range []string{"shard-0", "shard-1"} {
		if h := perShard[name]; h == nil || !strings.Contains(h.list(), "mget ok") {
			t.Errorf("shard hook of %s: %v; want its own MGET", name, h)
		}
	}
	mu.Unlock()

	m := miniredis.RunT(t)
	if err := cl.c.SetShards(ctx, append(cl.shards, redshard.Shard{Name: "shard-new", Addr: m.Addr()})); err != nil {
		t.Fatal(err)
	}
	k := cl.keysOn(t, "shard-new", "n", 1)[0]
	cl.c.Get(ctx, k)
	mu.Lock()
	defer mu.Unlock()
	if h := perShard["shard-new"]; h == nil || !strings.Contains(h.list(), "get") {
		t.Errorf("the shard added later has no hook of its own (%v)", perShard)
	}
}
