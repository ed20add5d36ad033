package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// loadWaitUntil blocks until cond holds. It is for states that send no
// event, such as a goroutine parked inside GetOrLoad: the order of events
// comes from cond, never from time. It polls with a short sleep rather
// than spinning, so that on a loaded machine it leaves the cores to the
// goroutines it waits for.
func loadWaitUntil(cond func() bool) {
	for !cond() {
		time.Sleep(50 * time.Microsecond)
	}
}

// loadClient returns another client over cl's shards (another "process"),
// with opt as its Options.Load, closed at the end of the test.
func loadClient(t testing.TB, cl *cluster, opt *redshard.LoadOptions) *redshard.Client {
	t.Helper()
	c, err := redshard.NewClient(&redshard.Options{Shards: cl.shards, Load: opt})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// loadMini returns the miniredis that owns key.
func loadMini(cl *cluster, key string) *miniredis.Miniredis {
	name, _ := cl.c.ShardFor(key)
	return cl.mini[name]
}

// loadModes are the two ways GetOrLoad runs: per process, and with the lease.
var loadModes = []struct {
	name string
	opt  *redshard.LoadOptions
}{
	{"process", nil},
	{"lease", &redshard.LoadOptions{Lease: time.Minute, PollInterval: time.Millisecond}},
}

func TestGetOrLoadHit(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	ctx := context.Background()
	if err := cl.c.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := cl.c.GetOrLoad(ctx, "greeting", time.Minute, func(context.Context) (string, error) {
		t.Error("load called on a hit")
		return "", nil
	})
	if err != nil || v != "hello" {
		t.Fatalf("GetOrLoad = %q, %v; want hello", v, err)
	}
	if st := cl.c.LoadStats(); st.Hits != 1 || st.Misses != 0 || st.Loads != 0 {
		t.Errorf("stats = %+v; want 1 hit, no miss, no load", st)
	}
}

func TestGetOrLoadStores(t *testing.T) {
	for _, m := range loadModes {
		for _, ttl := range []time.Duration{0, time.Minute} {
			t.Run(fmt.Sprintf("%s/ttl=%v", m.name, ttl), func(t *testing.T) {
				cl := newCluster(t, 1, 2)
				c := loadClient(t, cl, m.opt)
				ctx := context.Background()
				var calls atomic.Int64
				load := func(context.Context) (string, error) {
					calls.Add(1)
					return "loaded", nil
				}
				for range 2 {
					v, err := c.GetOrLoad(ctx, "user:1", ttl, load)
					if err != nil || v != "loaded" {
						t.Fatalf("GetOrLoad = %q, %v; want loaded", v, err)
					}
				}
				if n := calls.Load(); n != 1 {
					t.Errorf("load called %d times; want 1", n)
				}
				mini := loadMini(cl, "user:1")
				if got, _ := mini.Get("user:1"); got != "loaded" {
					t.Errorf("stored %q; want loaded", got)
				}
				if got := mini.TTL("user:1"); got != ttl {
					t.Errorf("TTL = %v; want %v (0: no expiry)", got, ttl)
				}
				if mini.Exists(redshard.LeaseKeyPrefix + "user:1") {
					t.Error("lease left behind")
				}
				st := c.LoadStats()
				if st.Hits != 1 || st.Misses != 1 || st.Loads != 1 {
					t.Errorf("stats = %+v; want 1 hit, 1 miss, 1 load", st)
				}
				if m.opt != nil && st.LeaseWins != 1 {
					t.Errorf("LeaseWins = %d; want 1", st.LeaseWins)
				}
			})
		}
	}
}

// TestGetOrLoadCoalesces: 1,000 goroutines of one process miss the same key
// at once, and load is called once. load returns only when every goroutine
// has joined the flight, so none can miss it and start another.
func TestGetOrLoadCoalesces(t *testing.T) {
	const n = 1000
	cl := newCluster(t, 1, 1, 1)
	c := cl.c
	var calls atomic.Int64
	load := func(context.Context) (string, error) {
		calls.Add(1)
		loadWaitUntil(func() bool { return c.LoadStats().Misses == n })
		return "value", nil
	}

	start := make(chan struct{})
	vals := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			vals[i], errs[i] = c.GetOrLoad(context.Background(), "hot", time.Minute, load)
		})
	}
	close(start)
	wg.Wait()

	for i := range n {
		if errs[i] != nil || vals[i] != "value" {
			t.Fatalf("goroutine %d: GetOrLoad = %q, %v; want value", i, vals[i], errs[i])
		}
	}
	st := c.LoadStats()
	t.Logf("one process, %d goroutines missed at once: %d loader call(s) (without coalescing: %d); %+v",
		st.Misses, calls.Load(), st.Misses, st)
	if calls.Load() != 1 || st.Loads != 1 {
		t.Errorf("load called %d times (stats: %d); want 1", calls.Load(), st.Loads)
	}
	if st.Misses != n || st.Coalesced != n-1 || st.Hits != 0 {
		t.Errorf("stats = %+v; want %d misses, %d coalesced, no hit", st, n, n-1)
	}
}

