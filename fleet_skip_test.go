package redshard_test

// Adversarial tests of the fleet protocol: processes that miss phases
// (cut off the registry, or joining mid-change), moves held in flight
// across phases with hooks, and a driver resumed after an interruption.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
)

// holdSettle holds c's first move step on shard that names key: with the
// gate on the key's new owner, that is the settle (step 2) of a move.
func holdSettle(c *redshard.Client, shard, key string) *gate {
	g := newGate(func(_ context.Context, cmds []redis.Cmder) bool {
		for _, cmd := range cmds {
			if a := cmd.Args(); (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(a) > 3 && fmt.Sprint(a[3]) == key {
				return true
			}
		}
		return false
	})
	hookOn(c, shard, g)
	return g
}

// startHeld starts c's GET of key, whose move's settle g holds, and
// returns once the settle has arrived at g; the GET's result is sent on
// got when it ends. A GET refused unsent (fenced, or its move cut at the
// lease on a loaded machine) before it reached the settle is started
// again, since the test is about the held settle; a GET that ends
// otherwise without reaching it fails the test instead of leaving the
// caller waiting for an arrival that will not come.
func startHeld(t *testing.T, g *gate, c *redshard.Client, key string, got chan<- error) {
	t.Helper()
	for {
		done := make(chan error, 1)
		go func() { done <- c.Get(ctx, key).Err() }()
		select {
		case <-g.arrived:
			go func() { got <- <-done }()
			return
		case err := <-done:
			if refusedUnderLoad(err) {
				t.Logf("GET %s refused before its settle was held (%v): again", key, err)
				waitFenced(t, c, false) // a fenced process refuses it again until it catches up
				continue
			}
			t.Errorf("GET %s ended before its settle was held: %v", key, err)
			got <- err
			return
		}
	}
}

func isLate(late []registry.Member, id string) bool {
	for _, m := range late {
		if m.ID == id {
			return true
		}
	}
	return false
}

// applyWith runs Apply to doc with progress, as f.apply does.
func (f *testFleet) applyWith(ctx context.Context, doc []byte, progress func(fleet.ApplyProgress), rb redshard.RebalanceOptions) (fleet.ApplyReport, error) {
	return fleet.Apply(ctx, f.reg, doc, fleet.ApplyOptions{Driver: "test", Progress: progress, Rebalance: rb,
		Client: &redshard.Options{Health: &redshard.HealthOptions{Disable: true}}})
}

// TestFleetCommitWaitsForMoves: process a starts the move of a key in
// Migrate (its take is done, its settle held). The driver's Rebalance
// moves the key, Commit is published and b deletes the key on its new
// owner. If a acknowledged Commit with its move still in flight, Stable
// could be published and the settled sets deleted before a's settle
// lands, and the settle would RESTORE the deleted key. The settle is
// released once b is in Stable, or once a has stayed late in Commit for
// 5 of the driver's polls (a waits for its move: Stable cannot come).
func TestFleetCommitWaitsForMoves(t *testing.T) {
	f := newFleet(t, 2)
	f.apply(t, ctx, f.doc(1))
	a := f.client(t, f.open(t), "a")
	b := f.client(t, f.open(t), "b")
	k, _ := keyMoving(t, f, 1)
	if err := b.Set(ctx, k, "v0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	g := holdSettle(a, "s1", k)
	defer g.open()
	got := make(chan error, 1)
	var deleted bool
	lateInCommit := 0
	rep, err := f.applyWith(ctx, f.doc(2), func(p fleet.ApplyProgress) {
		switch {
		case p.Rebalancing: // every process is in Migrate; keys have not moved yet
			startHeld(t, g, a, k, got) // a has taken the key; its settle waits
		case p.Config.Phase == registry.Commit:
			if !deleted {
				deleted = true
				if n, err := b.Del(ctx, k).Result(); err != nil || n != 1 {
					t.Errorf("DEL %s after Rebalance = %d, %v; want 1", k, n, err)
				}
			}
			if isLate(p.Late, "a") {
				if lateInCommit++; lateInCommit == 5 {
					g.open()
				}
			}
		case deleted && p.Config.Phase == registry.Stable && !isLate(p.Late, "b"):
			g.open() // b has deleted the change's settled sets
		}
	}, redshard.RebalanceOptions{})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if !deleted {
		t.Fatal("Apply never reached Commit")
	}
	// The settle is refused (the key was settled by Rebalance), or, held
	// past a's move deadline, not sent: either way the GET finds no value.
	if err := <-got; err == nil {
		t.Errorf("a's GET of %s, whose move was held across Commit, found a value: the deleted key came back", k)
	} else {
		t.Logf("a's GET: %v", err)
	}
	waitVersion(t, a, rep.To)
	waitVersion(t, b, rep.To)
	for i, c := range []*redshard.Client{a, b} {
		if v, err := c.Get(ctx, k).Result(); err != redis.Nil {
			t.Errorf("client %d: GET %s = %q, %v: the deleted key came back", i, k, v, err)
		}
	}
	for i, m := range f.mini {
		if m.Exists(k) {
			t.Errorf("server %d holds the deleted key %s", i, k)
		}
	}
}

// TestFleetFencedMoveAfterStable: process a takes a key in Migrate, its
// settle is held, and it loses the registry. The fleet goes on without
// it: Rebalance moves the key, b deletes it, the driver reaches Stable
// once a's lease has run out, and b deletes the settled sets. Then a's
// settle is let go: it must not land (a fenced process sends no step of a
// move), or it would RESTORE the deleted key over nothing.
func TestFleetFencedMoveAfterStable(t *testing.T) {
	f := newFleet(t, 2)
	f.apply(t, ctx, f.doc(1))
	cut := &cutRegistry{Registry: f.open(t)}
	a := f.client(t, cut, "a")
	b := f.client(t, f.open(t), "b")
	k, _ := keyMoving(t, f, 1)
	if err := b.Set(ctx, k, "v0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	g := holdSettle(a, "s1", k)
	defer g.open()
	got := make(chan error, 1)
	var deleted bool
	rep, err := f.applyWith(ctx, f.doc(2), func(p fleet.ApplyProgress) {
		switch {
		case p.Rebalancing:
			startHeld(t, g, a, k, got)
			cut.setCut(true)
		case p.Config.Phase == registry.Commit && !deleted:
			deleted = true
			if n, err := b.Del(ctx, k).Result(); err != nil || n != 1 {
				t.Errorf("DEL %s after Rebalance = %d, %v; want 1", k, n, err)
			}
		}
	}, redshard.RebalanceOptions{})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	waitVersion(t, b, rep.To) // b has deleted the settled sets
	if st, _ := a.FleetStatus(); !st.Fenced || st.Version.Phase != registry.Migrate {
		t.Fatalf("a: %+v, want fenced in migrate", st)
	}
	g.open()
	err = <-got
	t.Logf("a's GET, whose move outlived its lease: %v", err)
	if err == nil {
		t.Errorf("a's GET of %s found a value: its late settle brought the deleted key back", k)
	}
	for i, m := range f.mini {
		if m.Exists(k) {
			t.Errorf("server %d holds the deleted key %s", i, k)
		}
	}
	if v, err := b.Get(ctx, k).Result(); err != redis.Nil {
		t.Errorf("b: GET %s = %q, %v: the deleted key came back", k, v, err)
	}
	cut.setCut(false)
	waitFenced(t, a, false)
	waitVersion(t, a, rep.To)
	if v, err := a.Get(ctx, k).Result(); err != redis.Nil {
		t.Errorf("a, caught up: GET %s = %q, %v; want redis.Nil", k, v, err)
	}
}

// ledger is a workload of writers that own their keys: every SET (a new
// value) and DEL is checked at once through every reader, and remembered,
// so that check can compare any client with what was acknowledged.
type ledger struct {
	t    *testing.T
	keys int

	mu      sync.Mutex
	want    map[string]string // the acknowledged value; "" deleted or never written
	readers map[string]*redshard.Client

	// refusals counts the writes refused before they were sent (refused):
	// a process whose heartbeat a loaded machine delayed past its lease is
	// fenced, correctly, and such a write changed nothing.
	refusals atomic.Int64

	gate sync.RWMutex // a writer's op and its reads hold it shared; check holds it alone
	stop chan struct{}
	wg   sync.WaitGroup
}

func newLedger(t *testing.T, keys int) *ledger {
	l := &ledger{t: t, keys: keys, want: map[string]string{}, readers: map[string]*redshard.Client{}, stop: make(chan struct{})}
	t.Cleanup(l.halt)
	return l
}

func (l *ledger) setReader(id string, c *redshard.Client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c == nil {
		delete(l.readers, id)
	} else {
		l.readers[id] = c
	}
}

// refused reports an error of a command refused before it was sent (a
// fenced process, a hold that outlived its bound): it changed nothing.
func refused(err error) bool {
	return errors.Is(err, redshard.ErrFenced) || errors.Is(err, redshard.ErrHandoffInProgress)
}

// write starts a writer of keys id:k0..: a DEL one op in four, else a SET
// of the op's number.
func (l *ledger) write(id string, c *redshard.Client) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for n := 0; ; n++ {
			select {
			case <-l.stop:
				return
			default:
			}
			if !l.op(id, c, n) {
				return
			}
		}
	}()
}

func (l *ledger) op(id string, c *redshard.Client, n int) bool {
	l.gate.RLock()
	defer l.gate.RUnlock()
	k := fmt.Sprintf("%s:k%d", id, (n*7)%l.keys)
	l.mu.Lock()
	prev := l.want[k]
	l.mu.Unlock()
	v := ""
	if n%4 == 3 {
		d, err := c.Del(ctx, k).Result()
		if refused(err) {
			l.refusals.Add(1)
			return true
		}
		if err != nil {
			l.t.Errorf("%s: DEL %s: %v", id, k, err)
			return false
		}
		if (d == 1) != (prev != "") {
			l.t.Errorf("%s: DEL %s = %d, but the acknowledged value is %q", id, k, d, prev)
		}
	} else {
		v = fmt.Sprintf("%s:%d", id, n)
		err := c.Set(ctx, k, v, 0).Err()
		if refused(err) {
			l.refusals.Add(1)
			return true
		}
		if err != nil {
			l.t.Errorf("%s: SET %s: %v", id, k, err)
			return false
		}
	}
	l.mu.Lock()
	l.want[k] = v
	readers := make(map[string]*redshard.Client, len(l.readers))
	for rid, r := range l.readers {
		readers[rid] = r
	}
	l.mu.Unlock()
	for rid, r := range readers {
		if rid != id {
			l.expect(rid, r, k, v, true)
		}
	}
	return true
}

// expect reads k through c and fails unless it is v ("": absent); with
// tolerant, a refusal is no failure.
func (l *ledger) expect(who string, c *redshard.Client, k, v string, tolerant bool) bool {
	got, err := c.Get(ctx, k).Result()
	switch {
	case tolerant && refused(err):
		return true
	case v == "" && err == redis.Nil:
		return true
	case v != "" && err == nil && got == v:
		return true
	}
	l.t.Errorf("%s: GET %s = %q, %v; want %q", who, k, got, err, v)
	return false
}

// check stops the writers and reads every key of the ledger through each
// client of clients (tolerant ones may refuse).
func (l *ledger) check(label string, clients map[string]*redshard.Client, tolerant ...string) {
	l.gate.Lock()
	defer l.gate.Unlock()
	l.mu.Lock()
	want := make(map[string]string, len(l.want))
	for k, v := range l.want {
		want[k] = v
	}
	l.mu.Unlock()
	bad := 0
	for id, c := range clients {
		tol := false
		for _, x := range tolerant {
			tol = tol || x == id
		}
		for k, v := range want {
			if !l.expect(label+": "+id, c, k, v, tol) {
				if bad++; bad > 5 {
					l.t.Fatalf("%s: too many wrong values", label)
				}
			}
		}
	}
	if len(want) == 0 {
		l.t.Fatalf("%s: the ledger is empty", label)
	}
	l.t.Logf("%s: %d keys checked; %d writes refused unsent so far", label, len(want), l.refusals.Load())
}

func (l *ledger) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.want)
}

