package redshard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/redshardtest"
	"github.com/redshard/redshard/registry"
)

// testFleet is miniredis shards and a miniredis registry.
type testFleet struct {
	addrs []string
	mini  []*redshardtest.Server // with CLIENT LIST and KILL, which Apply uses
	reg   registry.Registry
	rdb   *redis.Client // the registry's server
	regm  *miniredis.Miniredis
}

const fleetTTL = 2 * time.Second

func newFleet(t *testing.T, n int) *testFleet {
	t.Helper()
	f := &testFleet{}
	for range n {
		m := redshardtest.NewServer(t)
		f.mini = append(f.mini, m)
		f.addrs = append(f.addrs, m.Addr())
	}
	f.regm = miniredis.RunT(t)
	f.rdb = redis.NewClient(&redis.Options{Addr: f.regm.Addr()})
	t.Cleanup(func() { _ = f.rdb.Close() })
	f.reg = f.open(t)
	return f
}

// steadyTTL is the member lifetime of the processes whose lease a test
// does not exercise (openSteady): their lease (half of it) outlasts any
// heartbeat a loaded machine delays, so they are never fenced, and what
// the test asserts of them (every read answered, a delete acknowledged)
// does not depend on the scheduler keeping up. A registry of fleetTTL is
// for the processes a test drops.
const steadyTTL = 30 * time.Second

// open returns a registry of its own on the fleet's registry server.
func (f *testFleet) open(t *testing.T) registry.Registry {
	t.Helper()
	return f.openTTL(t, fleetTTL)
}

// openSteady is open with steadyTTL.
func (f *testFleet) openSteady(t *testing.T) registry.Registry {
	t.Helper()
	return f.openTTL(t, steadyTTL)
}