// TestGetOrLoadLeaseAcrossClients: 4 clients over the same shards stand for
// 4 processes, 250 goroutines each, all missing the same key. The one load
// call that happens waits until every goroutine has joined its client's
// flight and the 3 other clients have found the lease taken and are
// polling, so each of them had every chance to load and did not.
func TestGetOrLoadLeaseAcrossClients(t *testing.T) {
	const (
		procs = 4
		per   = 250
		key   = "celebrity"
	)
	cl := newCluster(t, 1, 1, 1)
	// Lease and Wait are long so that no waiter gives up and no lease runs
	// out, however slow the machine: the test is about who loads, not
	// about time. (With a one-minute Wait, a loaded machine made waiters
	// give up and miss again before the last goroutines had started, so
	// Misses passed per and the wait below never ended.)
	opt := &redshard.LoadOptions{Lease: time.Hour, Wait: time.Hour, PollInterval: time.Millisecond}
	clients := make([]*redshard.Client, procs)
	for i := range clients {
		clients[i] = loadClient(t, cl, opt)
	}

	var calls atomic.Int64
	started := make(chan int, procs)
	release := make(chan struct{})
	loadFor := func(proc int) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			calls.Add(1)
			started <- proc
			<-release
			return "value", nil
		}
	}

	start := make(chan struct{})
	vals := make([]string, procs*per)
	errs := make([]error, procs*per)
	var wg sync.WaitGroup
	for p, c := range clients {
		load := loadFor(p)
		for g := range per {
			i := p*per + g
			wg.Go(func() {
				<-start
				vals[i], errs[i] = c.GetOrLoad(context.Background(), key, time.Minute, load)
			})
		}
	}
	close(start)

	winner := <-started
	loadWaitUntil(func() bool {
		for p, c := range clients {
			st := c.LoadStats()
			if st.Misses != per || (p != winner && st.LeaseWaits == 0) {
				return false
			}
		}
		return true
	})
	mini := loadMini(cl, key)
	if !mini.Exists(redshard.LeaseKeyPrefix + key) {
		t.Error("no lease on the key's shard while its holder loads")
	}
	close(release)
	wg.Wait()

	for i := range vals {
		if errs[i] != nil || vals[i] != "value" {
			t.Fatalf("goroutine %d: GetOrLoad = %q, %v; want value", i, vals[i], errs[i])
		}
	}
	var sum redshard.LoadStats
	for p, c := range clients {
		st := c.LoadStats()
		if st.Coalesced != per-1 {
			t.Errorf("client %d: Coalesced = %d; want %d", p, st.Coalesced, per-1)
		}
		sum.Misses += st.Misses
		sum.Loads += st.Loads
		sum.LeaseWins += st.LeaseWins
		sum.LeaseWaits += st.LeaseWaits
		sum.LeaseWaitHits += st.LeaseWaitHits
		sum.LeaseTimeouts += st.LeaseTimeouts
	}
	t.Logf("%d clients x %d goroutines = %d missed at once: %d loader call(s) (without any control: %d; per-process only: %d)",
		procs, per, sum.Misses, calls.Load(), sum.Misses, procs)
	if calls.Load() != 1 || sum.Loads != 1 {
		t.Errorf("load called %d times (stats: %d); want 1 across all clients", calls.Load(), sum.Loads)
	}
	if sum.LeaseWins != 1 || sum.LeaseWaits != procs-1 || sum.LeaseWaitHits != procs-1 || sum.LeaseTimeouts != 0 {
		t.Errorf("lease stats = %+v; want 1 win, %d waits that all saw the value", sum, procs-1)
	}
	if mini.Exists(redshard.LeaseKeyPrefix + key) {
		t.Error("lease not released")
	}
}