func (l *ledger) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// TestFleetSkipMigrate: process s acknowledges Prepare and loses the
// registry; the fleet migrates without it (it is dropped), and s comes back
// while the fleet is in Commit: it goes from Prepare straight to Commit.
// Meanwhile a and b write, overwrite and delete keys, many of which move;
// every acknowledged write and delete is read back at once by the other
// live clients, and by every client in Commit (s fenced, then caught up)
// and at the end.
func TestFleetSkipMigrate(t *testing.T) {
	f := newFleet(t, 3)
	f.apply(t, ctx, f.doc(2))
	cut := &cutRegistry{Registry: f.open(t)}
	clients := map[string]*redshard.Client{"a": f.client(t, f.openSteady(t), "a"), "b": f.client(t, f.openSteady(t), "b"), "s": f.client(t, cut, "s")}
	l := newLedger(t, 40)
	for id, c := range clients {
		l.setReader(id, c)
	}
	l.write("a", clients["a"])
	l.write("b", clients["b"])
	var inCommit bool
	rep, err := f.applyWith(ctx, f.doc(3), func(p fleet.ApplyProgress) {
		switch {
		case p.Config.Phase == registry.Prepare && !cut.isCut() && !isLate(p.Late, "s"):
			l.setReader("s", nil) // its reads of moving keys would wait for a Migrate it will not see
			cut.setCut(true)
		case p.Config.Phase == registry.Commit && !inCommit:
			inCommit = true
			waitFenced(t, clients["s"], true)
			if st, _ := clients["s"].FleetStatus(); st.Version.Phase != registry.Prepare {
				t.Errorf("s before catching up: %+v, want in prepare", st)
			}
			l.check("commit, s fenced in prepare", clients, "s")
			cut.setCut(false)
			waitFenced(t, clients["s"], false)
			if st, _ := clients["s"].FleetStatus(); st.Version != p.Config.Version() {
				t.Errorf("s caught up to %s, want %s", st.Version, p.Config.Version())
			}
			l.setReader("s", clients["s"])
			l.check("commit, s caught up", clients)
		}
	}, redshard.RebalanceOptions{})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if !inCommit {
		t.Fatal("Apply never reached Commit")
	}
	for _, c := range clients {
		waitVersion(t, c, rep.To)
	}
	l.halt()
	l.check("stable", clients)
}

