package redshardtest_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"go/build"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/redshardtest"
	"github.com/redshard/redshard/registry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Every testing.TB is a TB.
var (
	_ redshardtest.TB = testing.TB(nil)
	_ redshardtest.TB = (*testing.B)(nil)
	_ redshardtest.TB = (*testing.F)(nil)
)

// TestNoTestingImport: a program may import the package (an embedded
// demo does) without linking "testing".
func TestNoTestingImport(t *testing.T) {
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(p.Imports, "testing") {
		t.Errorf("the package's own files import \"testing\": %q", p.Imports)
	}
}

func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestNewServerClosedByCleanup(t *testing.T) {
	var addr string
	t.Run("test", func(t *testing.T) {
		s := redshardtest.NewServer(t)
		addr = s.Addr()
		if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
			t.Errorf("Addr() = %q, want one on 127.0.0.1", addr)
		}
		if err := client(t, addr).Ping(context.Background()).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
	})
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
		t.Errorf("the server on %s still accepts connections after its test ended", addr)
	}
}

func TestServerClientCommands(t *testing.T) {
	ctx := context.Background()
	s := redshardtest.NewServer(t)
	rdb := client(t, s.Addr())
	cn := rdb.Conn()
	defer cn.Close()
	if err := cn.ClientSetName(ctx, "victim").Err(); err != nil {
		t.Fatal(err)
	}
	id, err := cn.ClientID(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT ID: %v", err)
	}
	list, err := rdb.ClientList(ctx).Result()
	if want := fmt.Sprintf("id=%d addr=miniredis name=victim\n", id); err != nil || !strings.Contains(list, want) {
		t.Fatalf("CLIENT LIST = %q, %v; want a line %q", list, err, want)
	}
	if err := rdb.ClientKillByFilter(ctx, "ID", fmt.Sprint(id)).Err(); err != nil {
		t.Fatalf("CLIENT KILL ID: %v", err)
	}
	if err := cn.Set(ctx, "k", "v", 0).Err(); err == nil || s.Exists("k") {
		t.Errorf("a killed connection's SET: %v, key written %v; want an error and no key", err, s.Exists("k"))
	}
	if n := s.Killed(); n != 1 {
		t.Errorf("Killed() = %d, want 1", n)
	}
}

// TestServerRestart: a Server restarted with its Restart keeps its data
// and its CLIENT subcommands (miniredis's own Restart drops the latter).
func TestServerRestart(t *testing.T) {
	ctx := context.Background()
	s := redshardtest.NewServer(t)
	if err := s.Set("k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	rdb := client(t, s.Addr())
	if err := rdb.ClientList(ctx).Err(); err != nil {
		t.Errorf("CLIENT LIST after Restart: %v", err)
	}
	if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Errorf("GET k after Restart: %q, %v", v, err)
	}
}

func TestServerSetError(t *testing.T) {
	ctx := context.Background()
	s := redshardtest.NewServer(t)
	rdb := client(t, s.Addr())
	s.SetError("LOADING Redis is loading the dataset in memory")
	if err := rdb.Get(ctx, "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "LOADING") {
		t.Errorf("GET under SetError: %v", err)
	}
	s.SetError("")
	if err := rdb.ClientList(ctx).Err(); err != nil {
		t.Errorf("CLIENT LIST after SetError(\"\"): %v", err)
	}
}

func TestCluster(t *testing.T) {
	ctx := context.Background()
	cl := redshardtest.NewCluster(t, &redshard.Options{Health: &redshard.HealthOptions{Disable: true}}, 1, 1, 2)
	var names []string
	for i, s := range cl.Shards {
		names = append(names, fmt.Sprintf("%s/%g", s.Name, s.Weight))
		if s.Addr != cl.Servers[i].Addr() || cl.Server(s.Name) != cl.Servers[i] {
			t.Errorf("shard %s at %s: server %s", s.Name, s.Addr, cl.Servers[i].Addr())
		}
	}
	if want := []string{"shard-0/1", "shard-1/1", "shard-2/2"}; !slices.Equal(names, want) {
		t.Errorf("shards %q, want %q", names, want)
	}
	if cl.Server("nope") != nil {
		t.Error(`Server("nope") is not nil`)
	}
	per := map[string]int{}
	for i := range 300 {
		k := fmt.Sprintf("k%d", i)
		if err := cl.Client.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		owner, _ := cl.Client.ShardFor(k)
		if !cl.Server(owner).Exists(k) {
			t.Errorf("%s is not on its owner %s", k, owner)
		}
		per[owner]++
	}
	if len(per) != 3 {
		t.Errorf("keys per shard %v: want keys on every shard", per)
	}
	if err := cl.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := cl.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
	if err := cl.Client.Get(ctx, "k1").Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("GET after Close: %v, want redis.ErrClosed", err)
	}
}

