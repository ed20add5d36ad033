package redshard_test

// Regressions of issue 26 (fencing assumptions the code did not check),
// on real redis-servers: miniredis accepts connection names Redis refuses,
// and its CLIENT LIST is redshardtest's (internal/miniadmin).

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/registry"
)

// newRealFleet is newFleet on real redis-servers: n shards and the
// registry's own server, all stopped at the end of the test.
func newRealFleet(t *testing.T, n int) *testFleet {
	t.Helper()
	f := &testFleet{}
	for range n {
		f.addrs = append(f.addrs, redistest.Start(t).Addr())
	}
	f.rdb = redistest.Start(t).Client(t)
	f.reg = f.open(t)
	return f
}

// fleetClient is f.client with the shards' connection options so.
func fleetClient(t *testing.T, reg registry.Registry, fo *redshard.FleetOptions, so *redis.Options, set func(*redshard.Options)) *redshard.Client {
	t.Helper()
	o := &redshard.Options{Registry: reg, Fleet: fo, ShardOptions: so, Health: &redshard.HealthOptions{Disable: true}}
	if set != nil {
		set(o)
	}
	c, err := redshard.NewClient(o)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// connRecorder is a Dialer that remembers the local address of every
// connection it makes: the addr= of that connection in CLIENT LIST.
type connRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (r *connRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		r.mu.Lock()
		r.addrs = append(r.addrs, c.LocalAddr().String())
		r.mu.Unlock()
	}
	return c, err
}

func (r *connRecorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.addrs)
}

// openConns returns the lines of CLIENT LIST on the server addr whose
// client address is one of addrs.
func openConns(t *testing.T, addr string, addrs []string) []string {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: addr})
	defer cl.Close()
	list, err := cl.ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST on %s: %v", addr, err)
	}
	var out []string
	for line := range strings.Lines(list) {
		for f := range strings.FieldsSeq(line) {
			if a, ok := strings.CutPrefix(f, "addr="); ok && slices.Contains(addrs, a) {
				out = append(out, strings.TrimSpace(line))
			}
		}
	}
	return out
}

// TestFleetSeverByIdentity (issue 26, finding 2): a member the fleet drops
// loses every connection to the shards by the time Apply reaches Stable,
// even when a live member's connections would have the same name under a
// name-only scheme: a look-alike id ("w 1" dropped, "w_1" live: names once
// mapped ' ' to '_') or the very same id (a new process reusing the id of
// a paused one).
func TestFleetSeverByIdentity(t *testing.T) {
	for _, tc := range []struct{ name, dropped, live string }{
		{"look-alike ids", "w 1", "w_1"},
		{"reused id", "p", "p"},
	} {
		t.Run(tc.name, func(t *testing.T) { fleetSeverByIdentity(t, tc.dropped, tc.live) })
	}
}

func fleetSeverByIdentity(t *testing.T, dropped, live string) {
	f := newRealFleet(t, 2)
	f.apply(t, ctx, f.doc(1))
	cut := &cutRegistry{Registry: f.open(t)}
	rec := &connRecorder{}
	d := fleetClient(t, cut, &redshard.FleetOptions{MemberID: dropped}, &redis.Options{Dialer: rec.dial}, nil)
	if err := d.Set(ctx, "k", "from the dropped member", 0).Err(); err != nil {
		t.Fatalf("SET by %q: %v", dropped, err)
	}
	cut.setCut(true) // its heartbeats fail from now on: the fleet drops it after its lease
	waitFenced(t, d, true)
	if live == dropped {
		// The registry refuses the id while d's entry lives
		// (registry.ErrMemberIDInUse): the new process comes once the
		// fleet dropped d.
		waitDropped(t, f.reg, dropped)
	}
	l := fleetClient(t, f.open(t), &redshard.FleetOptions{MemberID: live}, nil, nil)
	if err := l.Set(ctx, "k", "from the live member", 0).Err(); err != nil {
		t.Fatalf("SET by %q: %v", live, err)
	}
	// d sends nothing more: every connection it has is one it opened
	// before the change.
	conns := rec.snapshot()
	if len(conns) == 0 {
		t.Fatal("the dropped member opened no connection")
	}
	rep := f.apply(t, ctx, f.doc(2))
	if rep.To.Phase != registry.Stable {
		t.Fatalf("Apply ended at %s", rep.To)
	}
	for _, addr := range f.addrs[:2] {
		if open := openConns(t, addr, conns); len(open) > 0 {
			t.Errorf("server %s: connections of dropped member %q survived the change (live member %q):\n%s",
				addr, dropped, live, strings.Join(open, "\n"))
		}
	}
	waitVersion(t, l, rep.To)
	if err := l.Set(ctx, "k", "after", 0).Err(); err != nil {
		t.Fatalf("SET by live member %q after the change: %v", live, err)
	}
}

// waitDropped waits (bounded) until the registry lists no member id.
func waitDropped(t *testing.T, reg registry.Registry, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ms, err := reg.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(ms, func(m registry.Member) bool { return m.ID == id }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %q still live after 20s", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFleetMemberIDAnyBytes (issue 26, finding 3): a member id with bytes
// Redis refuses in a connection name (non-ASCII, spaces, control bytes, the
// escape character) works on real Redis, and two such processes whose ids
// differ only there see each other's writes.
func TestFleetMemberIDAnyBytes(t *testing.T) {
	f := newRealFleet(t, 2)
	f.apply(t, ctx, f.doc(2))
	ids := []string{"café-1", "w 1\n\x00%41", "w_1_\x00%2541"}
	var clients []*redshard.Client
	for _, id := range ids {
		clients = append(clients, fleetClient(t, f.open(t), &redshard.FleetOptions{MemberID: id}, nil, nil))
	}
	for i, c := range clients {
		k := "key:" + string(rune('a'+i))
		if err := c.Set(ctx, k, ids[i], 0).Err(); err != nil {
			t.Fatalf("SET by member %q: %v", ids[i], err)
		}
		for j, o := range clients {
			if got, err := o.Get(ctx, k).Result(); err != nil || got != ids[i] {
				t.Fatalf("GET %s by member %q: %q, %v; want %q", k, ids[j], got, err, ids[i])
			}
		}
	}
}

// TestFleetMemberIncarnation: every process draws an incarnation of its
// own; the status reports it and its heartbeats carry it. (Two live
// processes never share an id: TestFleetMemberIDInUse.)
func TestFleetMemberIncarnation(t *testing.T) {
	f := newFleet(t, 1)
	f.apply(t, ctx, f.doc(1))
	a := f.client(t, f.open(t), "same")
	sa, _ := a.FleetStatus()
	b := f.client(t, f.open(t), "other")
	sb, _ := b.FleetStatus()
	if sa.Member.Incarnation == "" || sa.Member.Incarnation == sb.Member.Incarnation {
		t.Fatalf("incarnations %q and %q: want two distinct ones", sa.Member.Incarnation, sb.Member.Incarnation)
	}
	members, err := f.reg.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 || members[1].ID != "same" || members[1].Incarnation != sa.Member.Incarnation {
		t.Fatalf("members %+v: want same's entry with incarnation %q", members, sa.Member.Incarnation)
	}
}
