// Package fleet_test runs a fleet: OS processes (fleetproc work), each with
// its own redshard client following a registry, writing, reading and
// deleting one key space on real redis-servers while the test drives
// membership changes through the registry (fleetproc apply): an add, a
// re-weight, a removal, a rollback. Processes pick up each phase after a
// random delay; one is cut off from the registry for longer than its
// lease (it must fence itself); one is killed and restarted mid-change. At
// the end the merged ledgers of acknowledged operations, and a final read
// of every key, must be linearizable per key (porcupine), which is: no
// acknowledged write lost, no deleted key back, no read going backwards.
// It runs with a Redis registry and with an etcd one (an embedded etcd
// server, in a fleetproc child).
//
// It is a module of its own because it needs etcd's client and server,
// which the library's module does not require.
package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redshard/redshard"
	rsfleet "github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/internal/modelcheck"
	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/internal/syncbuf"
	"github.com/redshard/redshard/registry"
)

// TestMain checks for leaked goroutines and removes the fleet process's
// build directory (fleetproc), which outlives any one test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
		os.Exit(code)
	}))
}

const keySpace = 64

// needRedis skips (fails in CI) when redis-server is missing.
func needRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed (CI=true: failing instead of skipping)")
		}
		t.Skip("redis-server is not installed; skipping the fleet test")
	}
}

var (
	buildOnce sync.Once
	binDir    string // removed by TestMain
	binPath   string
	buildErr  error
)

// fleetproc builds the fleet's process once per test binary.
func fleetproc(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fleetproc")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "fleetproc")
		out, err := exec.Command("go", "build", "-o", binPath, "./fleetproc").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./fleetproc: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is one running fleetproc.
type proc struct {
	id, ledger     string
	cmd            *exec.Cmd
	stdout, stderr syncbuf.Buffer // written by exec's copying goroutines while the test reads them
	done           chan struct{}
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// stop ends a worker and returns its totals.
func (p *proc) stop(t *testing.T) map[string]any {
	t.Helper()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.signal(syscall.SIGQUIT) // its goroutines, on its stderr
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.kill()
		}
		t.Fatalf("worker %s did not stop; stderr:\n%s", p.id, p.stderr.String())
	}
	var tot map[string]any
	if err := json.Unmarshal(p.stdout.Bytes(), &tot); err != nil {
		t.Fatalf("worker %s: %v; exit %v; stdout %q; stderr:\n%s", p.id, err, p.cmd.ProcessState, p.stdout.String(), p.stderr.String())
	}
	return tot
}

