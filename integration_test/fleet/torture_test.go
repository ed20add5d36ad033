package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/blackhole"
	"github.com/redshard/redshard/internal/redistest"
)

// TestFleetTorture runs a fleet of 3 processes, each with a per-key
// ledger, under load on real redis-servers while a driver applies one
// change after another, and injects a fault at a seeded random moment of
// each change:
//
//   - pause: a process SIGSTOPped past its lease, half the time with its
//     writes held in a shard hook (checked, not yet sent) as it freezes;
//   - blackhole: a process's registry traffic dropped by a TCP proxy for
//     longer than its lease (its registry client has go-redis defaults);
//   - forget: the registry flushed (Redis) or restarted empty (etcd);
//   - driver-kill: the driver SIGKILLed mid-phase, then run again;
//   - two-drivers: a second driver started at once with the same change;
//   - shard-kill: a data server killed and restarted on its own data;
//   - restore-old: the registry restored from a snapshot taken after an
//     earlier change, while a process starts on it and another stops
//     (torture_restore_test.go).
//
// p0 sends its commands one by one, p1 through go-redis's default
// AutoPipeliner per shard, p2 through its full-duplex one
// (Options.AutoPipeline); two more, whose ids have spaces, non-ASCII bytes
// and one name under the old mapping of bytes <= ' ', send with a 300ms
// deadline through Client.AutoPipeline() and FullDuplex
// (torture_identity_test.go).
//
// At the end the merged histories and a final read of every key must be
// linearizable per key (porcupine: no acknowledged write lost, no deleted
// key back, no read going backwards) and no key may be left on a server
// that does not own it. Each registry gets REDSHARD_TORTURE_SECONDS (45 by
// default; REDSHARD_SOAK=1: 600) of changes; REDSHARD_TORTURE_SEED replays
// a run.
func TestFleetTorture(t *testing.T) {
	needRedis(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REDSHARD_TORTURE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("REDSHARD_TORTURE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	dur := 45 * time.Second
	if os.Getenv("REDSHARD_SOAK") != "" {
		dur = 10 * time.Minute
	}
	if s := os.Getenv("REDSHARD_TORTURE_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("REDSHARD_TORTURE_SECONDS=%q: %v", s, err)
		}
		dur = time.Duration(n) * time.Second
	}
	t.Run("redis", func(t *testing.T) { torture(t, "redis", seed, dur) })
	t.Run("etcd", func(t *testing.T) { torture(t, "etcd", seed+1, dur) })
}

// tortureRun is one registry's run.
type tortureRun struct {
	*fleet
	rng     *rand.Rand
	kind    string
	regSrv  *redistest.Server           // kind redis
	etcd    *etcdServer                 // kind etcd
	proxies map[string]*blackhole.Proxy // each worker's path to the registry
	faults  map[string]int
	applies int
	recipes int // changes of placement recipe among the applies
	restore restoreState
	// stopBy is when the run gives up on a change that does not complete,
	// well before the test binary's -timeout: a run that panics on that
	// timeout loses the logs that would say what was stuck.
	stopBy time.Time
}

func torture(t *testing.T, kind string, seed uint64, dur time.Duration) {
	t.Logf("REDSHARD_TORTURE_SEED=%d", seed)
	r := &tortureRun{rng: rand.New(rand.NewPCG(seed, 7)), kind: kind, proxies: map[string]*blackhole.Proxy{}, faults: map[string]int{},
		stopBy: time.Now().Add(dur + 10*time.Minute)}
	if d, ok := t.Deadline(); ok && d.Add(-3*time.Minute).Before(r.stopBy) {
		r.stopBy = d.Add(-3 * time.Minute) // time left to stop the workers and say why
	}
	f := &fleet{t: t, bin: fleetproc(t), dir: t.TempDir(), seed: seed, keys: 512}
	for range 4 {
		f.servers = append(f.servers, redistest.Start(t, redistest.Args("--appendonly", "yes", "--appendfsync", "always")))
	}
	r.fleet = f
	var regAddr, path string
	switch kind {
	case "redis":
		r.regSrv = redistest.Start(t)
		regAddr, path = r.regSrv.Addr(), "/redshard:registry:torture"
	case "etcd":
		r.etcd = launchEtcd(t, f.bin, freeAddr(t), freeAddr(t))
		regAddr, path = r.etcd.client, "/redshard/torture"
	}
	f.url = kind + "://" + regAddr + path

	weights := map[int]float64{0: 1, 1: 1, 2: 1}
	r.fleet.apply("seed", r.doc(weights))
	r.takeSnapshot()
	for i := range 3 {
		id := fmt.Sprintf("p%d", i)
		px, err := blackhole.Listen(regAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = px.Close() })
		r.proxies[id] = px
		// One process of each way to send: command by command, batched by
		// go-redis's default AutoPipeliner, and on its full-duplex stream
		// (whose shard hooks, the worker's holds among them, run after
		// the command is written: a held write is sent, its answer held).
		f.worker(id, "--registry", kind+"://"+px.Addr()+path, "--autopipeline", []string{"", "batch", "fullduplex"}[i])
	}
	r.identityWorkers(regAddr, path)
	time.Sleep(500 * time.Millisecond)

	kinds := []string{"pause", "blackhole", "forget", "driver-kill", "two-drivers", "shard-kill", "restore-old"}
	end := time.Now().Add(dur)
	for round := 0; time.Now().Before(end) || round < len(kinds); round++ {
		weights = r.nextWeights(weights)
		fault := kinds[round%len(kinds)]
		if round >= len(kinds) {
			fault = kinds[r.rng.IntN(len(kinds))]
		}
		r.change(weights, fault)
	}

	for _, p := range slices.Clone(f.workers) {
		tot := p.stop(t)
		t.Logf("%s: %v", p.id, tot)
		checkIdentityWorker(t, p.id, tot)
		f.remove(p)
	}
	ops := f.history(f.finalReads(weights))
	misplaced := r.misplaced(weights)
	t.Logf("%s registry: %d histories, %d operations, %d changes applied (%d of the placement recipe); faults %v; %s; misplaced %d",
		kind, len(f.gone), len(ops), r.applies, r.recipes, r.faults, r.restoreCounts(), misplaced)
	check(t, ops)
}

