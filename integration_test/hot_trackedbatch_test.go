package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/redistest"
)

// batchGate is a shard hook that sees the tracked reads' pipelines (those
// holding CLIENT CACHING YES): it counts them and their reads, and while
// closed it holds each one before it is sent, until opened.
type batchGate struct {
	pipelines, reads atomic.Int64
	held             atomic.Int64 // pipelines waiting at the gate
	mu               sync.Mutex
	open             chan struct{} // nil: the gate lets everything through
}

func (g *batchGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *batchGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
}

func (g *batchGate) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (g *batchGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *batchGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if strings.EqualFold(fmt.Sprint(c.Args()), "[client caching yes]") {
				n++
			}
		}
		if n > 0 {
			g.pipelines.Add(1)
			g.reads.Add(int64(n))
			g.mu.Lock()
			open := g.open
			g.mu.Unlock()
			if open != nil {
				g.held.Add(1)
				<-open
				g.held.Add(-1)
			}
		}
		return next(ctx, cmds)
	}
}

// waitAll waits for wg's goroutines, then fails t with the first error
// they sent on errs, which nothing else sends on.
func waitAll(t *testing.T, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// inTrackedRead counts the goroutines waiting for the hot path's tracked
// reads: a miss queued for a batch or in one, in its caller (a direct miss)
// or in a flight.
func inTrackedRead() int {
	return stackCount("internal/hot.(*Shard).trackedRead(") + stackCount("internal/hot.(*Path).directMiss(")
}

// stacks returns every goroutine's stack, as runtime.Stack prints them.
func stacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// stackCount counts the goroutines' frames of the function named by frame
// (its package path's tail, receiver and name, and the opening parenthesis).
func stackCount(frame string) int {
	return bytes.Count(stacks(), []byte(frame))
}

// selectCount counts the goroutines parked in a select (their state
// "[select" in the dump) with frame in their stack.
func selectCount(frame string) int {
	count := 0
	for _, g := range bytes.Split(stacks(), []byte("\n\n")) {
		header, _, _ := bytes.Cut(g, []byte("\n"))
		if bytes.Contains(header, []byte("[select")) && bytes.Contains(g, []byte(frame)) {
			count++
		}
	}
	return count
}

// TestHotMissesShareRoundTrips (issue 27): misses of one shard that wait
// at the same moment go out together, their (CLIENT CACHING YES, read)
// pairs in one pipeline on one reader connection. With the shard's batch
// in flight held at a gate and every other miss queued behind it, n misses
// take at most two pipelines: the held one and one with all the rest. Each pair still
// fills the cache as a tracked read does, and another process's write to
// one of those keys is seen through its invalidation.
func TestHotMissesShareRoundTrips(t *testing.T) {
	c, admin := admitClient(t)
	ctx := context.Background()
	gate := &batchGate{}
	c.AddHook(gate)
	const n = 24
	for i := range n {
		key := fmt.Sprint("batch:", i)
		if err := admin.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		c.Get(ctx, key) // counted by the sketch (or filled): the next read is admitted
		if err := admin.Set(ctx, key, fmt.Sprint("v", i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The writes above invalidated whatever the first reads cached.
	eventually(t, "the writes' invalidations", func() bool {
		for i := range n {
			if c.Get(ctx, fmt.Sprint("batch:", i)).Val() != fmt.Sprint("v", i) {
				return false
			}
		}
		return true
	})
	inv := c.Stats().Hot.Invalidations
	for i := range n {
		if err := admin.Set(ctx, fmt.Sprint("batch:", i), fmt.Sprint("w", i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the second writes' invalidations", func() bool {
		return c.Stats().Hot.Invalidations >= inv+n
	})
	gets := infoField(t, admin, "commandstats", "cmdstat_get")
	pipelines, reads := gate.pipelines.Load(), gate.reads.Load()

	gate.close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key, want := fmt.Sprint("batch:", i), fmt.Sprint("w", i)
			if v, err := c.Get(ctx, key).Result(); err != nil || v != want {
				errs <- fmt.Errorf("GET %s = %q, %v; want %q", key, v, err, want)
			}
		}()
	}
	eventually(t, "every miss in a tracked read, one batch held", func() bool {
		return inTrackedRead() == n && gate.held.Load() == 1
	})
	gate.release()
	waitAll(t, &wg, errs)
	pipelines, reads = gate.pipelines.Load()-pipelines, gate.reads.Load()-reads
	// One or two: the held batch takes every miss queued when the shard's
	// sender picked it up, which is all of them when they queue faster
	// than the sender starts (a loaded machine); the rest go together as
	// the next. One pipeline per miss would be n.
	if reads != n || pipelines < 1 || pipelines > 2 {
		t.Fatalf("%d concurrent misses went out as %d tracked reads in %d pipelines; want %d reads in 1 or 2",
			n, reads, pipelines, n)
	}
	if got := infoField(t, admin, "commandstats", "cmdstat_get") - gets; got != n {
		t.Fatalf("%d misses sent %d GETs", n, got)
	}
	// Every pair filled the cache as a tracked read.
	hits := c.Stats().Hot.CacheHits
	for i := range n {
		if v := c.Get(ctx, fmt.Sprint("batch:", i)).Val(); v != fmt.Sprint("w", i) {
			t.Fatalf("GET batch:%d = %q after the batch", i, v)
		}
	}
	if got := c.Stats().Hot.CacheHits - hits; got < n*9/10 {
		t.Fatalf("%d of %d reads after the batch were cache hits; want (almost) all", got, n)
	}
	if err := admin.Set(ctx, "batch:5", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the invalidation of a key read in a batch", func() bool {
		return c.Get(ctx, "batch:5").Val() == "x"
	})
}

// TestHotBatchConnectionKilled (issue 27): the server closes the reader
// connection while a batch of tracked reads is about to go out on it, and
// another process writes one of the keys. The batch fails; its misses read
// from the shard untracked (no error for their callers, the write's value),
// and cache nothing: a later write by another process is seen at once,
// with MaxStaleness an hour, though no invalidation could come for a read
// that the server did not track.
func TestHotBatchConnectionKilled(t *testing.T) {
	c, admin := admitClient(t)
	ctx := context.Background()
	gate := &batchGate{}
	c.AddHook(gate)
	const n = 8
	for i := range n {
		key := fmt.Sprint("killed:", i)
		if err := admin.Set(ctx, key, "v1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		c.Get(ctx, key) // counted: the next read is admitted
		if err := admin.Set(ctx, key, "v2", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the writes' invalidations", func() bool {
		for i := range n {
			if c.Get(ctx, fmt.Sprint("killed:", i)).Val() != "v2" {
				return false
			}
		}
		return true
	})
	inv := c.Stats().Hot.Invalidations
	for i := range n {
		if err := admin.Set(ctx, fmt.Sprint("killed:", i), "v3", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the second writes' invalidations", func() bool {
		return c.Stats().Hot.Invalidations >= inv+n
	})
	lost := c.Stats().Hot.TrackingLost

	gate.close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprint("killed:", i)
			if v, err := c.Get(ctx, key).Result(); err != nil || (v != "v3" && v != "v4") {
				errs <- fmt.Errorf("GET %s = %q, %v; want v3 or v4", key, v, err)
			}
		}()
	}
	eventually(t, "a batch held", func() bool { return gate.held.Load() > 0 })
	// Every reading connection goes (the invalidation connection too: it
	// is RESP2 pub/sub, TYPE pubsub, and stays).
	if err := admin.Do(ctx, "client", "kill", "type", "normal").Err(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := admin.Set(ctx, fmt.Sprint("killed:", i), "v4", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	gate.release()
	waitAll(t, &wg, errs)
	if c.Stats().Hot.TrackingLost == lost {
		t.Fatal("the killed reader connection did not drop the shard's cached replies")
	}
	for i := range n {
		key := fmt.Sprint("killed:", i)
		if v := c.Get(ctx, key).Val(); v != "v4" {
			t.Fatalf("GET %s = %q after the killed batch; want v4", key, v)
		}
		if err := admin.Set(ctx, key, "v5", 0).Err(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "another process's write after the killed batch", func() bool {
			return c.Get(ctx, key).Val() == "v5"
		})
	}
}

// TestHotRefillJoinsQueuedReads (issue 27): misses queued behind the
// shard's batch in flight wait for it, but a write-through refill does not:
// it opens the second batch at once and takes the queued misses with it,
// so n misses and the write share two round trips, and the written key's
// reply is cached with the write's value.
func TestHotRefillJoinsQueuedReads(t *testing.T) {
	c, admin := admitClient(t)
	ctx := context.Background()
	gate := &batchGate{}
	c.AddHook(gate)
	const n = 8
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("joins:", i)
		if err := admin.Set(ctx, keys[i], "v1", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Set(ctx, "joins:w", "old", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Cached (admitted from the first read), then invalidated by another
	// process: the next reads miss. joins:w stays cached, so writing it
	// through the client refills it.
	cachedRead(t, c, "joins:w", "old")
	for _, k := range keys {
		c.Get(ctx, k)
	}
	inv := c.Stats().Hot.Invalidations
	for _, k := range keys {
		if err := admin.Set(ctx, k, "v2", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the writes' invalidations", func() bool { return c.Stats().Hot.Invalidations >= inv+n })
	pipelines, reads := gate.pipelines.Load(), gate.reads.Load()

	gate.close()
	defer gate.release()
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	get := func(k string) {
		defer wg.Done()
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v2" {
			errs <- fmt.Errorf("GET %s = %q, %v; want v2", k, v, err)
		}
	}
	wg.Add(1)
	go get(keys[0])
	eventually(t, "the first miss's batch held", func() bool { return gate.held.Load() == 1 })
	for _, k := range keys[1:] {
		wg.Add(1)
		go get(k)
	}
	eventually(t, "every miss in a tracked read", func() bool { return inTrackedRead() == n })
	if h := gate.held.Load(); h != 1 {
		t.Fatalf("%d batches held with reads alone queued; want 1 (reads wait for the batch in flight)", h)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.Set(ctx, "joins:w", "new", 0).Err(); err != nil {
			errs <- fmt.Errorf("SET joins:w: %v", err)
		}
	}()
	eventually(t, "the refill's batch held beside the first", func() bool { return gate.held.Load() == 2 })
	gate.release()
	waitAll(t, &wg, errs)
	pipelines, reads = gate.pipelines.Load()-pipelines, gate.reads.Load()-reads
	if pipelines != 2 || reads != n+1 {
		t.Fatalf("%d misses and a refill went out as %d tracked reads in %d pipelines; want %d in 2", n, reads, pipelines, n+1)
	}
	hits := c.Stats().Hot.CacheHits
	if v := c.Get(ctx, "joins:w").Val(); v != "new" {
		t.Fatalf("GET joins:w after the write = %q; want new", v)
	}
	if c.Stats().Hot.CacheHits == hits {
		t.Fatal("the written key's read missed: the refill did not cache the write's value")
	}
}

// TestHotRefillLeavesOnItsContext (issue 27): a write whose refill waits
// in a held batch returns its context's error when the context ends,
// without waiting for the batch; the write may still run (it does here,
// once the batch is let through), and the reply cached before it is not
// served after the caller got its error.
func TestHotRefillLeavesOnItsContext(t *testing.T) {
	c, admin := admitClient(t)
	ctx := context.Background()
	if err := admin.Set(ctx, "leaves:w", "old", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cachedRead(t, c, "leaves:w", "old")
	gate := heldGate(t, c)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Set(wctx, "leaves:w", "new", 0).Err() }()
	eventually(t, "the refill's batch held", func() bool { return gate.held.Load() == 1 })
	cancel()
	var err error
	eventually(t, "the write's return once its context ended", func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("SET with its context cancelled while its refill was held = %v; want context.Canceled", err)
	}
	if h := gate.held.Load(); h != 1 {
		t.Fatalf("%d batches held when the write returned; want its own, still held", h)
	}
	// A read now misses (the cached reply is hidden) and queues behind
	// the held batch: it reads the key after the write has run.
	hits := c.Stats().Hot.CacheHits
	read := make(chan string, 1)
	go func() { read <- c.Get(ctx, "leaves:w").Val() }()
	eventually(t, "the read queued as a miss", func() bool { return inTrackedRead() == 1 })
	if c.Stats().Hot.CacheHits != hits {
		t.Fatal("the reply cached before the abandoned write was served from the cache")
	}
	gate.release()
	if v := <-read; v != "new" {
		t.Fatalf("GET leaves:w after the abandoned write ran = %q; want new", v)
	}
}

// TestHotRefillWithdrawnOnItsContext (issue 27): a write whose refill is
// still queued (both of the shard's batches are held) when its context
// ends is taken out of the queue: it returns its context's error and never
// runs, as a go-redis command given up before it is written never does.
func TestHotRefillWithdrawnOnItsContext(t *testing.T) {
	c, admin := admitClient(t)
	ctx := context.Background()
	keys := []string{"withdrawn:a", "withdrawn:b", "withdrawn:c"}
	for _, k := range keys {
		if err := admin.Set(ctx, k, "old", 0).Err(); err != nil {
			t.Fatal(err)
		}
		cachedRead(t, c, k, "old")
	}
	gate := heldGate(t, c)
	pipelines := gate.pipelines.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, k := range keys[:2] { // each refill opens a batch: both held
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Set(ctx, k, "new", 0).Err(); err != nil {
				errs <- fmt.Errorf("SET %s: %v", k, err)
			}
		}()
		eventually(t, fmt.Sprint(i+1, " refill batches held"), func() bool { return gate.held.Load() == int64(i+1) })
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Set(wctx, keys[2], "abandoned", 0).Err() }()
	// Queued, not only begun: a refill waits for its batch in a select
	// after it is queued (enqueue parks in none), so a cancel now finds
	// it in the queue, and the withdrawal is what keeps its write unsent.
	eventually(t, "the third refill queued", func() bool { return selectCount(refillFrame) == 3 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("SET with its context cancelled while its refill was queued = %v; want context.Canceled", err)
	}
	gate.release()
	waitAll(t, &wg, errs)
	eventually(t, "the senders idle", func() bool { return inSendBatch() == 0 })
	if n := gate.pipelines.Load() - pipelines; n != 2 {
		t.Fatalf("%d refill pipelines sent; want 2 (the abandoned one withdrawn)", n)
	}
	if v := admin.Get(ctx, keys[2]).Val(); v != "old" {
		t.Fatalf("%s on the server = %q; want old: the write given up before it was sent ran", keys[2], v)
	}
	if v := c.Get(ctx, keys[2]).Val(); v != "old" {
		t.Fatalf("GET %s through the client = %q; want old", keys[2], v)
	}
}

// heldGate adds a closed batchGate to c, released when the test ends
// (before c's Close, registered earlier: a held batch would keep Close
// waiting for its sender).
func heldGate(t *testing.T, c *redshard.Client) *batchGate {
	t.Helper()
	g := &batchGate{}
	c.AddHook(g)
	g.close()
	t.Cleanup(g.release)
	return g
}

// cachedRead reads key through c until a read of want is a cache hit.
func cachedRead(t *testing.T, c *redshard.Client, key, want string) {
	t.Helper()
	eventually(t, key+" cached", func() bool {
		hits := c.Stats().Hot.CacheHits
		return c.Get(context.Background(), key).Val() == want && c.Stats().Hot.CacheHits > hits
	})
}

// refillFrame is the frame of a goroutine in a write-through refill.
const refillFrame = "internal/hot.(*Path).refillWrite("

// inRefill counts the goroutines in a write-through refill, and
// inSendBatch those sending a batch of tracked reads.
func inRefill() int    { return stackCount(refillFrame) }
func inSendBatch() int { return stackCount("internal/hot.(*Shard).sendBatch(") }

// TestHotMissAndRefillOfOneKeyInOneBatch (issue 27): a miss of one read of
// a key (STRLEN) and a write-through refill of the same key (its GET) go
// out in one batch, the miss first. The miss answers what the server held
// before the write; once the write has returned, neither read of the key
// answers the value before it, from the cache or otherwise.
func TestHotMissAndRefillOfOneKeyInOneBatch(t *testing.T) {
	c, admin := admitClient(t)
	ctx := context.Background()
	const k, j = "onebatch:k", "onebatch:j"
	for key, v := range map[string]string{k: "v1", j: "j"} {
		if err := admin.Set(ctx, key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cachedRead(t, c, k, "v1") // its GET only: STRLEN has not been read
	gate := heldGate(t, c)
	pipelines, reads := gate.pipelines.Load(), gate.reads.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(1)
	go func() { // a first miss, whose batch is held: what follows queues
		defer wg.Done()
		if v, err := c.Get(ctx, j).Result(); err != nil || v != "j" {
			errs <- fmt.Errorf("GET %s = %q, %v", j, v, err)
		}
	}()
	eventually(t, "the first batch held", func() bool { return gate.held.Load() == 1 })
	wg.Add(1)
	go func() {
		defer wg.Done()
		if n, err := c.StrLen(ctx, k).Result(); err != nil || n != 2 {
			errs <- fmt.Errorf("STRLEN %s queued before the write = %d, %v; want 2", k, n, err)
		}
	}()
	eventually(t, "the STRLEN miss queued", func() bool { return inTrackedRead() == 2 })
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.Set(ctx, k, "new22", 0).Err(); err != nil {
			errs <- fmt.Errorf("SET %s: %v", k, err)
		}
	}()
	eventually(t, "the refill's batch held with the STRLEN", func() bool { return gate.held.Load() == 2 })
	gate.release()
	waitAll(t, &wg, errs)
	if p, r := gate.pipelines.Load()-pipelines, gate.reads.Load()-reads; p != 2 || r != 3 {
		t.Fatalf("the misses and the refill went out as %d tracked reads in %d pipelines; want 3 in 2", r, p)
	}
	for range 3 { // the second time from the cache, if anything was kept
		if n, err := c.StrLen(ctx, k).Result(); err != nil || n != 5 {
			t.Fatalf("STRLEN %s after the write = %d, %v; want 5", k, n, err)
		}
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "new22" {
			t.Fatalf("GET %s after the write = %q, %v; want new22", k, v, err)
		}
	}
}

// TestHotTrackedReadOnFrozenShard (issue 27): a miss whose tracked batch
// is in flight to a server that freezes ends with the shard's
// ErrShardDown once the heartbeat marks the shard down, as a command on
// the shard's own client does: markDown severs the reader's connections
// too. (Before, the batch waited for its bound and the read was sent again
// untracked, to wait for the frozen server up to ReadTimeout: a minute
// here.) Once the server thaws, the key reads again.
func TestHotTrackedReadOnFrozenShard(t *testing.T) {
	ctx := context.Background()
	var servers []*redistest.Server
	var shards []redshard.Shard
	for i := range 2 {
		s := redistest.Start(t)
		servers = append(servers, s)
		shards = append(shards, redshard.Shard{Name: fmt.Sprint("shard-", i), Addr: s.Addr()})
	}
	events := make(chan redshard.ShardStateChange, 64)
	t0 := time.Unix(1_700_000_000, 0)
	c, err := redshard.NewClient(&redshard.Options{
		Shards:       shards,
		ShardOptions: &redis.Options{MaxRetries: -1, ReadTimeout: time.Minute, WriteTimeout: time.Minute},
		Health: &redshard.HealthOptions{
			Interval: 100 * time.Millisecond, Timeout: 250 * time.Millisecond, FailureThreshold: 2, RecoveryThreshold: 2,
			OnShardStateChange: func(e redshard.ShardStateChange) { events <- e },
		},
		HotKeys: &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour,
			Detector: &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: func() time.Time { return t0 }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // after heldGate's release
	probe, key := keyOn(c, "shard-1", "frozen:probe"), keyOn(c, "shard-1", "frozen:key")
	admin := servers[1].Client(t)
	for _, k := range []string{probe, key} {
		if err := admin.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cachedAndTracked(t, c, "shard-1", probe, "v")
	gate := heldGate(t, c)
	got := make(chan error, 1)
	go func() { got <- c.Get(ctx, key).Err() }()
	eventually(t, "the miss's batch held", func() bool { return gate.held.Load() == 1 })
	servers[1].Freeze()
	thawed := false
	defer func() {
		if !thawed {
			servers[1].Thaw()
		}
	}()
	gate.release() // the batch goes to the frozen server
	awaitState(t, events, "shard-1", true)
	select {
	case err := <-got:
		if !errors.Is(err, redshard.ErrShardDown) {
			t.Fatalf("GET of a key whose tracked read was in flight when its shard froze = %v; want ErrShardDown", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("GET of a key whose tracked read was in flight when its shard froze still waits, 30s after the shard was marked down")
	}
	servers[1].Thaw()
	thawed = true
	awaitState(t, events, "shard-1", false)
	eventually(t, "the thawed shard's key read again", func() bool { return c.Get(ctx, key).Val() == "v" })
}