// hold makes a worker hold its writes in a shard hook (on) or let them go,
// and waits until the worker says it did. Waiting matters: two SIGWINCHs
// pending at once are one, so a release sent before the hold was taken
// (the process frozen in between) would leave the writes held for good.
func (p *proc) hold(t *testing.T, on bool) {
	t.Helper()
	const said = "holding writes: "
	before := strings.Count(p.stderr.String(), said)
	p.signal(syscall.SIGWINCH)
	want := fmt.Sprint(said, on)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		out := p.stderr.String()
		if strings.Count(out, said) > before {
			got, _, _ := strings.Cut(out[strings.LastIndex(out, said):], "\n")
			if got != want {
				t.Fatalf("worker %s: said %q, want %q; stderr:\n%s", p.id, got, want, out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s did not say %q in 30s; stderr:\n%s", p.id, want, out)
		}
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// fleet is one run: the servers, the registry URL, the workers.
type fleet struct {
	t       *testing.T
	bin     string
	url     string
	dir     string
	servers []*redistest.Server
	workers []*proc
	gone    []*proc // killed or stopped
	reports []string
	seed    uint64
	keys    int // the key space; 0: keySpace
	recipe  int // the ring's placement recipe in the docs and clients made from now on; 0: Recipe1
}

func (f *fleet) keySpace() int {
	if f.keys > 0 {
		return f.keys
	}
	return keySpace
}

// doc is a config of the given servers (index → weight), on f.recipe.
func (f *fleet) doc(weights map[int]float64) string {
	type shard struct {
		Name   string  `json:"name"`
		Addr   string  `json:"addr"`
		Weight float64 `json:"weight"`
	}
	var shards []shard
	for i, s := range f.servers {
		if w, ok := weights[i]; ok {
			shards = append(shards, shard{fmt.Sprintf("s%d", i), s.Addr(), w})
		}
	}
	m := map[string]any{"shards": shards}
	if f.recipe != 0 {
		m["ring_recipe"] = f.recipe
	}
	b, _ := json.Marshal(m)
	path := filepath.Join(f.dir, fmt.Sprintf("doc-%d.json", len(f.reports)+rand.IntN(1<<30)))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// apply drives a change and logs its propagation.
// report is fleetproc's Report.
type report struct {
	From, To registry.Version
	Phases   []rsfleet.PhaseReport
	Moved    int64
}

func (f *fleet) apply(what, doc string) report {
	f.t.Helper()
	// Bounded, so that a driver that hangs fails the test with its
	// goroutines (SIGQUIT) rather than hang it until -timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, "apply", "--registry", f.url, "--doc", doc)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			f.t.Fatalf("apply %s: %v\n%s", what, err, ee.Stderr)
		}
		f.t.Fatalf("apply %s: %v", what, err)
	}
	var rep report
	if err := json.Unmarshal(out, &rep); err != nil {
		f.t.Fatalf("apply %s: %v: %s", what, err, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s → %s, moved %d keys:", what, rep.To, rep.Moved)
	for _, p := range rep.Phases {
		fmt.Fprintf(&b, " %s %v (%d members);", p.Version.Phase, p.Acked.Round(time.Millisecond), p.Members)
	}
	f.reports = append(f.reports, b.String())
	f.t.Log(b.String())
	return rep
}

func (f *fleet) worker(id string, extra ...string) *proc {
	led := filepath.Join(f.dir, id+".ledger")
	args := append([]string{"work", "--registry", f.url, "--id", id, "--ledger", led,
		"--seed", fmt.Sprint(f.seed + uint64(len(f.workers)+len(f.gone))), "--keys", fmt.Sprint(f.keySpace())}, extra...)
	p := start(f.t, f.bin, args...)
	p.id, p.ledger = id, led
	f.workers = append(f.workers, p)
	return p
}

func (f *fleet) remove(p *proc) {
	f.workers = slices.DeleteFunc(f.workers, func(q *proc) bool { return q == p })
	f.gone = append(f.gone, p)
}

func newFleet(t *testing.T, url string) *fleet {
	f := &fleet{t: t, bin: fleetproc(t), url: url, dir: t.TempDir(), seed: uint64(time.Now().UnixNano())}
	t.Logf("seed %d", f.seed)
	for range 4 {
		f.servers = append(f.servers, redistest.Start(t))
	}
	return f
}

func TestFleetRedisRegistry(t *testing.T) {
	needRedis(t)
	reg := redistest.Start(t)
	runFleet(t, newFleet(t, "redis://"+reg.Addr()+"/redshard:registry:fleet"))
}

func TestFleetEtcdRegistry(t *testing.T) {
	needRedis(t)
	f := newFleet(t, "")
	f.url = "etcd://" + startEtcd(t, f.bin) + "/redshard/fleet"
	runFleet(t, f)
}

// TestFleetPropagation measures the time from publishing a phase to the
// last of 4 processes acknowledging it, with announcements and with
// polling only (a watcher whose announcements are all lost), on a Redis
// registry. Prepare includes the beacon wait (2 × 250ms from the beacon's
// write, which precedes the publish).
func TestFleetPropagation(t *testing.T) {
	needRedis(t)
	for _, mode := range []string{"announced", "polling only"} {
		t.Run(mode, func(t *testing.T) {
			reg := redistest.Start(t)
			f := newFleet(t, "redis://"+reg.Addr()+"/redshard:registry:propagation")
			f.apply("seed", f.doc(map[int]float64{0: 1, 1: 1}))
			extra := []string{"--max-delay", "0"}
			if mode == "polling only" {
				extra = append(extra, "--poll-only")
			}
			for i := range 4 {
				f.worker(fmt.Sprintf("p%d", i), extra...)
			}
			time.Sleep(500 * time.Millisecond)
			var prepare, others []time.Duration
			rounds := 6
			if mode == "polling only" {
				rounds = 3
			}
			for round := range rounds {
				weights := map[int]float64{0: 1, 1: 1}
				if round%2 == 0 {
					weights[2] = 1
				}
				rep := f.apply(fmt.Sprintf("round %d", round), f.doc(weights))
				for _, p := range rep.Phases {
					if p.Version.Phase == registry.Prepare {
						prepare = append(prepare, p.Acked)
					} else {
						others = append(others, p.Acked)
					}
				}
			}
			for _, p := range slices.Clone(f.workers) {
				p.stop(t)
				f.remove(p)
			}
			t.Logf("%s: prepare p50 %v max %v; migrate/commit/stable p50 %v p99 %v (%d phases)", mode,
				quantile(prepare, 0.5), quantile(prepare, 1), quantile(others, 0.5), quantile(others, 0.99), len(others))
		})
	}
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))].Round(time.Millisecond)
}

// runFleet is the scenario of the package comment.
func runFleet(t *testing.T, f *fleet) {
	three := map[int]float64{0: 1, 1: 1, 2: 1}
	f.apply("seed", f.doc(three))
	// Keys nobody touches move only by Rebalance.
	cold := f.client(three)
	ctx := context.Background()
	for i := range coldKeys {
		if err := cold.Set(ctx, fmt.Sprintf("cold:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = cold.Close()
	for i := range 4 {
		f.worker(fmt.Sprintf("p%d", i))
	}
	time.Sleep(500 * time.Millisecond)
	f.apply("add", f.doc(map[int]float64{0: 1, 1: 1, 2: 1, 3: 1}))

	// p1 is cut off for longer than its lease while s0's weight doubles:
	// the change goes on without it once its lease is over, and it must
	// refuse the keys the change moves.
	cut := f.workers[1]
	cut.signal(syscall.SIGUSR1)
	reweighted := map[int]float64{0: 2, 1: 1, 2: 1, 3: 1}
	f.apply("re-weight", f.doc(reweighted))

	// p2 is killed mid-change and started again under a new id.
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		f.apply("remove", f.doc(map[int]float64{0: 2, 2: 1, 3: 1}))
	}()
	time.Sleep(time.Duration(100+rand.IntN(500)) * time.Millisecond)
	victim := f.workers[2]
	victim.kill()
	f.remove(victim)
	f.worker("p2-restarted")
	<-applied

	cut.signal(syscall.SIGUSR2)
	time.Sleep(3 * time.Second) // it catches up
	f.apply("rollback", f.doc(reweighted))
	time.Sleep(300 * time.Millisecond)

	totals := map[string]map[string]any{}
	for _, p := range slices.Clone(f.workers) {
		totals[p.id] = p.stop(t)
		f.remove(p)
	}
	for id, tot := range totals {
		t.Logf("%s: %v", id, tot)
	}
	if tot := totals[cut.id]; tot["FencedSeen"] != true || tot["Fenced"].(float64) == 0 {
		t.Errorf("the cut-off process did not fence itself, or refused nothing: %v", tot)
	}
	final := f.finalReads(reweighted)
	ops := f.history(final)
	check(t, ops)

	c := f.client(reweighted)
	defer c.Close()
	lost := 0
	for i := range coldKeys {
		if n, err := c.Get(ctx, fmt.Sprintf("cold:%d", i)).Int(); err != nil || n != i {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d keys moved by Rebalance alone were lost", lost, coldKeys)
	}
}

const coldKeys = 2000

// client is a plain redshard client on the given servers (a final ring:
// nothing in flight).
func (f *fleet) client(weights map[int]float64) *redshard.Client {
	var shards []redshard.Shard
	for i, s := range f.servers {
		if w, ok := weights[i]; ok {
			shards = append(shards, redshard.Shard{Name: fmt.Sprintf("s%d", i), Addr: s.Addr(), Weight: w})
		}
	}
	c, err := redshard.NewClient(&redshard.Options{Shards: shards, RingRecipe: f.recipe, Health: &redshard.HealthOptions{Disable: true}})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// finalReads reads every key from its owner on the final ring, once every
// worker has stopped.
func (f *fleet) finalReads(weights map[int]float64) []porcupine.Operation {
	c := f.client(weights)
	defer c.Close()
	var ops []porcupine.Operation
	for k := range f.keySpace() {
		key := fmt.Sprintf("k%03d", k)
		call := time.Now().UnixNano()
		v, err := c.Get(context.Background(), key).Result()
		out := modelcheck.Output{Val: v}
		switch {
		case errors.Is(err, redis.Nil):
			out.Nil = true
		case err != nil:
			f.t.Fatalf("final read of %s: %v", key, err)
		}
		ops = append(ops, porcupine.Operation{ClientId: 1000,
			Input: modelcheck.Input{Kind: modelcheck.Get, Key: key, Via: "final read", Op: -1},
			Call:  call, Output: out, Return: time.Now().UnixNano()})
	}
	return ops
}

// entry is a ledger line (fleetproc's Entry).
type entry struct {
	Proc    string `json:"p"`
	Seq     int64  `json:"s"`
	Begin   bool   `json:"b"`
	Op      string `json:"op"`
	Key     string `json:"k"`
	Arg     string `json:"a"`
	Call    int64  `json:"c"`
	Return  int64  `json:"r"`
	Nil     bool   `json:"nil"`
	Val     string `json:"v"`
	N       int64  `json:"n"`
	Err     string `json:"e"`
	Refused bool   `json:"x"`
}

// history merges every ledger into porcupine operations. A write that
// began but never returned (its process was killed) may or may not have
// happened: it is Unknown with an open-ended return. Refused commands
// were never sent; failed reads say nothing.
func (f *fleet) history(final []porcupine.Operation) []porcupine.Operation {
	var ops []porcupine.Operation
	for ci, p := range f.gone {
		begun := map[int64]entry{}
		ended := map[int64]entry{}
		for _, e := range f.ledger(p) {
			if e.Begin {
				begun[e.Seq] = e
			} else {
				ended[e.Seq] = e
			}
		}
		add := func(e entry, ret int64, out modelcheck.Output) {
			kind := map[string]modelcheck.Kind{"get": modelcheck.Get, "set": modelcheck.Set, "del": modelcheck.Del}[e.Op]
			ops = append(ops, porcupine.Operation{ClientId: ci,
				Input: modelcheck.Input{Kind: kind, Key: e.Key, Arg: e.Arg, Via: p.id},
				Call:  e.Call, Output: out, Return: ret})
		}
		for seq, b := range begun {
			if _, ok := ended[seq]; !ok {
				add(b, math.MaxInt64, modelcheck.Output{Unknown: true, Err: "process killed"})
			}
		}
		for _, e := range ended {
			switch {
			case e.Refused:
			case e.Err != "" && e.Op == "get":
			case e.Err != "":
				add(e, math.MaxInt64, modelcheck.Output{Unknown: true, Err: e.Err})
			default:
				add(e, e.Return, modelcheck.Output{Nil: e.Nil, Val: e.Val, N: e.N})
			}
		}
	}
	return append(ops, final...)
}

// quickKeyCheck and longKeyCheck bound porcupine on one key's history in
// check's first and second passes.
const (
	quickKeyCheck = 2 * time.Second
	longKeyCheck  = 30 * time.Second
)

// check runs porcupine on the history and, on failure, shows the keys
// that fail.
func check(t *testing.T, ops []porcupine.Operation) {
	t.Helper()
	byKey := map[string][]porcupine.Operation{}
	unknown := 0
	for _, op := range ops {
		k := op.Input.(modelcheck.Input).Key
		byKey[k] = append(byKey[k], op)
		if op.Output.(modelcheck.Output).Unknown {
			unknown++
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	results := make([]porcupine.CheckResult, len(keys))
	// The whole check is bounded too: keys left when the time is up are
	// not checked, and the test fails saying so. Every key is first
	// checked with a short bound, and only the keys it leaves undecided
	// get the long one, with the time left: a few histories porcupine
	// cannot decide (a seed with many writes of unknown outcome) no longer
	// use up the time of the keys after them.
	end := time.Now().Add(10 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-time.Minute).Before(end) {
		end = d.Add(-time.Minute)
	}
	skipped := make([]bool, len(keys))
	began := time.Now()
	pass := func(first bool, bound time.Duration, todo func(i int) bool) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 2 { // the keys are independent: one checker per core
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					left := time.Until(end)
					if left <= 0 {
						// Not checked at all in the first pass; left
						// undecided by it in the second.
						skipped[i] = first
						continue
					}
					results[i] = porcupine.CheckOperationsTimeout(modelcheck.Model, byKey[keys[i]], min(bound, left))
				}
			}()
		}
		for i := range keys {
			if todo(i) {
				next <- i
			}
		}
		close(next)
		wg.Wait()
	}
	pass(true, quickKeyCheck, func(int) bool { return true })
	pass(false, longKeyCheck, func(i int) bool { return !skipped[i] && results[i] == porcupine.Unknown })
	bad, unchecked, late := 0, 0, 0
	for i, k := range keys {
		if skipped[i] {
			late++
			continue
		}
		switch results[i] {
		case porcupine.Ok:
		case porcupine.Illegal:
			bad++
			t.Errorf("key %s: history is not linearizable (%d operations)", k, len(byKey[k]))
		default:
			unchecked++
			t.Logf("key %s: porcupine timed out on %d operations", k, len(byKey[k]))
		}
	}
	t.Logf("checked %d operations (%d of unknown outcome) on %d keys in %v: %d keys not linearizable, %d not decided (within %v, or the time left)",
		len(ops), unknown, len(keys), time.Since(began).Round(time.Millisecond), bad, unchecked, longKeyCheck)
	if late > 0 {
		t.Errorf("%d of %d keys were not checked: the time for the check ran out", late, len(keys))
	}
}

// startEtcd runs an etcd server (fleetproc etcd) and returns its client
// address.
func startEtcd(t *testing.T, bin string) string {
	t.Helper()
	return launchEtcd(t, bin, freeAddr(t), freeAddr(t)).client
}

// etcdServer is one run of fleetproc etcd.
type etcdServer struct {
	bin, client, peer string
	cmd               *exec.Cmd
	stdin             io.Closer
	done              chan struct{}
}

// launchEtcd runs an etcd server with an empty data directory on the given
// addresses, and stops it in t.Cleanup.
func launchEtcd(t *testing.T, bin, client, peer string) *etcdServer {
	t.Helper()
	e := &etcdServer{bin: bin, client: client, peer: peer, done: make(chan struct{})}
	e.cmd = exec.Command(bin, "etcd", t.TempDir(), client, peer)
	stdin, err := e.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	e.stdin = stdin
	stdout, err := e.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncbuf.Buffer
	e.cmd.Stderr = &stderr
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stop)
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if sc.Text() == "etcd ready" && !ok {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = e.cmd.Wait()
		close(e.done)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("etcd did not start: %s", stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("etcd did not start in 60s: %s", stderr.String())
	}
	return e
}

// stop ends the server (idempotent).
func (e *etcdServer) stop() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	_ = e.stdin.Close()
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
}

// restartEmpty kills the server and starts a new one with no data on the
// same addresses: an etcd restored from nothing.
func (e *etcdServer) restartEmpty(t *testing.T) *etcdServer {
	t.Helper()
	_ = e.cmd.Process.Kill()
	<-e.done
	return launchEtcd(t, e.bin, e.client, e.peer)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestFleetPausedPastLease freezes a process (SIGSTOP) for longer than
// its lease while a change that moves every key it writes completes, some
// of its writes held in a shard hook (after redshard checked them, before
// they are sent) as it freezes. Once it resumes, no write of its may land
// on a key's previous owner: not those held across the pause, not those
// it starts after it (its ledger tells them apart by start time). The
// merged histories must be linearizable and no moved key may be left on
// its previous owner.
func TestFleetPausedPastLease(t *testing.T) {
	needRedis(t)
	t.Run("redis", func(t *testing.T) {
		reg := redistest.Start(t)
		pausedPastLease(t, newFleet(t, "redis://"+reg.Addr()+"/redshard:registry:paused"))
	})
	t.Run("etcd", func(t *testing.T) {
		f := newFleet(t, "")
		f.url = "etcd://" + startEtcd(t, f.bin) + "/redshard/paused"
		pausedPastLease(t, f)
	})
}

func pausedPastLease(t *testing.T, f *fleet) {
	before := map[int]float64{0: 1, 1: 1, 2: 1}
	after := map[int]float64{0: 1, 1: 1, 2: 1, 3: 1}
	f.apply("seed", f.doc(before))
	moving, from := f.moving(before, after)
	if len(moving) == 0 {
		t.Fatal("the change moves no key")
	}
	f.worker("p0")
	f.worker("p1")
	victim := f.worker("paused", "--only-keys", strings.Join(moving, ","), "--max-delay", "0")
	time.Sleep(700 * time.Millisecond)

	victim.hold(t, true) // hold its writes in flight
	time.Sleep(100 * time.Millisecond)
	victim.signal(syscall.SIGSTOP)
	f.apply("add", f.doc(after)) // goes on without it once its lease is over
	resumed := time.Now().UnixNano()
	victim.signal(syscall.SIGCONT)
	victim.hold(t, false) // the held writes go
	time.Sleep(2 * time.Second)

	for _, p := range slices.Clone(f.workers) {
		t.Logf("%s: %v", p.id, p.stop(t))
		f.remove(p)
	}
	ops := f.history(f.finalReads(after))
	var acked, refused, failed int
	for _, e := range f.ledger(victim) {
		if e.Begin || e.Op == "get" || e.Call < resumed {
			continue
		}
		switch {
		case e.Refused:
			refused++
		case e.Err != "":
			failed++
		default:
			acked++
		}
	}
	t.Logf("writes started after the resume: %d acknowledged, %d refused, %d failed", acked, refused, failed)
	misplaced := 0
	for i, key := range moving {
		rdb := redis.NewClient(&redis.Options{Addr: f.servers[from[i]].Addr()})
		v, err := rdb.Get(context.Background(), key).Result()
		_ = rdb.Close()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		if err == nil {
			misplaced++
			t.Errorf("key %s is still on its previous owner s%d, with %q", key, from[i], v)
		}
	}
	t.Logf("%d moving keys, %d misplaced", len(moving), misplaced)
	check(t, ops)
}

// moving returns the keys of the key space whose owner differs between
// the two rings, with their owner (a server index) on the first.
func (f *fleet) moving(a, b map[int]float64) (keys []string, from []int) {
	ca, cb := f.client(a), f.client(b)
	defer ca.Close()
	defer cb.Close()
	for k := range keySpace {
		key := fmt.Sprintf("k%03d", k)
		na, _ := ca.ShardFor(key)
		nb, _ := cb.ShardFor(key)
		if na != nb {
			var i int
			fmt.Sscanf(na, "s%d", &i)
			keys, from = append(keys, key), append(from, i)
		}
	}
	return keys, from
}

// ledger reads p's ledger.
func (f *fleet) ledger(p *proc) []entry {
	data, err := os.ReadFile(p.ledger)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e entry
		if json.Unmarshal(sc.Bytes(), &e) == nil { // else a line cut by a kill
			out = append(out, e)
		}
	}
	return out
}