func TestGetOrLoadError(t *testing.T) {
	errBoom := errors.New("database down")
	for _, m := range loadModes {
		t.Run(m.name, func(t *testing.T) {
			const n = 10
			cl := newCluster(t, 1, 1)
			c := loadClient(t, cl, m.opt)
			var calls atomic.Int64
			fail := func(context.Context) (string, error) {
				calls.Add(1)
				loadWaitUntil(func() bool { return c.LoadStats().Misses == n })
				return "", errBoom
			}
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { _, errs[i] = c.GetOrLoad(context.Background(), "k", time.Minute, fail) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != errBoom {
					t.Errorf("goroutine %d: err = %v; want the loader's error as is", i, err)
				}
			}
			mini := loadMini(cl, "k")
			if mini.Exists("k") {
				t.Error("a failed load was cached")
			}
			if mini.Exists(redshard.LeaseKeyPrefix + "k") {
				t.Error("lease not released after a failed load")
			}
			if st := c.LoadStats(); st.Loads != 1 || st.Errors != 1 {
				t.Errorf("stats = %+v; want 1 load, 1 error", st)
			}

			v, err := c.GetOrLoad(context.Background(), "k", time.Minute, func(context.Context) (string, error) {
				calls.Add(1)
				return "back", nil
			})
			if err != nil || v != "back" || calls.Load() != 2 {
				t.Errorf("after a failure: GetOrLoad = %q, %v with %d loads; want back after a new load", v, err, calls.Load())
			}
		})
	}
}

// TestGetOrLoadPanic: a loader panic reaches every waiting caller as a
// panic of its own, which it can recover; the lease is released.
func TestGetOrLoadPanic(t *testing.T) {
	errBoom := errors.New("nil map")
	for _, m := range loadModes {
		t.Run(m.name, func(t *testing.T) {
			const n = 3
			cl := newCluster(t, 1, 1)
			c := loadClient(t, cl, m.opt)
			boom := func(context.Context) (string, error) {
				loadWaitUntil(func() bool { return c.LoadStats().Misses == n })
				panic(errBoom)
			}
			recovered := make([]any, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					defer func() { recovered[i] = recover() }()
					_, _ = c.GetOrLoad(context.Background(), "k", time.Minute, boom)
				})
			}
			wg.Wait()
			for i, r := range recovered {
				err, ok := r.(error)
				if !ok || !errors.Is(err, errBoom) {
					t.Errorf("goroutine %d recovered %v; want an error wrapping the panic value", i, r)
				}
			}
			if loadMini(cl, "k").Exists(redshard.LeaseKeyPrefix + "k") {
				t.Error("lease not released after a panic")
			}
			v, err := c.GetOrLoad(context.Background(), "k", 0, func(context.Context) (string, error) { return "ok", nil })
			if err != nil || v != "ok" {
				t.Errorf("after a panic: GetOrLoad = %q, %v; want ok", v, err)
			}
			if st := c.LoadStats(); st.Loads != 2 || st.Errors != 1 {
				t.Errorf("stats = %+v; want 2 loads, 1 error", st)
			}
		})
	}
}

