package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	rsfleet "github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/ring"
)

func TestParseRegistryURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want registryURL
		err  string
	}{
		{in: "redis://127.0.0.1:6400/redshard:registry:web", want: registryURL{"redis", "127.0.0.1:6400", "redshard:registry:web"}},
		{in: "redis://reg.internal:6379/{redshard:registry:web}", want: registryURL{"redis", "reg.internal:6379", "{redshard:registry:web}"}},
		{in: "redis://[::1]:6379/redshard:a/b", want: registryURL{"redis", "[::1]:6379", "redshard:a/b"}},
		{in: "etcd://10.0.0.5:2379/redshard/registry/web", want: registryURL{"etcd", "10.0.0.5:2379", "/redshard/registry/web"}},
		{in: "etcd://10.0.0.5:2379/redshard/registry/web/", want: registryURL{"etcd", "10.0.0.5:2379", "/redshard/registry/web/"}},
		{in: "http://127.0.0.1:6379/x", err: "want redis://host:port/NAME"},
		{in: "127.0.0.1:6379", err: "want redis://host:port/NAME"},
		{in: "redis://127.0.0.1/redshard:r", err: "want host:port"},
		{in: "redis://127.0.0.1:0/redshard:r", err: "bad port"},
		{in: "redis://127.0.0.1:6379", err: "no registry NAME"},
		{in: "redis://127.0.0.1:6379/", err: "no registry NAME"},
		{in: "etcd://127.0.0.1:2379/", err: "no registry PREFIX"},
		{in: "redis://user:secret@127.0.0.1:6379/redshard:r", err: "credentials are not read from the URL"},
		{in: "redis://127.0.0.1:6379/redshard:r?db=2", err: "no query"},
	} {
		got, err := parseRegistryURL(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%q: %+v, want %+v", tc.in, got, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one with %q", tc.in, err, tc.err)
		}
		if err == nil {
			if again, err := parseRegistryURL(got.String()); err != nil || again != got {
				t.Errorf("%q: String %q parses as %+v, %v", tc.in, got.String(), again, err)
			}
		}
	}
}

func TestRegistryUsage(t *testing.T) {
	cfg := writeFile(t, "fleet.json", `{"shards": [{"name": "a", "addr": "127.0.0.1:1"}]}`)
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"status"}, "no registry"},
		{[]string{"status", "--registry", "redis://x:1"}, "no registry NAME"},
		{[]string{"apply", "--config", cfg}, "no registry"},
		{[]string{"apply", "--registry", "redis://x:1/redshard:r"}, "no --config"},
		{[]string{"apply", "--registry", "redis://x:1/redshard:r", "--config", cfg, "--batch", "0"}, "--batch 0"},
	} {
		code, _, errOut := runCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.err) {
			t.Errorf("redshard %q: exit %d, stderr %q; want exit %d with %q", tc.args, code, errOut, exitUsage, tc.err)
		}
	}
}

// testFleet is miniredis shards and a miniredis registry server.
type testFleet struct {
	*miniFleet
	url string        // --registry
	rdb *redis.Client // the registry's server
}

const testRegistryName = "redshard:registry:test"

func startTestFleet(t *testing.T, names ...string) *testFleet {
	t.Helper()
	f := &testFleet{miniFleet: startMiniFleet(t, names...)}
	m := miniredis.RunT(t)
	f.url = "redis://" + m.Addr() + "/" + testRegistryName
	f.rdb = redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = f.rdb.Close() })
	return f
}

