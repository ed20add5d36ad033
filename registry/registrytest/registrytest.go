// Package registrytest is the conformance suite every registry.Registry
// implementation passes: compare-and-set publishing, ordered watching with
// and without announcements, member heartbeats and expiry, and the driver
// lock. Run it from an implementation's tests against the real store.
package registrytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redshard/redshard/registry"
)

// Open says how Run wants a registry opened.
type Open struct {
	// PollInterval and MemberTTL fill registry.Options; 0 leaves the
	// backend's choice for tests.
	PollInterval time.Duration
	MemberTTL    time.Duration
	// Lossy opens a registry whose watchers must do without its usual
	// announcements: Redis announces its publishes on a channel nobody
	// hears, etcd treats every watch response as a broken watch (it must
	// re-list). Run opens both the publisher and the watcher Lossy.
	Lossy bool
}

// Namespace opens registries on one fresh, empty namespace (a Redis name,
// an etcd prefix) of the store. The backend closes every registry it
// opened when the test ends. sever cuts that one registry off from the
// store without telling the store, as if its process had died: its
// renewals stop, and what it held expires.
type Namespace func(o Open) (r registry.Registry, sever func())

// Generous deadlines: what the suite checks is order and eventual
// delivery, never speed. Measured delays are logged.
const (
	deadline = 20 * time.Second
	lockTTL  = time.Second
)

// Run runs the suite; newNamespace is called once per subtest, with the
// subtest's t.
func Run(t *testing.T, newNamespace func(t *testing.T) Namespace) {
	tests := []struct {
		name string
		run  func(t *testing.T, ns Namespace)
	}{
		{"Empty", testEmpty},
		{"PublishChain", testPublishChain},
		{"InvalidTransition", testInvalidTransition},
		{"PublishRace", testPublishRace},
		{"WatchEvery", testWatchEvery},
		{"WatchPropagation", testWatchPropagation},
		{"WatchLossy", testWatchLossy},
		{"WatchEnds", testWatchEnds},
		{"Heartbeat", testHeartbeat},
		{"MemberIDInUse", testMemberIDInUse},
		{"LeaveOwnIncarnation", testLeaveOwnIncarnation},
		{"Lock", testLock},
		{"LockExpires", testLockExpires},
		{"Close", testClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newNamespace(t)) })
	}
}