// TestGetOrLoadLeaseHolderDies: a lease whose holder never writes the value
// makes each waiting process load by itself once Wait has passed. Both
// loads must happen for either to return, so neither client can see the
// other's value: both waits time out.
func TestGetOrLoadLeaseHolderDies(t *testing.T) {
	const key = "orphan"
	cl := newCluster(t, 1, 1)
	opt := &redshard.LoadOptions{Lease: time.Minute, Wait: 50 * time.Millisecond, PollInterval: 5 * time.Millisecond}
	a, b := loadClient(t, cl, opt), loadClient(t, cl, opt)
	ctx := context.Background()

	_, shard := cl.c.ShardFor(key)
	lease := redshard.LeaseKeyPrefix + key
	if err := shard.Set(ctx, lease, "a process that died", 0).Err(); err != nil {
		t.Fatal(err)
	}

	var calls atomic.Int64
	load := func(context.Context) (string, error) {
		calls.Add(1)
		loadWaitUntil(func() bool { return calls.Load() == 2 })
		return "loaded", nil
	}
	var wg sync.WaitGroup
	for _, c := range []*redshard.Client{a, b} {
		wg.Go(func() {
			v, err := c.GetOrLoad(ctx, key, time.Minute, load)
			if err != nil || v != "loaded" {
				t.Errorf("GetOrLoad = %q, %v; want loaded", v, err)
			}
		})
	}
	wg.Wait()

	for name, c := range map[string]*redshard.Client{"a": a, "b": b} {
		if st := c.LoadStats(); st.LeaseWaits != 1 || st.LeaseTimeouts != 1 || st.LeaseWins != 0 || st.Loads != 1 {
			t.Errorf("client %s: stats = %+v; want 1 wait that timed out and 1 load", name, st)
		}
	}
	mini := loadMini(cl, key)
	if got, _ := mini.Get(key); got != "loaded" {
		t.Errorf("stored %q; want loaded", got)
	}
	if got, _ := mini.Get(lease); got != "a process that died" {
		t.Errorf("lease = %q; a waiter must never free someone else's lease", got)
	}
}

// TestGetOrLoadCanceled: the caller that started a flight gives up while it
// runs; it returns at once with its ctx's error, and the flight goes on for
// the caller that joined it, with a load context that was not cancelled.
func TestGetOrLoadCanceled(t *testing.T) {
	for _, m := range loadModes {
		t.Run(m.name, func(t *testing.T) {
			cl := newCluster(t, 1, 1)
			c := loadClient(t, cl, m.opt)
			started := make(chan struct{})
			release := make(chan struct{})
			load := func(ctx context.Context) (string, error) {
				close(started)
				<-release
				if err := ctx.Err(); err != nil {
					return "", fmt.Errorf("load context ended: %w", err)
				}
				return "value", nil
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			firstErr := make(chan error, 1)
			go func() {
				_, err := c.GetOrLoad(ctx, "k", time.Minute, load)
				firstErr <- err
			}()
			<-started
			second := make(chan string, 1)
			go func() {
				v, err := c.GetOrLoad(context.Background(), "k", time.Minute, load)
				if err != nil {
					t.Errorf("second caller: %v", err)
				}
				second <- v
			}()
			loadWaitUntil(func() bool { return c.LoadStats().Misses == 2 })

			cancel()
			if err := <-firstErr; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled caller: err = %v; want context.Canceled", err)
			}
			close(release)
			if v := <-second; v != "value" {
				t.Errorf("second caller got %q; want value", v)
			}
			if st := c.LoadStats(); st.Canceled != 1 || st.Loads != 1 || st.Coalesced != 1 {
				t.Errorf("stats = %+v; want 1 cancelled, 1 load, 1 coalesced", st)
			}
			if got, _ := loadMini(cl, "k").Get("k"); got != "value" {
				t.Errorf("stored %q; want value", got)
			}
		})
	}
}