// open returns a registry handle of its own on the fleet's registry.
func (f *testFleet) open(t *testing.T) registry.Registry {
	t.Helper()
	reg, err := registry.NewRedisOptions(f.rdb, testRegistryName,
		&registry.Options{PollInterval: 50 * time.Millisecond, MemberTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

// config writes a configuration file of the named shards.
func (f *testFleet) config(t *testing.T, names ...string) string {
	t.Helper()
	var shards []map[string]any
	for _, n := range names {
		shards = append(shards, map[string]any{"name": n, "addr": f.mini[n].Addr(), "weight": 1})
	}
	b, _ := json.Marshal(map[string]any{"shards": shards, "health": map[string]any{"disable": true}})
	return writeFile(t, "fleet-"+strings.Join(names, "")+".json", string(b))
}

// follower starts a process of the fleet: a client following the
// registry through a handle of its own.
func (f *testFleet) follower(t *testing.T, id string) *redshard.Client {
	t.Helper()
	c, err := redshard.NewClient(&redshard.Options{
		Registry: f.open(t),
		Fleet:    &redshard.FleetOptions{MemberID: id},
		Health:   &redshard.HealthOptions{Disable: true},
	})
	if err != nil {
		t.Fatalf("follower %s: %v", id, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (f *testFleet) apply(t *testing.T, names ...string) (stdout, stderr string) {
	t.Helper()
	code, out, errOut := runCmd(t, "apply", "--registry", f.url, "--config", f.config(t, names...), "--yes", "--driver", "op")
	if code != exitOK {
		t.Fatalf("apply %v: exit %d\nstdout:\n%s\nstderr:\n%s", names, code, out, errOut)
	}
	return out, errOut
}

func TestApplyFirstConfigThenChange(t *testing.T) {
	f := startTestFleet(t, "a", "b", "c")
	out, _ := f.apply(t, "a", "b")
	if !strings.Contains(out, "the registry is empty: apply publishes this config as the fleet's first (epoch 1)") ||
		!strings.Contains(out, "applied: none -> epoch 1 stable") {
		t.Errorf("first apply:\n%s", out)
	}
	reg := f.open(t)
	cfg, err := reg.Get(context.Background())
	if err != nil || cfg.Version() != (registry.Version{Epoch: 1, Phase: registry.Stable}) {
		t.Fatalf("after the first apply: %s, %v", cfg.Version(), err)
	}

	p1, p2 := f.follower(t, "web-1"), f.follower(t, "web-2")
	ctx := context.Background()
	const keys = 300
	for i := range keys {
		if err := p1.Set(ctx, fmt.Sprintf("user:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut := f.apply(t, "a", "b", "c")
	for _, want := range []string{
		"from the registry's epoch 1 stable to the next epoch, 2:",
		"applied: epoch 1 stable -> epoch 2 stable",
		"epoch 2 prepare", "epoch 2 migrate", "epoch 2 commit",
		"data migration (Rebalance, ", "verification: every key is on its owner",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply's stdout has no %q:\n%s", want, out)
		}
	}
	// The display: each phase, the processes on it, the data migration.
	for _, want := range []string{
		"epoch 2 prepare: 3 live", "; all acknowledged",
		"epoch 2 migrate: every process is on it; moving the keys (Rebalance):",
		"epoch 2 stable: 3 live, 3 on it; all acknowledged",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("apply's stderr has no %q:\n%s", want, errOut)
		}
	}
	if n := len(f.mini["c"].Keys()); n == 0 {
		t.Errorf("no key moved to the added shard")
	}
	for i := range keys {
		k := fmt.Sprintf("user:%d", i)
		if got, err := p2.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("GET %s through the other process after the change: %d, %v", k, got, err)
		}
	}

	out, _ = f.apply(t, "c", "b", "a") // the same ring, in another order
	if !strings.Contains(out, "nothing to do: the registry already holds this config (epoch 2 stable)") {
		t.Errorf("applying the same ring again:\n%s", out)
	}

	code, out, errOut := runCmd(t, "status", "--registry", f.url)
	if code != exitOK {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"config:   epoch 2, stable", "2 live processes, all on epoch 2 stable", "web-1", "web-2"} {
		if !strings.Contains(out, want) {
			t.Errorf("status has no %q:\n%s", want, out)
		}
	}
}

// TestApplyRestoresSameConfig: a registry that lost its data, given the
// config the fleet is on, is restored from the beacons and says so; it does
// not claim the registry "already holds" a config it has lost.
func TestApplyRestoresSameConfig(t *testing.T) {
	f := startTestFleet(t, "a", "b", "c")
	f.apply(t, "a", "b")
	f.follower(t, "web-1")
	f.apply(t, "a", "b", "c") // epoch 2: the driver writes the beacons
	if err := f.rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	out, _ := f.apply(t, "a", "b", "c")
	for _, want := range []string{
		"the registry lost the fleet's config: it holds none, but the servers' beacons and the live processes follow epoch 2 stable",
		"nothing to change: the fleet is on this config (epoch 2 stable); apply only restores it",
		"the fleet is on epoch 2 stable, restored; nothing else was published",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply after the registry lost its data has no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "already holds") {
		t.Errorf("apply after the registry lost its data says the registry holds the config:\n%s", out)
	}
	cfg, err := f.open(t).Get(context.Background())
	if err != nil || cfg.Version() != (registry.Version{Epoch: 2, Phase: registry.Stable}) {
		t.Errorf("the registry after the restore: %s, %v; want epoch 2 stable", cfg.Version(), err)
	}
}

func TestApplyAsks(t *testing.T) {
	f := startTestFleet(t, "a")
	cfg := f.config(t, "a")
	saved := confirmInput
	t.Cleanup(func() { confirmInput = saved })
	for _, answer := range []string{"", "n\n", "no\n", "later\n"} {
		confirmInput = strings.NewReader(answer)
		code, _, errOut := runCmd(t, "apply", "--registry", f.url, "--config", cfg)
		if code != exitFail || !strings.Contains(errOut, "Apply this change to the fleet? [y/N]") || !strings.Contains(errOut, "nothing done") {
			t.Errorf("answer %q: exit %d, stderr %q; want 1, nothing done", answer, code, errOut)
		}
	}
	if cur, err := f.open(t).Get(context.Background()); err != nil || cur.Epoch != 0 {
		t.Fatalf("refused applies published %s, %v", cur.Version(), err)
	}
	confirmInput = strings.NewReader("Y\n")
	if code, out, errOut := runCmd(t, "apply", "--registry", f.url, "--config", cfg); code != exitOK || !strings.Contains(out, "applied") {
		t.Errorf("answer y: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestApplyRefusedWhileAnotherRuns(t *testing.T) {
	f := startTestFleet(t, "a", "b")
	f.apply(t, "a")
	lock, err := f.open(t).Lock(context.Background(), "alice@ops-1/4242", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock(context.Background())
	code, out, errOut := runCmd(t, "apply", "--registry", f.url, "--config", f.config(t, "a", "b"), "--yes")
	if code != exitFail || !strings.Contains(errOut, "another apply is driving the fleet") || !strings.Contains(errOut, `held by "alice@ops-1/4242"`) {
		t.Errorf("apply while locked: exit %d, stderr:\n%s", code, errOut)
	}
	if out != "" {
		t.Errorf("apply while locked printed a plan:\n%s", out)
	}
	if cur, _ := f.open(t).Get(context.Background()); cur.Epoch != 1 {
		t.Errorf("a refused apply published %s", cur.Version())
	}
}

// TestApplyResumes interrupts an apply that waits for a late process, then
// runs it again: it resumes the change where it stopped.
func TestApplyResumes(t *testing.T) {
	f := startTestFleet(t, "a", "b")
	f.apply(t, "a")
	f.follower(t, "web-1")
	reg := f.open(t)
	ctx := context.Background()
	// A process that never acknowledges anything past epoch 1, with a
	// lease that outlives the test.
	slow, err := registry.NewRedisOptions(f.rdb, testRegistryName, &registry.Options{MemberTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	laggard := registry.Member{ID: "laggard", Host: "h", PID: 7, Epoch: 1, Phase: registry.Stable}
	if err := slow.Heartbeat(ctx, laggard); err != nil {
		t.Fatal(err)
	}
	watch, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	configs, err := reg.Watch(watch)
	if err != nil {
		t.Fatal(err)
	}
	applyCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	go func() {
		for c := range configs {
			if c.Phase == registry.Prepare {
				interrupt() // Ctrl-C while apply waits for the laggard
				return
			}
		}
	}()
	var out, errOut bytes.Buffer
	code := runContext(applyCtx, []string{"apply", "--registry", f.url, "--config", f.config(t, "a", "b"), "--yes"}, &out, &errOut)
	if code != exitFail || !strings.Contains(errOut.String(), "interrupted: the change stays at epoch 2 prepare") ||
		!strings.Contains(errOut.String(), "run the same command again to resume") {
		t.Fatalf("interrupted apply: exit %d, stderr:\n%s", code, errOut.String())
	}
	if cur, _ := reg.Get(ctx); cur.Version() != (registry.Version{Epoch: 2, Phase: registry.Prepare}) {
		t.Fatalf("after the interrupt the registry holds %s", cur.Version())
	}

	code, st, _ := runCmd(t, "status", "--registry", f.url)
	for _, want := range []string{"config:   epoch 2, prepare (a change is in flight", "change:   ", "from epoch 1", "added", "late"} {
		if code != exitOK || !strings.Contains(st, want) {
			t.Errorf("status during the change has no %q:\n%s", want, st)
		}
	}

	if err := slow.Leave(ctx, laggard); err != nil {
		t.Fatal(err)
	}
	stdout, _ := f.apply(t, "a", "b")
	if !strings.Contains(stdout, "resuming: the change to this config is in flight (epoch 2 prepare") ||
		!strings.Contains(stdout, "applied: epoch 2 prepare -> epoch 2 stable") {
		t.Errorf("resumed apply:\n%s", stdout)
	}

	// Another config while a change is in flight is refused: hold one in
	// prepare again, then apply something else.
	if err := slow.Heartbeat(ctx, registry.Member{ID: "laggard", Epoch: 2, Phase: registry.Stable}); err != nil {
		t.Fatal(err)
	}
	cur, _ := reg.Get(ctx)
	next := cur.Begin(json.RawMessage(`{"shards":[{"name":"a","addr":"`+f.mini["a"].Addr()+`"}]}`), "test-change", "someone")
	if err := reg.Publish(ctx, cur, next); err != nil {
		t.Fatal(err)
	}
	code, _, e := runCmd(t, "apply", "--registry", f.url, "--config", f.config(t, "b"), "--yes")
	if code != exitFail || !strings.Contains(e, "a change to another config is in flight: epoch 3, phase prepare, driven by someone") {
		t.Errorf("apply of another config during a change: exit %d, stderr:\n%s", code, e)
	}
}

func TestStatusOutput(t *testing.T) {
	since := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	now := since.Add(42 * time.Second)
	cfg := registry.Config{
		Epoch: 5, Phase: registry.Migrate,
		Doc:       json.RawMessage(`{"shards":[{"name":"cache-a","addr":"10.0.0.1:6379","weight":1},{"name":"cache-b","addr":"10.0.0.2:6379","weight":2},{"name":"cache-d","addr":"10.0.0.4:6379","weight":2}]}`),
		PrevEpoch: 4,
		PrevDoc:   json.RawMessage(`{"shards":[{"name":"cache-a","addr":"10.0.0.1:6379"},{"name":"cache-b","addr":"10.0.0.2:6379"},{"name":"cache-c","addr":"10.0.0.3:6379"}]}`),
		Change:    "5f0c2d81a9e3b7c4", Driver: "alice@ops-1/4242", Since: since,
	}
	members := []registry.Member{
		{ID: "alice@ops-1/4242/apply", Host: "ops-1", PID: 4242, Epoch: 5, Phase: registry.Migrate, Seen: now.Add(-300 * time.Millisecond)},
		{ID: "web-1", Host: "web-1", PID: 101, Epoch: 5, Phase: registry.Migrate, Seen: now.Add(-1200 * time.Millisecond)},
		{ID: "web-2", Host: "web-2", PID: 102, Epoch: 5, Phase: registry.Prepare, Fenced: true, Seen: now.Add(-14 * time.Second)},
	}
	u, _ := parseRegistryURL("redis://10.0.0.9:6379/redshard:registry:web")
	var b bytes.Buffer
	if err := writeStatus(&b, u, cfg, members, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-migrate.golden", b.String())

	b.Reset()
	stable, _ := registry.Config{Epoch: 5, Phase: registry.Commit, Doc: cfg.Doc, PrevDoc: cfg.PrevDoc, Change: "x"}.Advance()
	stable.Since = since
	if err := writeStatus(&b, u, stable, nil, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-stable.golden", b.String())

	b.Reset()
	if err := writeStatus(&b, u, registry.Config{}, nil, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "none published yet") {
		t.Errorf("status of an empty registry:\n%s", b.String())
	}

	// A registry that lost its data while the fleet was in a change: the
	// summary must not say "all on none" over rows on epoch 5 migrate.
	b.Reset()
	if err := writeStatus(&b, u, registry.Config{}, members, now); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "all on") || !strings.Contains(out, "3 live processes, 3 AHEAD OF THE REGISTRY") ||
		strings.Count(out, "AHEAD") != 4 {
		t.Errorf("status of a registry behind its fleet:\n%s", out)
	}
}

func TestPhaseDisplay(t *testing.T) {
	v1 := registry.Config{Epoch: 1, Phase: registry.Stable}
	v2 := registry.Config{Epoch: 2, Phase: registry.Prepare}
	on := func(id string, c registry.Config) registry.Member {
		return registry.Member{ID: id, Epoch: c.Epoch, Phase: c.Phase}
	}
	members := []registry.Member{on("web-1", v2), on("web-2", v1), on("web-3", v1), {ID: "new"}}
	p := rsfleet.ApplyProgress{Config: v2, Members: members, Late: []registry.Member{members[3], members[2], members[1]}, Waited: 1500 * time.Millisecond}
	if got, want := phaseState(p), "epoch 2 prepare: 4 live, 1 on it, 2 on epoch 1 stable, 1 joining; late: new, web-2, web-3"; got != want {
		t.Errorf("phaseState:\n got %q\nwant %q", got, want)
	}

	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	var live bytes.Buffer
	d := &phaseDisplay{w: &live, live: true, now: clock}
	d.progress(p)
	now = now.Add(10 * time.Millisecond)
	d.progress(p) // the same state, too soon: not redrawn
	now = now.Add(liveEvery)
	p.Members, p.Late = []registry.Member{on("web-1", v2)}, nil
	d.progress(p)
	d.end(true)
	frames := strings.Split(live.String(), "\r")
	if len(frames) != 3 || !strings.HasSuffix(live.String(), "\n") {
		t.Fatalf("live display: %q, want two frames and a newline", live.String())
	}
	if first, second := frames[1], strings.TrimSuffix(frames[2], "\n"); len(second) != len(first) || !strings.Contains(second, "all acknowledged") {
		t.Errorf("the second frame %q does not cover the first %q", second, first)
	}

	var log bytes.Buffer
	d = &phaseDisplay{w: &log, now: clock}
	d.progress(p)
	d.progress(p) // nothing changed: no line
	now = now.Add(logEvery)
	d.progress(p) // still waiting after logEvery: a line
	d.progress(rsfleet.ApplyProgress{Config: v2, Rebalancing: true})
	d.end(true)
	if n := strings.Count(log.String(), "\n"); n != 3 || strings.Contains(log.String(), "\r") {
		t.Errorf("log display: %q, want 3 lines", log.String())
	}

	var nilDisplay *phaseDisplay
	nilDisplay.progress(p)
	nilDisplay.rebalance(redshard.RebalanceProgress{})
	nilDisplay.end(false)
}

// TestRegistryURLRedacted: a registry URL with a password in it was
// refused with an error that quoted the URL, password included. Every
// error a --registry value can cause shows it redacted, in
// parseRegistryURL and on the command line.
func TestRegistryURLRedacted(t *testing.T) {
	const secret = "s3cr3t-PW"
	for _, in := range []string{
		"redis://:" + secret + "@127.0.0.1:6379/redshard:r",           // credentials refused
		"redis://admin:" + secret + "@127.0.0.1:6379/redshard:r",      // user and password
		"etcd://root:" + secret + "@127.0.0.1:2379/redshard/registry", // etcd too
		"redis://" + secret + "@127.0.0.1:6379/redshard:r",            // a password spelled as the user
		"rediss://:" + secret + "@127.0.0.1:6379/redshard:r",          // unknown scheme
		"redis:/:" + secret + "@127.0.0.1:6379/redshard:r",            // no "://"
		"redis://:" + secret + "@[::1/redshard:r",                     // unparsable host
		"redis://:" + secret + "@127.0.0.1:99999/redshard:r",          // unparsable port
		"redis://:" + secret + "@127.0.0.1/redshard:r",                // no port
		"redis://:" + secret + "@127.0.0.1:6379",                      // no name
		"redis://127.0.0.1:6379/redshard:r?password=" + secret,        // a query
		"redis://127.0.0.1:6379/redshard:r#" + secret,                 // a fragment
		"redis://:" + secret + "@127.0.0.1:6379/redshard:r?db=0%zz",   // unparsable query
		"redis://u:" + secret + "@127.0.0.1:6379/x\x7f",               // control character
		"etcd://:" + secret + "@127.0.0.1:2379/",                      // no prefix
		"redis://:" + secret + "@:6379/redshard:r",                    // no host
	} {
		_, err := parseRegistryURL(in)
		if err == nil {
			t.Errorf("%q parsed", in)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("parseRegistryURL(%q): %v: shows the password", in, err)
		}
		for _, args := range [][]string{{"status"}, {"apply", "--config", "unused.json"}} {
			_, out, errOut := runCmd(t, append(args, "--registry", in)...)
			if strings.Contains(out+errOut, secret) {
				t.Errorf("redshard %s --registry %q printed the password:\n%s%s", args[0], in, out, errOut)
			}
		}
	}
	if got := redactURL("redis://admin:" + secret + "@h:1/n?a=" + secret); got != "redis://xxxxx@h:1/n?a=xxxxx" {
		t.Errorf("redactURL = %q", got)
	}
}

// silentListener accepts connections and never answers on them (a server
// whose process hangs, or packets dropped past the handshake).
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestRegistryUnreachable: status and apply against an etcd registry that
// could not be reached waited silently for minutes. Against a registry
// that refuses connections or never answers, Redis or etcd, both fail
// within --registry-timeout with an error naming the registry.
func TestRegistryUnreachable(t *testing.T) {
	cfg := writeFile(t, "fleet.json", `{"shards": [{"name": "a", "addr": "127.0.0.1:1"}]}`)
	for _, tc := range []struct{ name, url string }{
		{"redis, closed port", "redis://" + closedAddr(t) + "/redshard:registry:t"},
		{"redis, silent", "redis://" + silentListener(t) + "/redshard:registry:t"},
		{"etcd, closed port", "etcd://" + closedAddr(t) + "/redshard/registry/t"},
		{"etcd, silent", "etcd://" + silentListener(t) + "/redshard/registry/t"},
	} {
		for _, args := range [][]string{{"status"}, {"apply", "--config", cfg, "--yes", "--no-progress"}} {
			t.Run(tc.name+"/"+args[0], func(t *testing.T) {
				type result struct {
					code        int
					out, errOut string
				}
				done := make(chan result, 1)
				go func() {
					var out, errOut bytes.Buffer
					code := run(append(args, "--registry", tc.url, "--registry-timeout", "300ms"), &out, &errOut)
					done <- result{code, out.String(), errOut.String()}
				}()
				select {
				case r := <-done:
					if r.code != exitFail || !strings.Contains(r.errOut, tc.url) {
						t.Errorf("exit %d, stderr %q; want %d and an error naming %s", r.code, r.errOut, exitFail, tc.url)
					}
					if strings.HasPrefix(tc.name, "etcd") || strings.HasSuffix(tc.name, "silent") {
						if !strings.Contains(r.errOut, "did not answer within 300ms (--registry-timeout)") {
							t.Errorf("stderr %q: want the registry named as not answering within --registry-timeout", r.errOut)
						}
					}
					t.Logf("stderr: %s", strings.TrimSpace(r.errOut))
				case <-time.After(20 * time.Second):
					t.Fatalf("redshard %s against %s: still running after 20s with --registry-timeout 300ms", args[0], tc.url)
				}
			})
		}
	}
}

// TestApplyRecipeChange moves a fleet to Recipe2 with apply: the plan
// says a new placement, the followers place keys by Recipe2 and keep
// every key, status names the recipe; a recipe change together with a
// new shard is refused before anything is published.
func TestApplyRecipeChange(t *testing.T) {
	f := startTestFleet(t, "a", "b", "c")
	f.apply(t, "a", "b")
	p1, p2 := f.follower(t, "web-1"), f.follower(t, "web-2")
	ctx := context.Background()
	const keys = 200
	for i := range keys {
		if err := p1.Set(ctx, fmt.Sprintf("user:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	recipeConfig := func(names ...string) string {
		var m map[string]any
		b, err := os.ReadFile(f.config(t, names...))
		if err != nil || json.Unmarshal(b, &m) != nil {
			t.Fatal(err)
		}
		m["ring_recipe"] = 2
		b, _ = json.Marshal(m)
		return writeFile(t, "recipe2-"+strings.Join(names, "")+".json", string(b))
	}
	code, out, errOut := runCmd(t, "apply", "--registry", f.url, "--config", recipeConfig("a", "b", "c"), "--yes")
	if code != exitFail || !strings.Contains(errOut, "the placement changes") {
		t.Errorf("recipe and shards at once: exit %d, stderr %q; want it refused", code, errOut)
	}
	if cfg, err := f.open(t).Get(ctx); err != nil || cfg.Epoch != 1 {
		t.Fatalf("after the refused apply: %s, %v", cfg.Version(), err)
	}
	code, out, errOut = runCmd(t, "apply", "--registry", f.url, "--config", recipeConfig("a", "b"), "--yes", "--driver", "op")
	if code != exitOK {
		t.Fatalf("apply Recipe2: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if want := "placement Recipe2: a new placement, which moves most keys"; !strings.Contains(out, want) {
		t.Errorf("apply's plan has no %q:\n%s", want, out)
	}
	r, err := ring.New([]ring.Node{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}, &ring.Config{Recipe: ring.Recipe2})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*redshard.Client{p1, p2} {
		if p.Ring().Recipe() != ring.Recipe2 {
			t.Errorf("a follower's ring has recipe %d", p.Ring().Recipe())
		}
	}
	for i := range keys {
		k := fmt.Sprintf("user:%d", i)
		if got, err := p2.Get(ctx, k).Int(); err != nil || got != i {
			t.Errorf("GET %s after the recipe change: %d, %v", k, got, err)
		}
		if !f.mini[r.Lookup(k)].Exists(k) {
			t.Errorf("%s is not on %s, its Recipe2 owner", k, r.Lookup(k))
		}
	}
	code, out, errOut = runCmd(t, "status", "--registry", f.url)
	if want := "ring:     2 shards, 1024 (the default) points per unit of weight, placement Recipe2"; code != exitOK || !strings.Contains(out, want) {
		t.Errorf("status: exit %d, stderr %q, output:\n%s\nwant %q", code, errOut, out, want)
	}
}