// Doc returns a small ring document in redshard.LoadConfig's format, one
// per i.
func Doc(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"shards":[{"name":"a","addr":"127.0.0.1:7000"},{"name":"s%d","addr":"127.0.0.1:%d","weight":1}]}`, i, 7001+i))
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*deadline)
	t.Cleanup(cancel)
	return ctx
}

// Next returns the config after c in a fleet's history: Initial(Doc(i))
// for the zero Config, a change to Doc(i) for a stable one (Begin), and the
// next phase of a change in flight (Advance).
func Next(t *testing.T, c registry.Config, i int) registry.Config {
	t.Helper()
	switch {
	case c.Epoch == 0:
		return registry.Initial(Doc(i))
	case c.Phase == registry.Stable:
		return c.Begin(Doc(i), fmt.Sprintf("change-%d", i), "driver")
	}
	n, err := c.Advance()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func publish(t *testing.T, r registry.Registry, prev, next registry.Config) {
	t.Helper()
	if err := r.Publish(ctxFor(t), prev, next); err != nil {
		t.Fatalf("Publish(%s → %s): %v", prev.Version(), next.Version(), err)
	}
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("bad JSON %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func checkStored(t *testing.T, r registry.Registry, want registry.Config) {
	t.Helper()
	got, err := r.Get(ctxFor(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Version() != want.Version() || !sameJSON(t, got.Doc, want.Doc) || got.Change != want.Change ||
		got.PrevEpoch != want.PrevEpoch || (want.PrevDoc != nil && !sameJSON(t, got.PrevDoc, want.PrevDoc)) {
		t.Fatalf("Get = %s %s (prev %d, change %q), want %s %s (prev %d, change %q)",
			got.Version(), got.Doc, got.PrevEpoch, got.Change, want.Version(), want.Doc, want.PrevEpoch, want.Change)
	}
}

func testEmpty(t *testing.T, ns Namespace) {
	r, _ := ns(Open{})
	c, err := r.Get(ctxFor(t))
	if err != nil || c.Version() != (registry.Version{}) {
		t.Fatalf("Get on an empty registry = %s, %v; want the zero Config", c.Version(), err)
	}
	ms, err := r.Members(ctxFor(t))
	if err != nil || len(ms) != 0 {
		t.Fatalf("Members on an empty registry = %v, %v; want none", ms, err)
	}
}

func testPublishChain(t *testing.T, ns Namespace) {
	r, _ := ns(Open{})
	var prev registry.Config
	for i := range 9 { // initial, then two whole changes
		next := Next(t, prev, i)
		publish(t, r, prev, next)
		checkStored(t, r, next)
		if err := r.Publish(ctxFor(t), prev, next); !errors.Is(err, registry.ErrConflict) {
			t.Fatalf("publishing %s again from %s: %v, want ErrConflict", next.Version(), prev.Version(), err)
		}
		prev = next
	}
	if prev.Version() != (registry.Version{Epoch: 3, Phase: registry.Stable}) {
		t.Fatalf("after two changes the version is %s, want epoch 3 stable", prev.Version())
	}
	// An abort from prepare goes back to the previous document.
	begun := Next(t, prev, 100)
	publish(t, r, prev, begun)
	aborted, err := begun.Abort()
	if err != nil {
		t.Fatal(err)
	}
	publish(t, r, begun, aborted)
	checkStored(t, r, aborted)
	if !sameJSON(t, aborted.Doc, prev.Doc) || aborted.Epoch != begun.Epoch+1 {
		t.Fatalf("abort stored %s %s, want epoch %d with the previous document", aborted.Version(), aborted.Doc, begun.Epoch+1)
	}
}

func testInvalidTransition(t *testing.T, ns Namespace) {
	r, _ := ns(Open{})
	first := Next(t, registry.Config{}, 0)
	publish(t, r, registry.Config{}, first)
	migrate := Next(t, Next(t, first, 1), 1) // skips prepare
	notJSON := Next(t, first, 1)
	notJSON.Doc = json.RawMessage(`[1, 2]`)
	for _, bad := range []registry.Config{migrate, notJSON, first} {
		if err := r.Publish(ctxFor(t), first, bad); !errors.Is(err, registry.ErrInvalidTransition) {
			t.Errorf("Publish(%s → %s %s) = %v, want ErrInvalidTransition", first.Version(), bad.Version(), bad.Doc, err)
		}
	}
	checkStored(t, r, first)
}

// testPublishRace has several publishers race from the same prev, round
// after round: exactly one wins each round, the others get ErrConflict,
// and the stored version only goes forward.
func testPublishRace(t *testing.T, ns Namespace) {
	const racers, rounds = 4, 12
	rs := make([]registry.Registry, racers)
	for i := range rs {
		rs[i], _ = ns(Open{})
	}
	var prev registry.Config
	for round := range rounds {
		nexts := make([]registry.Config, racers)
		errs := make([]error, racers)
		for i := range nexts {
			nexts[i] = Next(t, prev, round*racers+i)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range rs {
			wg.Go(func() {
				<-start
				errs[i] = rs[i].Publish(ctxFor(t), prev, nexts[i])
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both won from %s", round, winner, i, prev.Version())
			case err == nil:
				winner = i
			case !errors.Is(err, registry.ErrConflict):
				t.Fatalf("round %d: racer %d: %v, want nil or ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won from %s: %v", round, prev.Version(), errs)
		}
		checkStored(t, rs[(winner+1)%racers], nexts[winner])
		if !prev.Version().Less(nexts[winner].Version()) {
			t.Fatalf("round %d: version went from %s to %s", round, prev.Version(), nexts[winner].Version())
		}
		if prev.Epoch != 0 && prev.Phase == registry.Stable && nexts[winner].Epoch != prev.Epoch+1 {
			t.Fatalf("round %d: a change from epoch %d got epoch %d", round, prev.Epoch, nexts[winner].Epoch)
		}
		prev = nexts[winner]
	}
}

// watch starts a watcher and returns its channel.
func watch(t *testing.T, r registry.Registry) <-chan registry.Config {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := r.Watch(ctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return ch
}

// receive waits for the next config from ch.
func receive(t *testing.T, ch <-chan registry.Config, waitingFor registry.Version) registry.Config {
	t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatalf("watch channel closed while waiting for %s", waitingFor)
		}
		return c
	case <-timer.C:
		t.Fatalf("no config within %v while waiting for %s", deadline, waitingFor)
	}
	panic("unreachable")
}

// receiveUntil receives until want arrives, checking the order of what
// arrives, and returns everything received.
func receiveUntil(t *testing.T, ch <-chan registry.Config, last, want registry.Version) []registry.Version {
	t.Helper()
	var got []registry.Version
	for {
		c := receive(t, ch, want)
		if !last.Less(c.Version()) {
			t.Fatalf("watcher delivered %s after %s", c.Version(), last)
		}
		last = c.Version()
		got = append(got, last)
		if !last.Less(want) {
			if last != want {
				t.Fatalf("watcher delivered %s while waiting for %s", last, want)
			}
			return got
		}
	}
}

// testWatchEvery publishes a burst of configs: a watcher that hears every
// announcement (and does not poll in the meantime) delivers every one of
// them, in order, after the config stored when it started.
func testWatchEvery(t *testing.T, ns Namespace) {
	pub, _ := ns(Open{})
	w, _ := ns(Open{PollInterval: time.Hour})
	prev := Next(t, registry.Config{}, 0)
	publish(t, pub, registry.Config{}, prev)
	ch := watch(t, w)
	if c := receive(t, ch, prev.Version()); c.Version() != prev.Version() {
		t.Fatalf("watch began with %s, want the stored %s", c.Version(), prev.Version())
	}
	first := prev.Version()
	var want []registry.Version
	for i := range 48 {
		next := Next(t, prev, i+1)
		publish(t, pub, prev, next)
		want = append(want, next.Version())
		prev = next
	}
	got := receiveUntil(t, ch, first, want[len(want)-1])
	if !slices.Equal(got, want) {
		t.Fatalf("watcher delivered %v,\nwant %v", got, want)
	}
}

// propagation publishes n configs one at a time, waiting for w's watcher
// to deliver each, and logs the delays. With jitter, each publish waits a
// random time up to jitter first, so that publishes do not keep step with
// the watcher's poll.
func propagation(t *testing.T, pub, w registry.Registry, how string, jitter time.Duration) {
	const n = 50
	prev := Next(t, registry.Config{}, 0)
	publish(t, pub, registry.Config{}, prev)
	ch := watch(t, w)
	receiveUntil(t, ch, registry.Version{}, prev.Version())
	delays := make([]time.Duration, 0, n)
	for i := range n {
		next := Next(t, prev, i+1)
		if jitter > 0 {
			time.Sleep(rand.N(jitter))
		}
		start := time.Now()
		publish(t, pub, prev, next)
		receiveUntil(t, ch, prev.Version(), next.Version())
		delays = append(delays, time.Since(start))
		prev = next
	}
	slices.Sort(delays)
	t.Logf("%s: publish to delivery over %d publishes: p50 %v, p99 %v, max %v",
		how, n, delays[n/2], delays[n*99/100], delays[n-1])
}

func testWatchPropagation(t *testing.T, ns Namespace) {
	pub, _ := ns(Open{})
	w, _ := ns(Open{PollInterval: time.Hour})
	propagation(t, pub, w, "announced", 0)
}

// testWatchLossy loses every announcement: the watcher's fallback
// (polling, re-listing) still delivers every config, in order.
func testWatchLossy(t *testing.T, ns Namespace) {
	const poll = 50 * time.Millisecond
	pub, _ := ns(Open{Lossy: true})
	w, _ := ns(Open{Lossy: true, PollInterval: poll})
	propagation(t, pub, w, fmt.Sprintf("announcements lost (Redis: poll every %v; etcd: re-list after every watch response)", poll), poll)
}

func testWatchEnds(t *testing.T, ns Namespace) {
	r, _ := ns(Open{})
	publish(t, r, registry.Config{}, Next(t, registry.Config{}, 0))

	ctx, cancel := context.WithCancel(context.Background())
	ch, err := r.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	waitClosed(t, ch, "after its context was cancelled")

	ch2 := watch(t, r)
	ch3 := watch(t, r)
	receive(t, ch3, registry.Version{}) // one read, one unread
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ch2, "after Close")
	waitClosed(t, ch3, "after Close")
	if _, err := r.Watch(context.Background()); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}
}

// waitClosed drains ch until it is closed.
func waitClosed(t *testing.T, ch <-chan registry.Config, when string) {
	t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("watch channel still open %v after %s", deadline, when)
		}
	}
}

func testHeartbeat(t *testing.T, ns Namespace) {
	const ttl = time.Second
	a, _ := ns(Open{MemberTTL: ttl})
	b, _ := ns(Open{MemberTTL: ttl})
	m1 := registry.Member{ID: "p1", Host: "host-1", PID: 101, Epoch: 1, Phase: registry.Stable, Started: time.Now().UTC().Truncate(time.Second)}
	m2 := registry.Member{ID: "p2", Host: "host-2", PID: 102, Epoch: 1, Phase: registry.Stable}
	beat := func(r registry.Registry, m registry.Member) {
		t.Helper()
		if err := r.Heartbeat(ctxFor(t), m); err != nil {
			t.Fatalf("Heartbeat(%s): %v", m.ID, err)
		}
	}
	members := func(r registry.Registry) []registry.Member {
		t.Helper()
		ms, err := r.Members(ctxFor(t))
		if err != nil {
			t.Fatalf("Members: %v", err)
		}
		return ms
	}
	ids := func(ms []registry.Member) string {
		var s []string
		for _, m := range ms {
			s = append(s, m.ID)
		}
		return strings.Join(s, ",")
	}
	beat(a, m1)
	beat(b, m2)
	lastBeat := time.Now()
	ms := members(b)
	if ids(ms) != "p1,p2" {
		t.Fatalf("Members = %s, want p1,p2", ids(ms))
	}
	if g := ms[0]; g.Host != m1.Host || g.PID != m1.PID || g.Version() != m1.Version() || !g.Started.Equal(m1.Started) || g.Seen.IsZero() {
		t.Fatalf("Members()[0] = %+v, want %+v with Seen set", g, m1)
	}

	prepare := registry.Version{Epoch: 2, Phase: registry.Prepare}
	if late := registry.Acked(ms, prepare); ids(late) != "p1,p2" {
		t.Fatalf("Acked(%s) = %s, want p1,p2 late", prepare, ids(late))
	}
	m1.Epoch, m1.Phase = 2, registry.Prepare
	beat(a, m1)
	ms = members(a)
	if late := registry.Acked(ms, prepare); ids(late) != "p2" {
		t.Fatalf("Acked(%s) = %s after p1 acknowledged, want p2 late", prepare, ids(late))
	}
	if late := registry.Acked(ms, registry.Version{Epoch: 1, Phase: registry.Stable}); late != nil {
		t.Fatalf("Acked(epoch 1 stable) = %s, want nobody late", ids(late))
	}

	// p2 stops; p1 goes on beating. p2 expires, p1 does not.
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for ids(members(a)) != "p1" {
		select {
		case <-tick.C:
			beat(a, m1)
		case <-timer.C:
			t.Fatalf("p2 did not expire within %v of its last heartbeat (ttl %v): members %s", deadline, ttl, ids(members(a)))
		}
	}
	t.Logf("a member with ttl %v expired %v after its last heartbeat", ttl, time.Since(lastBeat).Round(time.Millisecond))

	if err := a.Leave(ctxFor(t), m1); err != nil {
		t.Fatal(err)
	}
	if got := ids(members(b)); got != "" {
		t.Fatalf("Members after p1 left = %s, want none", got)
	}
	if err := a.Leave(ctxFor(t), registry.Member{ID: "nobody"}); err != nil {
		t.Fatalf("Leave of an unknown id: %v", err)
	}
	if err := a.Heartbeat(ctxFor(t), registry.Member{}); !errors.Is(err, registry.ErrInvalidArgument) {
		t.Fatalf("Heartbeat without an ID: %v, want ErrInvalidArgument", err)
	}
}

// testMemberIDInUse: a heartbeat is a compare-and-set on the incarnation.
// A live entry of another incarnation refuses it (ErrMemberIDInUse,
// keeping the entry); an entry that left, expired, or has no incarnation
// is taken over.
func testMemberIDInUse(t *testing.T, ns Namespace) {
	// a and b's entries must stay live while the test runs, however
	// loaded the machine: their lease is the suite's whole deadline (they
	// leave at the end). c's expires.
	const ttl = time.Second
	a, _ := ns(Open{MemberTTL: 3 * deadline})
	b, _ := ns(Open{MemberTTL: 3 * deadline})
	c, _ := ns(Open{MemberTTL: ttl})
	incarnations := func(r registry.Registry) string {
		t.Helper()
		ms, err := r.Members(ctxFor(t))
		if err != nil {
			t.Fatalf("Members: %v", err)
		}
		var s []string
		for _, m := range ms {
			s = append(s, m.ID+"="+m.Incarnation)
		}
		return strings.Join(s, ",")
	}
	beat := func(r registry.Registry, m registry.Member) {
		t.Helper()
		if err := r.Heartbeat(ctxFor(t), m); err != nil {
			t.Fatalf("Heartbeat(%s, %q): %v", m.ID, m.Incarnation, err)
		}
	}
	refused := func(r registry.Registry, m registry.Member) {
		t.Helper()
		if err := r.Heartbeat(ctxFor(t), m); !errors.Is(err, registry.ErrMemberIDInUse) {
			t.Fatalf("Heartbeat(%s, %q) over a live entry of another incarnation: %v, want ErrMemberIDInUse", m.ID, m.Incarnation, err)
		}
	}
	p1 := registry.Member{ID: "p", Incarnation: "one", Epoch: 1, Phase: registry.Stable}
	p2 := registry.Member{ID: "p", Incarnation: "two", Epoch: 2, Phase: registry.Prepare}
	beat(a, p1)
	refused(b, p2)
	refused(a, p2) // through the same registry too: it is the process, not the client, that counts
	refused(b, registry.Member{ID: "p"})
	if got := incarnations(b); got != "p=one" {
		t.Fatalf("Members after refused heartbeats = %s, want p=one", got)
	}
	if ms, err := b.Members(ctxFor(t)); err != nil || len(ms) != 1 || ms[0].Version() != p1.Version() {
		t.Fatalf("Members after refused heartbeats = %+v, %v: want p1's version %s kept", ms, err, p1.Version())
	}
	beat(a, p1) // its own incarnation renews it

	// An entry with no incarnation (an older version's) is taken over.
	beat(a, registry.Member{ID: "q", Epoch: 1, Phase: registry.Stable})
	beat(b, registry.Member{ID: "q", Incarnation: "three", Epoch: 1, Phase: registry.Stable})
	if got := incarnations(a); got != "p=one,q=three" {
		t.Fatalf("Members after taking over q = %s, want p=one,q=three", got)
	}

	// An entry that left is taken over, and its old incarnation is then
	// refused: the id is another process's now.
	if err := a.Leave(ctxFor(t), p1); err != nil {
		t.Fatal(err)
	}
	beat(b, p2)
	refused(a, p1)
	if got := incarnations(a); got != "p=two,q=three" {
		t.Fatalf("Members after p was taken over = %s, want p=two,q=three", got)
	}

	// An entry that expired is taken over: r's first incarnation stops
	// beating, and the second's heartbeats are refused until it expires.
	beat(c, registry.Member{ID: "r", Incarnation: "old"})
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		err := b.Heartbeat(ctxFor(t), registry.Member{ID: "r", Incarnation: "new"})
		if err == nil {
			break
		}
		if !errors.Is(err, registry.ErrMemberIDInUse) {
			t.Fatalf("Heartbeat(r, new): %v", err)
		}
		select {
		case <-tick.C:
		case <-timer.C:
			t.Fatalf("r's expired entry was not taken over within %v (ttl %v)", deadline, ttl)
		}
	}
	if got := incarnations(c); got != "p=two,q=three,r=new" {
		t.Fatalf("Members after r expired and was taken over = %s, want p=two,q=three,r=new", got)
	}
	for _, m := range []registry.Member{p2, {ID: "q", Incarnation: "three"}, {ID: "r", Incarnation: "new"}} {
		if err := b.Leave(ctxFor(t), m); err != nil {
			t.Fatal(err)
		}
	}
	if got := incarnations(a); got != "" {
		t.Fatalf("Members after every entry left = %s, want none", got)
	}
}

// testLeaveOwnIncarnation: Leave removes the leaver's own incarnation
// only. A process paused past its lease, whose id a new incarnation took
// meanwhile, leaves late (its Close): the new incarnation's entry stays,
// and goes on being renewed; the new incarnation's own Leave removes it.
// An entry with no incarnation is removed by a Leave with none, and only
// by one.
func testLeaveOwnIncarnation(t *testing.T, ns Namespace) {
	// The paused process's entry expires; the others live while the test
	// runs, however loaded the machine (they leave at the end).
	const ttl = time.Second
	paused, _ := ns(Open{MemberTTL: ttl})
	rejoined, _ := ns(Open{MemberTTL: 3 * deadline})
	other, _ := ns(Open{MemberTTL: 3 * deadline})
	incarnations := func() string {
		t.Helper()
		ms, err := other.Members(ctxFor(t))
		if err != nil {
			t.Fatalf("Members: %v", err)
		}
		var s []string
		for _, m := range ms {
			s = append(s, m.ID+"="+m.Incarnation)
		}
		return strings.Join(s, ",")
	}
	leave := func(r registry.Registry, m registry.Member) {
		t.Helper()
		if err := r.Leave(ctxFor(t), m); err != nil {
			t.Fatalf("Leave(%s, %q): %v", m.ID, m.Incarnation, err)
		}
	}
	old := registry.Member{ID: "p", Incarnation: "old", Epoch: 1, Phase: registry.Stable}
	cur := registry.Member{ID: "p", Incarnation: "new", Epoch: 1, Phase: registry.Stable}
	if err := paused.Heartbeat(ctxFor(t), old); err != nil {
		t.Fatal(err)
	}
	// old stops beating (paused); cur takes the id once old's entry expired.
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		err := rejoined.Heartbeat(ctxFor(t), cur)
		if err == nil {
			break
		}
		if !errors.Is(err, registry.ErrMemberIDInUse) {
			t.Fatalf("Heartbeat(p, new): %v", err)
		}
		select {
		case <-tick.C:
		case <-timer.C:
			t.Fatalf("p's expired entry was not taken over within %v (ttl %v)", deadline, ttl)
		}
	}

	// old resumes and leaves late, through its own registry and through
	// another: cur's entry stays, and cur's heartbeats are still its own.
	leave(paused, old)
	if got := incarnations(); got != "p=new" {
		t.Fatalf("Members after the old incarnation's late Leave = %s, want p=new: it removed the new incarnation's entry", got)
	}
	leave(other, old)
	leave(other, registry.Member{ID: "p"})
	if got := incarnations(); got != "p=new" {
		t.Fatalf("Members after Leaves of other incarnations = %s, want p=new", got)
	}
	if err := rejoined.Heartbeat(ctxFor(t), cur); err != nil {
		t.Fatalf("Heartbeat(p, new) after the old incarnation left: %v", err)
	}
	leave(rejoined, cur)
	if got := incarnations(); got != "" {
		t.Fatalf("Members after the new incarnation left = %s, want none", got)
	}

	// An entry with no incarnation (an older version's) is left by a
	// Leave with none.
	if err := other.Heartbeat(ctxFor(t), registry.Member{ID: "q"}); err != nil {
		t.Fatal(err)
	}
	leave(other, registry.Member{ID: "q", Incarnation: "some"})
	if got := incarnations(); got != "q=" {
		t.Fatalf("Members after a Leave of another incarnation of q = %s, want q=", got)
	}
	leave(other, registry.Member{ID: "q"})
	if got := incarnations(); got != "" {
		t.Fatalf("Members after q left = %s, want none", got)
	}
}

func lock(t *testing.T, r registry.Registry, owner string) registry.DriverLock {
	t.Helper()
	l, err := r.Lock(ctxFor(t), owner, lockTTL)
	if err != nil {
		t.Fatalf("Lock(%s): %v", owner, err)
	}
	return l
}

func refused(t *testing.T, r registry.Registry, owner, holder string) {
	t.Helper()
	l, err := r.Lock(ctxFor(t), owner, lockTTL)
	if !errors.Is(err, registry.ErrLocked) || !strings.Contains(err.Error(), holder) {
		if l != nil {
			_ = l.Unlock(ctxFor(t))
		}
		t.Fatalf("Lock(%s) while %s holds it: %v, want ErrLocked naming %s", owner, holder, err, holder)
	}
}

func testLock(t *testing.T, ns Namespace) {
	a, _ := ns(Open{})
	b, _ := ns(Open{})
	la := lock(t, a, "alice")
	refused(t, b, "bob", "alice")
	refused(t, a, "alice", "alice")

	// Renewal keeps it past its ttl.
	timer := time.NewTimer(3 * lockTTL)
	select {
	case <-la.Lost():
		t.Fatal("a renewed lock was lost")
	case <-timer.C:
	}
	refused(t, b, "bob", "alice")

	if err := la.Unlock(ctxFor(t)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case <-la.Lost():
	case <-time.After(deadline):
		t.Fatal("Lost not closed after Unlock")
	}
	if err := la.Unlock(ctxFor(t)); err != nil {
		t.Fatalf("second Unlock: %v", err)
	}
	lb := lock(t, b, "bob")
	refused(t, a, "alice", "bob")
	if err := lb.Unlock(ctxFor(t)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := a.Lock(ctxFor(t), "alice", ttl); !errors.Is(err, registry.ErrInvalidArgument) {
			t.Fatalf("Lock with ttl %v: %v, want ErrInvalidArgument", ttl, err)
		}
	}
	if _, err := a.Lock(ctxFor(t), "", lockTTL); !errors.Is(err, registry.ErrInvalidArgument) {
		t.Fatalf("Lock without an owner: %v, want ErrInvalidArgument", err)
	}
}

// testLockExpires kills a holder: its lock expires after its ttl and can
// be taken; the dead holder's Lost fires.
func testLockExpires(t *testing.T, ns Namespace) {
	a, sever := ns(Open{})
	b, _ := ns(Open{})
	la := lock(t, a, "alice")
	sever()
	died := time.Now()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	var lb registry.DriverLock
	for lb == nil {
		l, err := b.Lock(ctxFor(t), "bob", lockTTL)
		switch {
		case err == nil:
			lb = l
		case !errors.Is(err, registry.ErrLocked):
			t.Fatalf("Lock(bob): %v", err)
		}
		select {
		case <-timer.C:
			t.Fatalf("the lock of a dead holder was not released within %v (ttl %v)", deadline, lockTTL)
		case <-time.After(lockTTL / 10):
		}
	}
	t.Logf("a dead holder's lock (ttl %v) was taken %v after it died", lockTTL, time.Since(died).Round(time.Millisecond))
	select {
	case <-la.Lost():
	case <-timer.C:
		t.Fatalf("the dead holder's Lost did not fire within %v", deadline)
	}
	if err := lb.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

func testClose(t *testing.T, ns Namespace) {
	a, _ := ns(Open{})
	b, _ := ns(Open{})
	la := lock(t, a, "alice")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case <-la.Lost():
	default:
		t.Fatal("a lock of a closed registry is not Lost")
	}
	// Close released the lock.
	lb := lock(t, b, "bob")
	_ = lb.Unlock(ctxFor(t))
	ctx := ctxFor(t)
	for name, err := range map[string]error{
		"Get":       func() error { _, err := a.Get(ctx); return err }(),
		"Publish":   a.Publish(ctx, registry.Config{}, registry.Initial(Doc(0))),
		"Heartbeat": a.Heartbeat(ctx, registry.Member{ID: "x"}),
		"Members":   func() error { _, err := a.Members(ctx); return err }(),
		"Leave":     a.Leave(ctx, registry.Member{ID: "x"}),
		"Lock":      func() error { _, err := a.Lock(ctx, "x", lockTTL); return err }(),
	} {
		if !errors.Is(err, registry.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// Call is one Registry method, called with a context, for tests that call
// every method under a fault (a blackholed registry, say).
type Call struct {
	What string
	Call func(context.Context) error
}

// Calls returns a call of every method of r: first is the config r holds,
// held a driver lock taken on it. Watch counts as failed when it starts.
func Calls(t *testing.T, r registry.Registry, first registry.Config, held registry.DriverLock) []Call {
	return []Call{
		{"Get", func(ctx context.Context) error { _, err := r.Get(ctx); return err }},
		{"Publish", func(ctx context.Context) error { return r.Publish(ctx, first, Next(t, first, 1)) }},
		{"Heartbeat", func(ctx context.Context) error { return r.Heartbeat(ctx, registry.Member{ID: "m"}) }},
		{"Members", func(ctx context.Context) error { _, err := r.Members(ctx); return err }},
		{"Leave", func(ctx context.Context) error { return r.Leave(ctx, registry.Member{ID: "m"}) }},
		{"Lock", func(ctx context.Context) error { _, err := r.Lock(ctx, "other", time.Minute); return err }},
		{"Unlock", func(ctx context.Context) error { return held.Unlock(ctx) }},
		{"Watch", func(ctx context.Context) error {
			ch, err := r.Watch(ctx)
			if err == nil {
				for range ch { // a watch started: it ends with ctx
				}
				return errors.New("Watch started with its registry blackholed")
			}
			return err
		}},
	}
}

// CallEach runs every call with a 500ms deadline, each while the registry
// cannot answer: a call must return within bound, with an error ok accepts.
// A call still running after bound is a failure; cut (closing the
// connections) then ends it.
func CallEach(t *testing.T, calls []Call, bound time.Duration, ok func(error) bool, cut func()) {
	t.Helper()
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- c.Call(ctx) }()
		select {
		case err := <-done:
			if err == nil || !ok(err) {
				t.Errorf("%s with the registry unreachable: %v, want a deadline or timeout error", c.What, err)
			}
		case <-time.After(bound):
			cut()
			<-done
			t.Fatalf("%s with the registry unreachable and a 500ms deadline: still running after %v", c.What, bound)
		}
		cancel()
	}
}