func TestGetOrLoadBadInput(t *testing.T) {
	cl := newCluster(t, 1)
	ok := func(context.Context) (string, error) { return "v", nil }
	tests := []struct {
		name string
		opt  *redshard.LoadOptions
		key  string
		ttl  time.Duration
		load func(context.Context) (string, error)
	}{
		{name: "empty key", key: "", load: ok},
		{name: "nil load", key: "k", load: nil},
		{name: "negative ttl", key: "k", ttl: -time.Second, load: ok},
		{name: "negative Lease", opt: &redshard.LoadOptions{Lease: -1}, key: "k", load: ok},
		{name: "Lease below 1ms", opt: &redshard.LoadOptions{Lease: time.Microsecond}, key: "k", load: ok},
		{name: "negative Wait", opt: &redshard.LoadOptions{Wait: -1}, key: "k", load: ok},
		{name: "negative PollInterval", opt: &redshard.LoadOptions{PollInterval: -1}, key: "k", load: ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.opt != nil { // bad options are refused by NewClient
				c, err := redshard.NewClient(&redshard.Options{Shards: cl.shards, Load: tt.opt})
				if !errors.Is(err, redshard.ErrInvalidLoadOptions) || !errors.Is(err, redshard.ErrInvalidOptions) || c != nil {
					t.Errorf("NewClient = %v, %v; want an error wrapping ErrInvalidLoadOptions", c, err)
				}
				return
			}
			c := loadClient(t, cl, tt.opt)
			v, err := c.GetOrLoad(context.Background(), tt.key, tt.ttl, tt.load)
			if !errors.Is(err, redshard.ErrInvalidArgument) || v != "" {
				t.Errorf("GetOrLoad = %q, %v; want an error wrapping ErrInvalidArgument", v, err)
			}
		})
	}
}

func TestGetOrLoadClosed(t *testing.T) {
	cl := newCluster(t, 1)
	c := loadClient(t, cl, nil)
	_ = c.Close()
	_, err := c.GetOrLoad(context.Background(), "k", 0, func(context.Context) (string, error) {
		t.Error("load called on a closed client")
		return "", nil
	})
	if !errors.Is(err, redis.ErrClosed) {
		t.Errorf("err = %v; want redis.ErrClosed", err)
	}
}

func BenchmarkGetOrLoadHit(b *testing.B) {
	cl := newCluster(b, 1, 1, 1)
	ctx := context.Background()
	load := func(context.Context) (string, error) { return "value", nil }
	if _, err := cl.c.GetOrLoad(ctx, "hot", 0, load); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cl.c.GetOrLoad(ctx, "hot", 0, load); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func ExampleClient_GetOrLoad() {
	m1, m2 := miniredis.NewMiniRedis(), miniredis.NewMiniRedis()
	for _, m := range []*miniredis.Miniredis{m1, m2} {
		if err := m.Start(); err != nil {
			panic(err)
		}
		defer m.Close()
	}
	rdb, err := redshard.NewClient(&redshard.Options{
		Shards: []redshard.Shard{{Name: "a", Addr: m1.Addr()}, {Name: "b", Addr: m2.Addr()}},
		// One loader in the whole fleet, not one per process.
		Load: &redshard.LoadOptions{Lease: 2 * time.Second},
	})
	if err != nil {
		panic(err)
	}
	defer rdb.Close()

	loadUser := func(ctx context.Context) (string, error) {
		fmt.Println("reading user 42 from the database")
		return `{"id":42,"name":"Ada"}`, nil
	}
	ctx := context.Background()
	for range 2 {
		v, err := rdb.GetOrLoad(ctx, "user:42", time.Minute, loadUser)
		if err != nil {
			panic(err)
		}
		fmt.Println(v)
	}
	st := rdb.LoadStats()
	fmt.Printf("%d load, %d hit\n", st.Loads, st.Hits)
	// Output:
	// reading user 42 from the database
	// {"id":42,"name":"Ada"}
	// {"id":42,"name":"Ada"}
	// 1 load, 1 hit
}
