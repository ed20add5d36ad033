package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/internal/miniadmin"
	"github.com/redshard/redshard/internal/testlog"
	"github.com/redshard/redshard/registry"
)

// The harness of the root's fleet tests (fleet_test.go there), for the
// tests of Apply.

func TestMain(m *testing.M) {
	report := testlog.GoRedis()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		report()
		os.Exit(code)
	}))
}

// testFleet is miniredis shards and a miniredis registry.
type testFleet struct {
	addrs []string
	mini  []*miniredis.Miniredis
	reg   registry.Registry
	rdb   *redis.Client // the registry's server
	regm  *miniredis.Miniredis
}

const fleetTTL = 2 * time.Second

func newFleet(t *testing.T, n int) *testFleet {
	t.Helper()
	f := &testFleet{}
	for range n {
		m := miniredis.RunT(t)
		miniadmin.Install(m)
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
// heartbeat or beacon read a loaded machine delays, so they are never
// fenced and what the test asserts of them (every read answered) does not
// depend on the scheduler keeping up.
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

// recipeDoc is f.doc(n) naming a placement recipe (0: none).
func recipeDoc(t *testing.T, f *testFleet, n, recipe int) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(f.doc(n), &m); err != nil {
		t.Fatal(err)
	}
	if recipe != 0 {
		m["ring_recipe"] = recipe
	}
	b, _ := json.Marshal(m)
	return b
}

// awaitStatus waits, for at most 15s, until c's FleetStatus satisfies ok.
func awaitStatus(t *testing.T, c *redshard.Client, what string, ok func(redshard.FleetStatus) bool) redshard.FleetStatus {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, _ := c.FleetStatus()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15s the process is not %s: %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitVersion(t testing.TB, c *redshard.Client, v registry.Version) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := c.FleetStatus()
		if !st.Version.Less(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("client still on %s, want %s", st.Version, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
