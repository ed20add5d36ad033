// Command fleetproc is the process of the fleet test (../fleet_test.go):
// one OS process of a fleet, with its own redshard client following a
// registry, or the driver of a change, or the test's etcd server.
//
//	fleetproc work  --registry URL --id ID --ledger FILE [--seed N] [--keys N] [--workers N] [--max-delay D] [--poll-only]
//	fleetproc apply --registry URL --doc FILE [--lock-ttl D]
//	fleetproc etcd  DIR CLIENT-ADDR PEER-ADDR
//
// URL is redis://host:port/NAME or etcd://host:port/PREFIX. A worker
// writes, reads and deletes keys k000... and appends every operation to
// its ledger, one JSON line written before it returns (writes also get a
// line before they are sent, so that a killed process's writes in flight
// count as maybe applied). It picks up each config after a random delay
// of up to --max-delay; SIGUSR1 cuts it off the registry and SIGUSR2
// brings it back; SIGTERM stops it, and it prints its totals as JSON.
// apply drives a change to the document in FILE and prints the
// ApplyReport as JSON. Nothing here deletes a key it did not write.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/redshard/redshard"
	rsfleet "github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/etcdregistry"
)

// MemberTTL and PollInterval of the test's registries.
const (
	memberTTL    = 2 * time.Second
	pollInterval = 2 * time.Second
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fleetproc work|apply|etcd ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "work":
		err = work(os.Args[2:])
	case "apply":
		err = apply(os.Args[2:])
	case "etcd":
		err = serveEtcd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetproc:", err)
		os.Exit(1)
	}
}

// openRegistry opens the registry of url; close closes it and its client.
func openRegistry(raw string) (reg registry.Registry, closeAll func(), err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	name := strings.TrimPrefix(u.Path, "/")
	opt := &registry.Options{PollInterval: pollInterval, MemberTTL: memberTTL}
	switch u.Scheme {
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: u.Host})
		if reg, err = registry.NewRedisOptions(rdb, name, opt); err != nil {
			return nil, nil, err
		}
		return reg, func() { _ = reg.Close(); _ = rdb.Close() }, nil
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + u.Host}, DialTimeout: 5 * time.Second})
		if err != nil {
			return nil, nil, err
		}
		if reg, err = etcdregistry.NewOptions(cli, name, opt); err != nil {
			return nil, nil, err
		}
		return reg, func() { _ = reg.Close(); _ = cli.Close() }, nil
	}
	return nil, nil, fmt.Errorf("registry %q: want redis:// or etcd://", raw)
}

// faultyRegistry delivers each config after a random delay, can be cut
// off (every call fails, nothing is delivered), and can poll instead of
// watching.
type faultyRegistry struct {
	registry.Registry
	maxDelay time.Duration
	pollOnly bool
	cut      atomic.Bool
}

var errCut = errors.New("fleetproc: cut off from the registry")

func (r *faultyRegistry) Heartbeat(ctx context.Context, m registry.Member) error {
	if r.cut.Load() {
		return errCut
	}
	return r.Registry.Heartbeat(ctx, m)
}

func (r *faultyRegistry) Get(ctx context.Context) (registry.Config, error) {
	if r.cut.Load() {
		return registry.Config{}, errCut
	}
	return r.Registry.Get(ctx)
}