// nextWeights picks the next ring: a server added, removed or re-weighted,
// with at least two servers always on it; or, one time in five, the same
// servers on the other placement recipe (a change that moves about half
// of the keys between servers that stay).
func (r *tortureRun) nextWeights(cur map[int]float64) map[int]float64 {
	if r.rng.IntN(5) == 0 {
		r.recipe = 3 - max(r.recipe, 1) // Recipe1 <-> Recipe2
		r.recipes++
		return maps(cur)
	}
	for {
		next := maps(cur)
		i := r.rng.IntN(len(r.servers))
		switch _, on := next[i]; {
		case !on:
			next[i] = 1
		case len(next) > 2 && r.rng.IntN(2) == 0:
			delete(next, i)
		default:
			next[i] = float64(1 + r.rng.IntN(3))
		}
		if !sameWeights(next, cur) {
			return next
		}
	}
}

func maps(m map[int]float64) map[int]float64 {
	out := make(map[int]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sameWeights(a, b map[int]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// change applies weights with fault injected at a random moment, and runs
// the driver again until the change is done.
func (r *tortureRun) change(weights map[int]float64, fault string) {
	t := r.t
	began := time.Now()
	doc := r.doc(weights)
	drv := r.startDriver(doc)
	time.Sleep(time.Duration(r.rng.IntN(1200)) * time.Millisecond)
	r.faults[fault]++
	switch fault {
	case "pause":
		p := r.workers[r.rng.IntN(len(r.workers))]
		hold := r.rng.IntN(2) == 0
		if hold {
			p.hold(t, true)
			time.Sleep(50 * time.Millisecond)
		}
		p.signal(syscall.SIGSTOP)
		time.Sleep(3*time.Second + time.Duration(r.rng.IntN(2000))*time.Millisecond)
		p.signal(syscall.SIGCONT)
		if hold {
			p.hold(t, false)
		}
	case "blackhole":
		p := r.workers[r.rng.IntN(len(r.workers))]
		px := r.proxies[p.id]
		px.Hold(true) // a partition that heals: what was sent arrives after it
		time.Sleep(3*time.Second + time.Duration(r.rng.IntN(2000))*time.Millisecond)
		px.Hold(false)
	case "forget":
		switch r.kind {
		case "redis":
			rdb := r.regSrv.Client(t)
			ctx, cancel := registryCtx()
			err := rdb.FlushAll(ctx).Err()
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		case "etcd":
			r.forgetEtcd()
		}
	case "driver-kill":
		drv.kill()
	case "two-drivers":
		r.wait(r.startDriver(doc)) // either may lose the lock: the loop below finishes the change
	case "shard-kill":
		s := r.servers[r.rng.IntN(len(r.servers))]
		s.Kill()
		time.Sleep(time.Duration(200+r.rng.IntN(800)) * time.Millisecond)
		s.Recover(t)
	case "restore-old":
		r.restoreOld()
	}
	ok := r.wait(drv)
	for attempt := 0; !ok; attempt++ {
		if attempt == 40 || time.Now().After(r.stopBy) {
			t.Fatalf("the change to %v (fault %s) did not complete after %d runs of the driver; the workers' last words:\n%s",
				weights, fault, attempt+1, r.workersTail())
		}
		time.Sleep(500 * time.Millisecond)
		ok = r.wait(r.startDriver(doc))
	}
	r.applies++
	if took := time.Since(began); took > time.Minute {
		t.Logf("the change to %v (fault %s) took %v", weights, fault, took.Round(time.Second))
	}
	r.takeSnapshot()
}

// startDriver runs fleetproc apply in the background.
func (r *tortureRun) startDriver(doc string) *proc {
	p := &proc{id: "driver", cmd: exec.Command(r.bin, "apply", "--registry", r.url, "--doc", doc, "--lock-ttl", "3s"),
		done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	r.t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

// wait waits for a driver and reports whether it completed its change. A
// driver that runs 90s (or past stopBy) is stopped with SIGQUIT, which
// prints its goroutines.
func (r *tortureRun) wait(p *proc) bool {
	limit := min(90*time.Second, max(time.Until(r.stopBy), time.Second))
	select {
	case <-p.done:
	case <-time.After(limit):
		p.signal(syscall.SIGQUIT) // its goroutines, on its stderr
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.kill()
		}
		r.t.Errorf("the driver did not finish in %v:\n%s", limit, p.stderr.String())
		return false
	}
	if p.cmd.ProcessState.Success() {
		return true
	}
	r.t.Logf("driver: %s", lastLine(p.stderr.String()))
	return false
}

// workersTail is the end of every running worker's stderr.
func (r *tortureRun) workersTail() string {
	var b strings.Builder
	for _, p := range r.workers {
		out := strings.TrimSpace(p.stderr.String())
		lines := strings.Split(out, "\n")
		fmt.Fprintf(&b, "--- %s:\n%s\n", p.id, strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// misplaced counts the keys of the key space found on a server that does
// not own them on the final ring.
func (r *tortureRun) misplaced(weights map[int]float64) int {
	c := r.client(weights)
	defer c.Close()
	n := 0
	for k := range r.keySpace() {
		key := fmt.Sprintf("k%03d", k)
		owner, _ := c.ShardFor(key)
		for i, s := range r.servers {
			if fmt.Sprintf("s%d", i) == owner {
				continue
			}
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
			v, err := rdb.Get(context.Background(), key).Result()
			_ = rdb.Close()
			if err != nil && !errors.Is(err, redis.Nil) {
				r.t.Fatalf("GET %s on s%d: %v", key, i, err)
			}
			if err == nil {
				n++
				r.t.Errorf("key %s is on s%d with %q, its owner is %s", key, i, v, owner)
			}
		}
	}
	return n
}