func TestStartClusterRefuses(t *testing.T) {
	if _, err := redshardtest.StartCluster(nil); err == nil {
		t.Error("StartCluster with no weight: no error")
	}
	// The client's options are validated after the servers start: those
	// are closed again (goleak and the closed ports would tell).
	if _, err := redshardtest.StartCluster(&redshard.Options{VnodesPerWeight: -1}, 1); !errors.Is(err, redshard.ErrInvalidOptions) {
		t.Errorf("StartCluster with bad options: %v, want ErrInvalidOptions", err)
	}
}

// TestWithBenchmark: the New functions work with a *testing.B, and clean
// up after each round of the benchmark.
func TestWithBenchmark(t *testing.T) {
	bt := flag.Lookup("test.benchtime")
	old := bt.Value.String()
	if err := bt.Value.Set("20x"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bt.Value.Set(old) }()
	var addrs []string
	res := testing.Benchmark(func(b *testing.B) {
		cl := redshardtest.NewCluster(b, nil, 1, 1)
		for _, s := range cl.Shards {
			addrs = append(addrs, s.Addr)
		}
		ctx := context.Background()
		for b.Loop() {
			if err := cl.Client.Set(ctx, "k", "v", 0).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	if res.N == 0 || len(addrs) == 0 {
		t.Fatalf("the benchmark did not run: %+v", res)
	}
	for _, addr := range addrs {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("a server of the benchmark, on %s, is still up", addr)
		}
	}
}

func TestDoc(t *testing.T) {
	got := string(redshardtest.Doc(
		redshard.Shard{Name: "a", Addr: "127.0.0.1:1"},
		redshard.Shard{Name: `b"c`, Addr: "127.0.0.1:2", Weight: 2.5},
	))
	want := `{"shards":[{"name":"a","addr":"127.0.0.1:1"},{"name":"b\"c","addr":"127.0.0.1:2","weight":2.5}]}`
	if got != want {
		t.Errorf("Doc = %s, want %s", got, want)
	}
	if got := string(redshardtest.Doc()); got != `{"shards":[]}` {
		t.Errorf("Doc() = %s", got)
	}
}

// TestFleetMembershipChange is what a user's test of a fleet looks like:
// two processes follow the registry while a shard is added and another
// removed; every key written before is read back by the other process,
// and lives on its owner only.
func TestFleetMembershipChange(t *testing.T) {
	ctx := context.Background()
	f := redshardtest.NewFleet(t, nil)
	if _, err := f.Apply(ctx, redshardtest.Doc(f.Shards[:2]...), fleet.ApplyOptions{}); err != nil {
		t.Fatalf("Apply of two shards: %v", err)
	}
	web1, err := f.Join("web-1")
	if err != nil {
		t.Fatal(err)
	}
	web2, err := f.Join("web-2")
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		if err := web1.Set(ctx, fmt.Sprintf("user:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, want ...redshard.Shard) {
		t.Helper()
		for _, c := range []*redshard.Client{web1, web2} {
			var got []string
			for _, s := range c.Shards() {
				got = append(got, s.Name)
			}
			var names []string
			for _, s := range want {
				names = append(names, s.Name)
			}
			if !slices.Equal(got, names) {
				t.Errorf("%s: a process is on %q, want %q", when, got, names)
			}
		}
		for i := range n {
			k := fmt.Sprintf("user:%d", i)
			if v, err := web2.Get(ctx, k).Int(); err != nil || v != i {
				t.Errorf("%s: GET %s = %d, %v; want %d", when, k, v, err, i)
			}
			owner, _ := web2.ShardFor(k)
			for j, s := range f.Shards {
				if on := f.Servers[j].Exists(k); on != (s.Name == owner) {
					t.Errorf("%s: %s on %s: %v (its owner is %s)", when, k, s.Name, on, owner)
				}
			}
		}
	}

	rep, err := f.Apply(ctx, redshardtest.Doc(f.Shards...), fleet.ApplyOptions{})
	if err != nil {
		t.Fatalf("Apply adding shard-2: %v", err)
	}
	if rep.Rebalance.Moved == 0 || rep.To.Epoch != 2 {
		t.Errorf("adding shard-2: moved %d keys, to %s; want some keys moved, to epoch 2", rep.Rebalance.Moved, rep.To)
	}
	check("after adding shard-2", f.Shards...)

	if _, err := f.Apply(ctx, redshardtest.Doc(f.Shards[0], f.Shards[2]), fleet.ApplyOptions{}); err != nil {
		t.Fatalf("Apply removing shard-1: %v", err)
	}
	check("after removing shard-1", f.Shards[0], f.Shards[2])
}

func TestFleetClose(t *testing.T) {
	f, err := redshardtest.StartFleet(&redshardtest.FleetOptions{Weights: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Join("early"); err == nil {
		t.Error("Join on an empty registry: no error")
	}
	ctx := context.Background()
	if _, err := f.Apply(ctx, redshardtest.Doc(f.Shards...), fleet.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := f.Join("p")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("a process's GET after the fleet's Close: %v, want redis.ErrClosed", err)
	}
	if _, err := f.OpenRegistry(); err == nil {
		t.Error("OpenRegistry after Close: no error")
	}
}

func TestStartFleetRefuses(t *testing.T) {
	_, err := redshardtest.StartFleet(&redshardtest.FleetOptions{Registry: &registry.Options{MemberTTL: -1}})
	if err == nil {
		t.Error("StartFleet with a bad registry option: no error")
	}
}

// TestHotKeysStalenessOnly: what the package documentation says of
// LocalCache on miniredis. The shard of a hot key refuses CLIENT TRACKING,
// so its cached replies are kept by MaxStaleness alone.
func TestHotKeysStalenessOnly(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	cl := redshardtest.NewCluster(t, &redshard.Options{HotKeys: &redshard.HotKeyOptions{
		Mitigation:   redshard.LocalCache,
		MaxStaleness: time.Hour,
		// A detector whose clock stands still: 20 reads make a key hot.
		Detector: &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: func() time.Time { return t0 }},
	}}, 1, 1)
	const key = "hot"
	if err := cl.Client.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_ = cl.Client.Type(ctx, key).Err()
	}
	if hk := cl.Client.HotKeys(); len(hk) == 0 || hk[0].Key != key || !hk[0].Hot {
		t.Fatalf("%s is not hot after 20 reads: %+v", key, hk)
	}
	if got, err := cl.Client.Get(ctx, key).Result(); err != nil || got != "v1" {
		t.Fatalf("GET %s = %q, %v", key, got, err)
	}
	owner, _ := cl.Client.ShardFor(key)
	found := false
	for _, s := range cl.Client.Stats().Hot.Shards {
		if s.Name == owner {
			found = true
			if s.Invalidation != redshard.InvalidationStalenessOnly {
				t.Errorf("shard %s: %v, want %v", s.Name, s.Invalidation, redshard.InvalidationStalenessOnly)
			}
		}
	}
	if !found {
		t.Fatalf("no hot-key state for shard %s: %+v", owner, cl.Client.Stats().Hot)
	}
	// Another writer's SET is not invalidated: the cached reply stays.
	if err := cl.Server(owner).Set(key, "v2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := cl.Client.Get(ctx, key).Result(); got != "v1" {
		t.Errorf("GET %s after a write behind the client's back = %q, want the cached %q (no invalidation on miniredis)", key, got, "v1")
	}
}