func (r *faultyRegistry) Watch(ctx context.Context) (<-chan registry.Config, error) {
	var in <-chan registry.Config
	if r.pollOnly {
		in = r.poll(ctx)
	} else {
		var err error
		if in, err = r.Registry.Watch(ctx); err != nil {
			return nil, err
		}
	}
	out := make(chan registry.Config)
	go func() {
		defer close(out)
		for cfg := range in {
			if r.maxDelay > 0 {
				select {
				case <-time.After(rand.N(r.maxDelay)):
				case <-ctx.Done():
					return
				}
			}
			if r.cut.Load() {
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

// poll is a watcher that only polls, as one whose announcements are all
// lost.
func (r *faultyRegistry) poll(ctx context.Context) <-chan registry.Config {
	out := make(chan registry.Config)
	go func() {
		defer close(out)
		var last registry.Version
		for {
			if cfg, err := r.Registry.Get(ctx); err == nil && last.Less(cfg.Version()) {
				last = cfg.Version()
				select {
				case out <- cfg:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-time.After(pollInterval):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// Entry is one ledger line.
type Entry struct {
	Proc   string `json:"p"`
	Seq    int64  `json:"s"`
	Begin  bool   `json:"b,omitempty"` // a write about to be sent
	Op     string `json:"op"`          // set, get, del
	Key    string `json:"k"`
	Arg    string `json:"a,omitempty"`
	Call   int64  `json:"c"` // UnixNano
	Return int64  `json:"r,omitempty"`
	Nil    bool   `json:"nil,omitempty"`
	Val    string `json:"v,omitempty"`
	N      int64  `json:"n,omitempty"`
	Err    string `json:"e,omitempty"`
	// Refused: the command was refused before it was sent (ErrFenced, a
	// hold that timed out): it did not happen.
	Refused bool `json:"x,omitempty"`
}

type ledger struct {
	mu sync.Mutex
	f  *os.File
}

func (l *ledger) write(e Entry) {
	b, _ := json.Marshal(e)
	l.mu.Lock()
	_, _ = l.f.Write(append(b, '\n'))
	l.mu.Unlock()
}

// Totals is what a worker prints when it stops.
type Totals struct {
	Ops, Errors, Fenced, Held int64
	// HeldAtHoldTimeout counts the held commands refused when
	// FleetOptions.HoldTimeout ran out rather than a little before their
	// own deadline: with a --deadline shorter than HoldTimeout, each is a
	// wait that its caller's deadline did not bound.
	HeldAtHoldTimeout int64
	FencedSeen        bool
	Version           registry.Version
}

func work(args []string) error {
	fs := flag.NewFlagSet("work", flag.ContinueOnError)
	regURL := fs.String("registry", "", "registry URL")
	id := fs.String("id", "", "member id")
	ledgerPath := fs.String("ledger", "", "ledger file")
	seed := fs.Uint64("seed", 1, "seed")
	keys := fs.Int("keys", 64, "key space")
	workers := fs.Int("workers", 4, "goroutines")
	maxDelay := fs.Duration("max-delay", 300*time.Millisecond, "largest delay before a config is picked up")
	pollOnly := fs.Bool("poll-only", false, "poll the registry instead of watching it")
	onlyKeys := fs.String("only-keys", "", "comma-separated keys to use instead of k000...")
	autoPipeline := fs.String("autopipeline", "", `Options.AutoPipeline: "" off, "batch" go-redis's default AutoPipeliner per shard, "fullduplex" its full-duplex one`)
	front := fs.Bool("front-autopipeline", false, "send the commands through Client.AutoPipeline()")
	deadline := fs.Duration("deadline", 30*time.Second, "each command's deadline")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var apOptions *redis.AutoPipelineOptions
	switch *autoPipeline {
	case "":
	case "batch", "fullduplex":
		apOptions = redis.DefaultBlockingAutoPipelineOptions()
		apOptions.FullDuplex = *autoPipeline == "fullduplex"
	default:
		return fmt.Errorf("--autopipeline %q: want batch or fullduplex", *autoPipeline)
	}
	keyNames := make([]string, *keys)
	for i := range keyNames {
		keyNames[i] = fmt.Sprintf("k%03d", i)
	}
	if *onlyKeys != "" {
		keyNames = strings.Split(*onlyKeys, ",")
	}
	inner, closeReg, err := openRegistry(*regURL)
	if err != nil {
		return err
	}
	defer closeReg()
	reg := &faultyRegistry{Registry: inner, maxDelay: *maxDelay, pollOnly: *pollOnly}
	f, err := os.OpenFile(*ledgerPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	led := &ledger{f: f}
	c, err := redshard.NewClient(&redshard.Options{Registry: reg, Fleet: &redshard.FleetOptions{MemberID: *id},
		ShardOptions: &redis.Options{MaxRetries: -1},
		AutoPipeline: apOptions != nil, AutoPipelineOptions: apOptions})
	if err != nil {
		return err
	}
	defer c.Close()
	var via kv = c
	if *front {
		ap, err := c.AutoPipeline()
		if err != nil {
			return err
		}
		via = ap
	}
	// SIGWINCH starts holding every SET and DEL in a shard hook, after
	// redshard routed and checked it and before it is sent; the next
	// SIGWINCH lets them go. Frozen (SIGSTOP) while held, a command is one
	// that was checked before the pause and is sent after it.
	var held holdGate
	c.AddShardHook(func(redshard.Shard) redis.Hook { return &held })

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT, syscall.SIGWINCH)
	fmt.Fprintln(os.Stderr, "working") // the client is made and SIGTERM ends the run with its totals
	ctx, stop := context.WithCancel(context.Background())
	var tot Totals
	var seq atomic.Int64
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(*seed, uint64(w)))
			for n := 0; ctx.Err() == nil; n++ {
				key := keyNames[rng.IntN(len(keyNames))]
				e := Entry{Proc: *id, Seq: seq.Add(1), Key: key}
				switch p := rng.IntN(100); {
				case p < 45:
					e.Op = "get"
				case p < 85:
					e.Op = "set"
					e.Arg = fmt.Sprintf("%s/%d/%d", *id, w, n)
				default:
					e.Op = "del"
				}
				op(ctx, c, via, *deadline, led, &e, &tot)
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
		}()
	}
	for sig := range sigs {
		switch sig {
		case syscall.SIGUSR1:
			reg.cut.Store(true)
			fmt.Fprintln(os.Stderr, "cut off")
			continue
		case syscall.SIGUSR2:
			reg.cut.Store(false)
			fmt.Fprintln(os.Stderr, "back")
			continue
		case syscall.SIGWINCH:
			fmt.Fprintln(os.Stderr, "holding writes:", held.toggle())
			continue
		}
		break
	}
	stop()
	wg.Wait()
	st, _ := c.FleetStatus()
	tot.Version = st.Version
	return json.NewEncoder(os.Stdout).Encode(tot)
}

// holdGate is the shard hook SIGWINCH closes and opens.
type holdGate struct {
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func (h *holdGate) toggle() (holding bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate == nil {
		h.gate = make(chan struct{})
		return true
	}
	close(h.gate)
	h.gate = nil
	return false
}

func (h *holdGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "set" || name == "del" {
			h.mu.Lock()
			gate := h.gate
			h.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done(): // a hold never released must not hang the worker
					return ctx.Err()
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (h *holdGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// kv is what a worker sends its commands through: the client, or its
// AutoPipeline().
type kv interface {
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value interface{}, expiration time.Duration) *redis.StatusCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// op runs one operation through via, with deadline, and records it. The
// operation runs with a context of its own: stopping the worker does not
// cut it short.
func op(stopping context.Context, c *redshard.Client, via kv, deadline time.Duration, led *ledger, e *Entry, tot *Totals) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(stopping), deadline)
	defer cancel()
	e.Call = time.Now().UnixNano()
	if e.Op != "get" {
		b := *e
		b.Begin = true
		led.write(b)
	}
	var err error
	switch e.Op {
	case "get":
		e.Val, err = via.Get(ctx, e.Key).Result()
	case "set":
		err = via.Set(ctx, e.Key, e.Arg, 0).Err()
	case "del":
		e.N, err = via.Del(ctx, e.Key).Result()
	}
	e.Return = time.Now().UnixNano()
	atomic.AddInt64(&tot.Ops, 1)
	switch {
	case errors.Is(err, redis.Nil):
		e.Nil, e.Val = true, ""
	case err != nil:
		e.Err = err.Error()
		atomic.AddInt64(&tot.Errors, 1)
		if errors.Is(err, redshard.ErrFenced) {
			e.Refused = true
			atomic.AddInt64(&tot.Fenced, 1)
		} else if errors.Is(err, redshard.ErrHandoffInProgress) && strings.Contains(err.Error(), "has not reached its migrate phase") {
			e.Refused = true
			atomic.AddInt64(&tot.Held, 1)
			if strings.Contains(err.Error(), "(FleetOptions.HoldTimeout)") {
				atomic.AddInt64(&tot.HeldAtHoldTimeout, 1) // the hold's limit, not the command's deadline
			}
		}
	}
	if st, _ := c.FleetStatus(); st.Fenced {
		tot.FencedSeen = true
	}
	led.write(*e)
}

// Report is what apply prints: the ApplyReport without its per-shard-pair
// moves (JSON has no array keys).
type Report struct {
	From, To registry.Version
	Phases   []rsfleet.PhaseReport
	Moved    int64
}

func apply(args []string) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	regURL := fs.String("registry", "", "registry URL")
	docPath := fs.String("doc", "", "config file")
	lockTTL := fs.Duration("lock-ttl", 0, "the driver lock's TTL (0: Apply's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	reg, closeReg, err := openRegistry(*regURL)
	if err != nil {
		return err
	}
	defer closeReg()
	doc, err := os.ReadFile(*docPath)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rep, err := rsfleet.Apply(ctx, reg, doc, rsfleet.ApplyOptions{Driver: "fleet-test", LockTTL: *lockTTL})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(Report{From: rep.From, To: rep.To, Phases: rep.Phases, Moved: rep.Rebalance.Moved})
}

// serveEtcd runs an etcd server until SIGTERM or until stdin closes (the
// parent is gone), printing "etcd ready" once it serves.
func serveEtcd(args []string) error {
	if len(args) != 3 {
		return errors.New("etcd DIR CLIENT-ADDR PEER-ADDR")
	}
	cfg := embed.NewConfig()
	cfg.Name = "fleet"
	cfg.Dir = args[0]
	cu, pu := url.URL{Scheme: "http", Host: args[1]}, url.URL{Scheme: "http", Host: args[2]}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		return errors.New("etcd did not become ready")
	}
	fmt.Println("etcd ready")
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	gone := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(gone) }()
	select {
	case <-term:
	case <-gone:
	case err := <-e.Err():
		return err
	}
	return nil
}