func (f *testFleet) openTTL(t *testing.T, ttl time.Duration) registry.Registry {
	t.Helper()
	reg, err := registry.NewRedisOptions(f.rdb, "redshard:registry:test",
		&registry.Options{PollInterval: 100 * time.Millisecond, MemberTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

// doc is the config of the fleet's first n servers.
func (f *testFleet) doc(n int) json.RawMessage {
	var shards []map[string]any
	for i := range n {
		shards = append(shards, map[string]any{"name": fmt.Sprintf("s%d", i), "addr": f.addrs[i]})
	}
	b, _ := json.Marshal(map[string]any{"shards": shards})
	return b
}

func (f *testFleet) client(t *testing.T, reg registry.Registry, id string) *redshard.Client {
	t.Helper()
	c, err := redshard.NewClient(&redshard.Options{Registry: reg, Fleet: &redshard.FleetOptions{MemberID: id},
		Health: &redshard.HealthOptions{Disable: true}})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (f *testFleet) apply(t *testing.T, ctx context.Context, doc json.RawMessage) fleet.ApplyReport {
	t.Helper()
	rep, err := fleet.Apply(ctx, f.reg, doc, fleet.ApplyOptions{Driver: "test",
		Client: &redshard.Options{Health: &redshard.HealthOptions{Disable: true}}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return rep
}

func TestFleetNeedsAConfig(t *testing.T) {
	f := newFleet(t, 1)
	_, err := redshard.NewClient(&redshard.Options{Registry: f.reg})
	if !errors.Is(err, redshard.ErrInvalidOptions) {
		t.Fatalf("NewClient on an empty registry: %v, want ErrInvalidOptions", err)
	}
	err = (&redshard.Options{Registry: f.reg, Shards: []redshard.Shard{{Name: "a", Addr: f.addrs[0]}}}).Validate()
	if !errors.Is(err, redshard.ErrInvalidOptions) {
		t.Fatalf("Shards with Registry: %v, want ErrInvalidOptions", err)
	}
}

// TestFleetApplyUnderLoad: three processes' clients write and read while
// a shard is added and then removed; every acknowledged write is read
// back by every client, and the fleet ends on the last config.
func TestFleetApplyUnderLoad(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(2))
	// The processes are steady (openSteady): a loaded machine that delays
	// their heartbeats neither fences them nor cuts a move of theirs at a
	// lease of a second (a SET then failed with "moving key ...: context
	// deadline exceeded", neither refused nor acknowledged).
	var clients []*redshard.Client
	for i := range 3 {
		clients = append(clients, f.client(t, f.openSteady(t), fmt.Sprintf("p%d", i)))
	}
	// Each writer owns its keys and remembers the last value acknowledged.
	const keys = 60
	var mu sync.Mutex
	last := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs, refusals atomic.Int64
	for w, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("w%d:k%d", w, n%keys)
				err := c.Set(ctx, k, n, 0).Err()
				if refused(err) { // fenced on a loaded machine: nothing was sent
					refusals.Add(1)
					continue
				}
				if err != nil {
					errs.Add(1)
					t.Errorf("SET %s: %v", k, err)
					return
				}
				mu.Lock()
				last[k] = n
				mu.Unlock()
				// Reads never go backwards: another client sees it too.
				other := clients[(w+1)%len(clients)]
				got, err := other.Get(ctx, k).Int()
				if refused(err) {
					refusals.Add(1)
					continue
				}
				if err != nil || got < n {
					t.Errorf("GET %s through another client: %d, %v; want %d", k, got, err, n)
					return
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	rep := f.apply(t, ctx, f.doc(3))
	if len(rep.Phases) != 4 || rep.To.Phase != registry.Stable || rep.To.Epoch != 2 {
		t.Errorf("adding a shard: %+v", rep)
	}
	if rep.Rebalance.Moved == 0 {
		t.Errorf("adding a shard moved nothing: %+v", rep.Rebalance)
	}
	rep = f.apply(t, ctx, f.doc(2))
	if rep.To.Epoch != 3 {
		t.Errorf("removing it: %+v", rep)
	}
	close(stop)
	wg.Wait()
	if len(last) == 0 {
		t.Fatalf("no write was acknowledged (%d refused)", refusals.Load())
	}
	t.Logf("%d keys acknowledged, %d commands refused unsent", len(last), refusals.Load())
	// A process fenced by a late heartbeat catches up by itself; wait for
	// each (bounded) before reading every key through it.
	for i, c := range clients {
		onLast := func() bool {
			st, _ := c.FleetStatus()
			return st.Version == rep.To && !st.Fenced
		}
		for deadline := time.Now().Add(time.Minute); !onLast() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if !onLast() {
			st, _ := c.FleetStatus()
			t.Fatalf("client %d did not reach %s unfenced within a minute: %+v", i, rep.To, st)
		}
	}
	for k, n := range last {
		for i, c := range clients {
			if got, err := c.Get(ctx, k).Int(); err != nil || got != n {
				t.Errorf("client %d: GET %s = %d, %v; want %d", i, k, got, err, n)
			}
		}
	}
	for i, c := range clients {
		st, _ := c.FleetStatus()
		if st.Version != rep.To || st.Fenced {
			t.Errorf("client %d: %+v, want on %s", i, st, rep.To)
		}
		if n := len(c.Shards()); n != 2 {
			t.Errorf("client %d has %d shards", i, n)
		}
	}
	if keys := f.mini[2].Keys(); len(keys) > 2 { // the beacon and the index may stay
		t.Errorf("the removed server still holds %v", keys)
	}
	for _, p := range rep.Phases {
		t.Logf("%s acknowledged by %d members after %v", p.Version, p.Members, p.Acked)
	}
}

// keyMoving returns a key whose owner differs between the first n and
// n+1 servers of f, and one whose owner does not.
func keyMoving(t *testing.T, f *testFleet, n int) (moving, staying string) {
	t.Helper()
	shards := func(k int) []redshard.Shard {
		var out []redshard.Shard
		for i := range k {
			out = append(out, redshard.Shard{Name: fmt.Sprintf("s%d", i), Addr: f.addrs[i]})
		}
		return out
	}
	a, err := redshard.NewClient(&redshard.Options{Shards: shards(n), Health: &redshard.HealthOptions{Disable: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := redshard.NewClient(&redshard.Options{Shards: shards(n + 1), Health: &redshard.HealthOptions{Disable: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := 0; moving == "" || staying == ""; i++ {
		k := fmt.Sprintf("key:%d", i)
		x, _ := a.ShardFor(k)
		y, _ := b.ShardFor(k)
		if x != y && moving == "" {
			moving = k
		}
		if x == y && staying == "" {
			staying = k
		}
	}
	return moving, staying
}

// TestFleetPrepareHoldsMovingKeys publishes Prepare by hand: a command on
// a key that moves waits until Migrate and then runs on the key's new
// owner, with its old value; a key that stays is served at once.
func TestFleetPrepareHoldsMovingKeys(t *testing.T) {
	f := newFleet(t, 2)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(1))
	c := f.client(t, f.openSteady(t), "p")
	moving, staying := keyMoving(t, f, 1)
	for _, k := range []string{moving, staying} {
		if err := c.Set(ctx, k, "v0", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cur, _ := f.reg.Get(ctx)
	prep := cur.Begin(f.doc(2), "hand", "test")
	if err := f.reg.Publish(ctx, cur, prep); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, c, prep.Version())
	if err := c.Set(ctx, staying, "v1", 0).Err(); err != nil {
		t.Fatalf("SET of a key that stays, in prepare: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Append(ctx, moving, "+1").Err() }()
	select {
	case err := <-done:
		t.Fatalf("APPEND on a moving key ran in prepare: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if f.mini[1].Exists(moving) {
		t.Fatal("the key reached its new owner before migrate")
	}
	mig, _ := prep.Advance()
	if err := f.reg.Publish(ctx, prep, mig); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("held APPEND: %v", err)
	}
	if got, _ := f.mini[1].Get(moving); got != "v0+1" {
		t.Errorf("new owner holds %q, want v0+1", got)
	}
	if f.mini[0].Exists(moving) {
		t.Error("the previous owner still holds the moved key")
	}
}

// stuckPrepare publishes the fleet's first config, on one shard, then the
// Prepare of a change to two that no driver advances; it returns a key that
// change moves and one it does not.
func (f *testFleet) stuckPrepare(t *testing.T, ctx context.Context) (moving, staying string) {
	t.Helper()
	f.apply(t, ctx, f.doc(1))
	moving, staying = keyMoving(t, f, 1)
	cur, _ := f.reg.Get(ctx)
	if err := f.reg.Publish(ctx, cur, cur.Begin(f.doc(2), "stuck", "test")); err != nil {
		t.Fatal(err)
	}
	return moving, staying
}

// TestFleetHeldCommandEnds: a command held in Prepare ends with the
// client's Close (redis.ErrClosed), and with a clear error once the hold
// outlasts its bound when the change never reaches Migrate.
func TestFleetHeldCommandEnds(t *testing.T) {
	f, ctx := newFleet(t, 2), context.Background()
	moving, _ := f.stuckPrepare(t, ctx)
	c, err := redshard.NewClient(&redshard.Options{Registry: f.open(t), Health: &redshard.HealthOptions{Disable: true}})
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() { held <- c.Set(ctx, moving, "x", 0).Err() }()
	time.Sleep(50 * time.Millisecond)
	_ = c.Close()
	if err := <-held; !errors.Is(err, redis.ErrClosed) {
		t.Errorf("held SET after Close: %v, want redis.ErrClosed", err)
	}

	c = f.client(t, f.open(t), "q")
	err = c.Set(ctx, moving, "x", 0).Err()
	if !errors.Is(err, redshard.ErrHandoffInProgress) || !strings.Contains(err.Error(), "migrate phase") {
		t.Errorf("SET held past its bound: %v, want ErrHandoffInProgress naming the phase", err)
	}
	if f.mini[0].Exists(moving) || f.mini[1].Exists(moving) {
		t.Error("a refused SET was written")
	}
}

// TestFleetHeldCommandBounds holds commands in a Prepare that never ends
// (no driver advances it): a command with a deadline fails with
// ErrHandoffInProgress before that deadline, naming it, and one without
// fails once FleetOptions.HoldTimeout has passed, naming that.
func TestFleetHeldCommandBounds(t *testing.T) {
	f, ctx := newFleet(t, 2), context.Background()
	moving, staying := f.stuckPrepare(t, ctx)
	open := func(hold time.Duration) *redshard.Client {
		c, err := redshard.NewClient(&redshard.Options{Registry: f.open(t),
			Fleet:  &redshard.FleetOptions{MemberID: fmt.Sprintf("held-%v", hold), HoldTimeout: hold},
			Health: &redshard.HealthOptions{Disable: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	c := open(time.Hour)
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err := c.Set(dctx, moving, "x", 0).Err()
	if !errors.Is(err, redshard.ErrHandoffInProgress) || !strings.Contains(err.Error(), "the command's deadline") {
		t.Errorf("held SET with a deadline: %v, want ErrHandoffInProgress naming the deadline", err)
	}
	if err := c.Set(ctx, staying, "x", 0).Err(); err != nil {
		t.Errorf("SET of a key that stays, in Prepare: %v", err)
	}

	c = open(200 * time.Millisecond)
	err = c.Set(ctx, moving, "x", 0).Err()
	if !errors.Is(err, redshard.ErrHandoffInProgress) || !strings.Contains(err.Error(), "FleetOptions.HoldTimeout") {
		t.Errorf("held SET without a deadline: %v, want ErrHandoffInProgress naming HoldTimeout", err)
	}
	if f.mini[0].Exists(moving) || f.mini[1].Exists(moving) {
		t.Error("a refused SET was written")
	}
}

// TestFleetRegistryDown: with no change in flight, the registry's server
// going away stops nothing: the clients fence themselves, find every
// server's beacon unchanged and serve every key; they come back when it
// does.
func TestFleetRegistryDown(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(3))
	c := f.client(t, f.open(t), "p")
	f.regm.Close()
	waitFenced(t, c, true)
	for i := range 300 {
		k := fmt.Sprintf("key:%d", i)
		if err := c.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s with the registry down: %v", k, err)
		}
		if n, err := c.Get(ctx, k).Int(); err != nil || n != i {
			t.Fatalf("GET %s with the registry down: %d, %v", k, n, err)
		}
	}
	if err := f.regm.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFenced(t, c, false)
}

// cutRegistry cuts a process off the registry: while cut, calls fail
// at once or, hung, block until the cut ends whatever their context says
// (a registry client whose socket I/O ignores deadlines, as go-redis's
// does unless built with ContextTimeoutEnabled); and Watch delivers
// nothing.
type cutRegistry struct {
	registry.Registry
	hang bool

	mu  sync.Mutex
	end chan struct{} // closed when the cut ends; nil: not cut
}

var errCut = errors.New("cut off")

func (r *cutRegistry) setCut(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case on && r.end == nil:
		r.end = make(chan struct{})
	case !on && r.end != nil:
		close(r.end)
		r.end = nil
	}
}

func (r *cutRegistry) isCut() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end != nil
}

// blocked reports whether a call must fail now, after hanging until the
// cut ends if the registry hangs.
func (r *cutRegistry) blocked() bool {
	r.mu.Lock()
	end := r.end
	r.mu.Unlock()
	if end == nil {
		return false
	}
	if r.hang {
		<-end
	}
	return true
}

func (r *cutRegistry) Heartbeat(ctx context.Context, m registry.Member) error {
	if r.blocked() {
		return errCut
	}
	return r.Registry.Heartbeat(ctx, m)
}

// Watch delivers nothing while cut.
func (r *cutRegistry) Watch(ctx context.Context) (<-chan registry.Config, error) {
	in, err := r.Registry.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan registry.Config)
	go func() {
		defer close(out)
		for cfg := range in {
			if r.isCut() {
				continue
			}
			select {
			case out <- cfg:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (r *cutRegistry) Get(ctx context.Context) (registry.Config, error) {
	if r.blocked() {
		return registry.Config{}, errCut
	}
	return r.Registry.Get(ctx)
}

// TestFleetFence cuts one process off the registry: with no change in
// flight it keeps serving everything once fenced; while a change it has
// not seen runs, it refuses the keys that change moves (ErrFenced) and
// serves the others; once back it catches up. Hung, the registry's calls
// never return while the process is cut off, so the heartbeat goroutine
// cannot fence it: the command path must (TestFleetFence/hung fails when
// only that goroutine decides).
func TestFleetFence(t *testing.T) {
	for _, hang := range []bool{false, true} {
		name := map[bool]string{false: "failing", true: "hung"}[hang]
		t.Run(name, func(t *testing.T) { fleetFence(t, hang) })
	}
}

func fleetFence(t *testing.T, hang bool) {
	f := newFleet(t, 2)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(1))
	cut := &cutRegistry{Registry: f.open(t), hang: hang}
	c := f.client(t, cut, "cut")
	moving, staying := keyMoving(t, f, 1)
	if err := c.Set(ctx, moving, "v0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cut.setCut(true)
	waitFenced(t, c, true)
	if err := c.Set(ctx, moving, "v1", 0).Err(); err != nil {
		t.Fatalf("fenced with no change in flight: %v", err)
	}
	// The change goes on without it: it is dropped after its lease.
	applied := make(chan fleet.ApplyReport, 1)
	go func() { applied <- f.apply(t, ctx, f.doc(2)) }()
	var rep fleet.ApplyReport
	select {
	case rep = <-applied:
	case <-time.After(30 * time.Second):
		t.Fatal("Apply did not go on without the cut-off process")
	}
	err := c.Set(ctx, moving, "stale", 0).Err()
	if !errors.Is(err, redshard.ErrFenced) {
		t.Fatalf("fenced SET of a moved key: %v, want ErrFenced", err)
	}
	t.Logf("fenced: %v", err)
	if err := c.Set(ctx, staying, "ok", 0).Err(); err != nil {
		t.Fatalf("fenced SET of a key that stays: %v", err)
	}
	cut.setCut(false)
	waitFenced(t, c, false)
	if st, _ := c.FleetStatus(); st.Version != rep.To {
		t.Fatalf("caught up to %s, want %s", st.Version, rep.To)
	}
	if got, err := c.Get(ctx, moving).Result(); err != nil || got != "v1" {
		t.Fatalf("after catching up: %q, %v; want v1", got, err)
	}
}

func waitVersion(t testing.TB, c *redshard.Client, v registry.Version) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ := c.FleetStatus()
		if !st.Version.Less(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("client still on %s after 30s, want %s", st.Version, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitFenced(t *testing.T, c *redshard.Client, on bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, _ := c.FleetStatus(); st.Fenced == on {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fenced is not %v after 30s", on)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkFleet is the per-command cost of following a registry, on stub
// shards (no I/O): a plain client, a fleet client with no change in
// flight, and in Prepare and Migrate for a key whose owner stays and (in
// Migrate) for one already handed off.
func BenchmarkFleet(b *testing.B) {
	ctx := context.Background()
	var shards []redshard.Shard
	var docShards []map[string]any
	for i := range 5 {
		s := redshard.Shard{Name: fmt.Sprint("s", i), Addr: fmt.Sprintf("127.0.0.1:%d", 1+i)}
		shards = append(shards, s)
		docShards = append(docShards, map[string]any{"name": s.Name, "addr": s.Addr})
	}
	doc := func(n int) json.RawMessage {
		d, _ := json.Marshal(map[string]any{"shards": docShards[:n]})
		return d
	}
	stub := func(_ redshard.Shard, o *redis.Options) *redis.Client {
		cl := redis.NewClient(o)
		cl.AddHook(absentStubHook{})
		return cl
	}
	plain, err := redshard.NewClient(&redshard.Options{Shards: shards[:4], Health: &redshard.HealthOptions{Disable: true}, NewShardClient: stub})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(b).Addr()})
	defer rdb.Close()
	reg := registry.NewRedis(rdb, "redshard:registry:bench")
	defer reg.Close()
	cur := registry.Initial(doc(4))
	if err := reg.Publish(ctx, registry.Config{}, cur); err != nil {
		b.Fatal(err)
	}
	c, err := redshard.NewClient(&redshard.Options{Registry: reg, Health: &redshard.HealthOptions{Disable: true}, NewShardClient: stub})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	run := func(name string, c *redshard.Client, key string) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Get(ctx, key)
			}
		})
	}
	probe, err := redshard.NewClient(&redshard.Options{Shards: shards, Health: &redshard.HealthOptions{Disable: true}, NewShardClient: stub})
	if err != nil {
		b.Fatal(err)
	}
	defer probe.Close()
	var stayed, moved string // owner the same, or not, on 4 and on 5 shards
	for i := 0; stayed == "" || moved == ""; i++ {
		k := fmt.Sprint("bench:", i)
		x, _ := plain.ShardFor(k)
		y, _ := probe.ShardFor(k)
		if x == y && stayed == "" {
			stayed = k
		} else if x != y && moved == "" {
			moved = k
		}
	}
	run("plain", plain, stayed)
	run("fleet/stable", c, stayed)
	next := cur.Begin(doc(5), "bench", "bench")
	if err := reg.Publish(ctx, cur, next); err != nil {
		b.Fatal(err)
	}
	waitVersion(b, c, next.Version())
	mig, _ := next.Advance()
	run("fleet/prepare/staying-key", c, stayed)
	if err := reg.Publish(ctx, next, mig); err != nil {
		b.Fatal(err)
	}
	waitVersion(b, c, mig.Version())
	if err := c.Get(ctx, moved).Err(); err != nil && !errors.Is(err, redis.Nil) {
		b.Fatal(err)
	}
	run("fleet/migrate/staying-key", c, stayed)
	run("fleet/migrate/moved-key", c, moved)
}

// TestFleetPubSubInPrepare: a subscriber in Prepare hears a channel that
// moves both on its current owner (processes still in Stable or Prepare
// publish there, at once: a channel is not held) and on its next one
// (processes in Migrate already publish there).
func TestFleetPubSubInPrepare(t *testing.T) {
	f := newFleet(t, 2)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(1))
	c := f.client(t, f.openSteady(t), "sub")
	moving, _ := keyMoving(t, f, 1)
	cur, _ := f.reg.Get(ctx)
	prep := cur.Begin(f.doc(2), "pubsub", "test")
	if err := f.reg.Publish(ctx, cur, prep); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, c, prep.Version())
	ps := c.Subscribe(ctx, moving)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the next owner's subscription, which Receive does not wait for
	next, err := redshard.NewClient(&redshard.Options{Health: &redshard.HealthOptions{Disable: true}, Shards: []redshard.Shard{
		{Name: "s0", Addr: f.addrs[0]}, {Name: "s1", Addr: f.addrs[1]}}})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	for _, p := range []struct {
		who string
		c   *redshard.Client
	}{{"a process in prepare", c}, {"a process in migrate", next}} {
		if err := p.c.Publish(ctx, moving, p.who).Err(); err != nil {
			t.Fatalf("PUBLISH by %s: %v", p.who, err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := ps.ReceiveMessage(rctx)
		cancel()
		if err != nil || msg.Payload != p.who {
			t.Fatalf("message from %s: %v, %v", p.who, msg, err)
		}
	}
}