// TestFleetSkipCommit: process s acknowledges Migrate, has a move in
// flight and loses the registry; the fleet commits and reaches Stable
// without it, and s comes back straight to Stable. Meanwhile processes
// join in Migrate and in Commit and write too. a writes throughout; the
// key whose settle s holds is deleted by a once Rebalance has moved it.
func TestFleetSkipCommit(t *testing.T) {
	f := newFleet(t, 3)
	f.apply(t, ctx, f.doc(2))
	cut := &cutRegistry{Registry: f.open(t)}
	s := f.client(t, cut, "s")
	// a, b and the processes that join are steady (openSteady): never
	// fenced, so every read of theirs is checked and a's delete is
	// acknowledged, however late a loaded machine runs their heartbeats.
	clients := map[string]*redshard.Client{"a": f.client(t, f.openSteady(t), "a"), "b": f.client(t, f.openSteady(t), "b"), "s": s}
	moving, _ := keyMoving(t, f, 2) // to s2
	if err := clients["b"].Set(ctx, moving, "v0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	g := holdSettle(s, "s2", moving)
	defer g.open()
	got := make(chan error, 1)
	l := newLedger(t, 40)
	for id, c := range clients {
		l.setReader(id, c)
	}
	l.write("a", clients["a"])
	l.write("b", clients["b"])
	var inCommit bool
	rep, err := f.applyWith(ctx, f.doc(3), func(p fleet.ApplyProgress) {
		switch {
		case p.Rebalancing:
			startHeld(t, g, s, moving, got)
			l.setReader("s", nil)
			cut.setCut(true)
			j := f.client(t, f.openSteady(t), "join-migrate")
			clients["join-migrate"] = j
			l.setReader("join-migrate", j)
			l.write("join-migrate", j)
		case p.Config.Phase == registry.Commit && !inCommit:
			inCommit = true
			if n, err := clients["a"].Del(ctx, moving).Result(); err != nil || n != 1 {
				t.Errorf("DEL %s after Rebalance = %d, %v; want 1", moving, n, err)
			}
			j := f.client(t, f.openSteady(t), "join-commit")
			if st, _ := j.FleetStatus(); st.Version != p.Config.Version() {
				t.Errorf("joined in commit: %+v", st)
			}
			clients["join-commit"] = j
			l.setReader("join-commit", j)
			l.write("join-commit", j)
			l.check("commit", clients, "s")
		}
	}, redshard.RebalanceOptions{})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	waitVersion(t, clients["a"], rep.To)
	g.open() // s's settle: after the settled sets were deleted
	if err := <-got; err == nil {
		t.Errorf("s's GET of %s found a value: its late settle brought the deleted key back", moving)
	}
	waitFenced(t, s, true)
	if st, _ := s.FleetStatus(); st.Version.Phase != registry.Migrate {
		t.Errorf("s before catching up: %+v, want in migrate", st)
	}
	l.check("stable, s fenced in migrate", clients, "s")
	cut.setCut(false)
	waitFenced(t, s, false)
	for _, c := range clients {
		waitVersion(t, c, rep.To)
	}
	l.setReader("s", s)
	l.check("stable, s caught up", clients)
	for id, c := range clients {
		if v, err := c.Get(ctx, moving).Result(); err != redis.Nil {
			t.Errorf("%s: GET %s = %q, %v: the deleted key came back", id, moving, v, err)
		}
	}
	l.halt()
	l.check("stable", clients)
}

// TestFleetApplyResumed: a driver interrupted in Migrate (after its
// Rebalance has moved a first batch) and another interrupted in Commit
// leave the change where it is; the next Apply of the same config picks
// it up from there. a and b write and delete throughout, and every client
// reads the ledger back after each interruption and at the end.
func TestFleetApplyResumed(t *testing.T) {
	f := newFleet(t, 3)
	f.apply(t, ctx, f.doc(2))
	clients := map[string]*redshard.Client{"a": f.client(t, f.openSteady(t), "a"), "b": f.client(t, f.openSteady(t), "b")}
	l := newLedger(t, 60)
	for id, c := range clients {
		l.setReader(id, c)
	}
	l.write("a", clients["a"])
	l.write("b", clients["b"])
	for l.size() < 60 { // keys to move before the change starts
		time.Sleep(time.Millisecond)
	}

	// Interrupted in Migrate, after the first batch Rebalance moved.
	mctx, cancel := context.WithCancel(ctx)
	var batches int
	_, err := f.applyWith(mctx, f.doc(3), nil, redshard.RebalanceOptions{BatchSize: 5, Progress: func(redshard.RebalanceProgress) {
		if batches++; batches == 1 {
			cancel()
		}
	}})
	cancel()
	if err == nil {
		t.Fatal("Apply interrupted in Migrate returned no error")
	}
	cur, _ := f.reg.Get(ctx)
	if cur.Phase != registry.Migrate {
		t.Fatalf("after the interruption the registry is at %s, want migrate", cur.Version())
	}
	for _, c := range clients {
		waitVersion(t, c, cur.Version())
	}
	l.check("interrupted in migrate", clients)

	// Resumed, and interrupted in Commit.
	cctx, cancel := context.WithCancel(ctx)
	rep, err := f.applyWith(cctx, f.doc(3), func(p fleet.ApplyProgress) {
		if p.Config.Phase == registry.Commit {
			cancel()
		}
	}, redshard.RebalanceOptions{})
	cancel()
	if err == nil {
		t.Fatal("Apply interrupted in Commit returned no error")
	}
	if rep.From != cur.Version() {
		t.Errorf("resumed from %s, want %s", rep.From, cur.Version())
	}
	if rep.Rebalance.Moved == 0 && rep.Rebalance.Skipped == 0 {
		t.Errorf("the resumed Rebalance did nothing: %+v", rep.Rebalance)
	}
	cur, _ = f.reg.Get(ctx)
	if cur.Phase != registry.Commit {
		t.Fatalf("after the second interruption the registry is at %s, want commit", cur.Version())
	}
	for _, c := range clients {
		waitVersion(t, c, cur.Version())
	}
	l.check("interrupted in commit", clients)

	// Resumed to the end.
	rep = f.apply(t, ctx, f.doc(3))
	if rep.From != cur.Version() || rep.To.Phase != registry.Stable || rep.To.Epoch != cur.Epoch {
		t.Errorf("resumed from commit: %+v", rep)
	}
	for _, c := range clients {
		waitVersion(t, c, rep.To)
	}
	l.halt()
	l.check("stable", clients)
	for i, m := range f.mini {
		for _, k := range m.Keys() {
			if strings.HasPrefix(k, "redshard:settled:") {
				t.Errorf("server %d still holds the settled set %s", i, k)
			}
		}
	}
}
