// Command fleet runs a fleet of redshard clients that follow one registry,
// and adds a shard to it under load: several "processes" (each a
// goroutine group with its own redshard client and its own registry
// handle) write, delete and read a shared key space on embedded miniredis
// shards, keeping a ledger of every acknowledged operation; then
// fleet.Apply changes the ring through the registry, phase by phase,
// with a live display of which process is on which phase, and the data
// moves. At the end every read and every key is checked against the
// ledger.
//
//	go run ./examples/fleet
//	go run ./examples/fleet -processes 6 -keys 2000
//
// With -registry it is instead one process of a real fleet (see
// docs/operations.md): it follows the registry, runs the same workload on
// keys of its own until Ctrl-C or -duration, checks them, and deletes the
// keys it wrote, and no other.
//
//	go run ./examples/fleet -registry redis://127.0.0.1:7000/redshard:registry:demo -id web-1
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/redshardtest"
	"github.com/redshard/redshard/registry"
)

func main() {
	processes := flag.Int("processes", 4, "processes of the embedded fleet")
	workers := flag.Int("workers", 2, "workload goroutines per process")
	keys := flag.Int("keys", 1000, "keys of the workload")
	reg := flag.String("registry", "", "join a real fleet instead: its registry, redis://host:port/NAME")
	id := flag.String("id", "", "with -registry: this process's member id (default host/pid)")
	duration := flag.Duration("duration", 0, "with -registry: how long to run (0: until Ctrl-C)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var t *totals
	var err error
	if *reg != "" {
		t, err = follow(ctx, os.Stdout, followOptions{URL: *reg, ID: *id, Workers: *workers, Keys: *keys, Duration: *duration})
	} else {
		t, err = demo(ctx, os.Stdout, demoOptions{Processes: *processes, Workers: *workers, Keys: *keys})
	}
	if err != nil {
		log.Fatal(err)
	}
	if t.bad() != 0 {
		os.Exit(1)
	}
}

// demoOptions sizes the embedded fleet.
type demoOptions struct {
	Processes, Workers, Keys int
	// Load is how long the workload runs before and after the change.
	// Default 1s.
	Load time.Duration
}

// demo runs the embedded fleet: 3 shards, a 4th added under load.
func demo(ctx context.Context, out io.Writer, o demoOptions) (*totals, error) {
	if o.Load == 0 {
		o.Load = time.Second
	}
	var servers []*redshardtest.Server
	defer func() {
		for _, m := range servers {
			m.Close()
		}
	}()
	start := func() (string, error) {
		// miniredis, with CLIENT LIST and KILL, which the fleet's driver uses
		m, err := redshardtest.StartServer()
		if err != nil {
			return "", err
		}
		servers = append(servers, m)
		return m.Addr(), nil
	}
	regAddr, err := start()
	if err != nil {
		return nil, err
	}
	var shards []map[string]any
	for i := range 4 {
		addr, err := start()
		if err != nil {
			return nil, err
		}
		shards = append(shards, map[string]any{"name": fmt.Sprintf("shard-%d", i), "addr": addr, "weight": 1})
	}
	doc := func(n int) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"shards": shards[:n]})
		return b
	}

	// The operator's registry handle, and the first config: 3 shards.
	opRDB := redis.NewClient(&redis.Options{Addr: regAddr})
	defer opRDB.Close()
	regOpt := &registry.Options{PollInterval: 100 * time.Millisecond, MemberTTL: 2 * time.Second}
	opReg, err := registry.NewRedisOptions(opRDB, "redshard:registry:demo", regOpt)
	if err != nil {
		return nil, err
	}
	defer opReg.Close()
	applyOpt := fleet.ApplyOptions{Driver: "operator", Client: &redshard.Options{Health: &redshard.HealthOptions{Disable: true}}}
	if _, err := fleet.Apply(ctx, opReg, doc(3), applyOpt); err != nil {
		return nil, fmt.Errorf("publishing the first config: %w", err)
	}

	// The processes: each its own registry connection and client.
	var clients []*redshard.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	for p := range o.Processes {
		rdb := redis.NewClient(&redis.Options{Addr: regAddr})
		defer rdb.Close()
		reg, err := registry.NewRedisOptions(rdb, "redshard:registry:demo", regOpt)
		if err != nil {
			return nil, err
		}
		defer reg.Close()
		c, err := redshard.NewClient(&redshard.Options{
			Registry: reg,
			Fleet:    &redshard.FleetOptions{MemberID: fmt.Sprintf("proc-%d", p)},
			Health:   &redshard.HealthOptions{Disable: true},
		})
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", p, err)
		}
		clients = append(clients, c)
	}
	fmt.Fprintf(out, "%d processes x %d workers on 3 shards, %d keys (30%% SET, 10%% DEL of a worker's own keys, 60%% GET of any key)\n",
		o.Processes, o.Workers, o.Keys)

	l := newLedger("fleet:key:", o.Keys)
	t := &totals{}
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	all := o.Processes * o.Workers
	for p, c := range clients {
		for w := range o.Workers {
			wg.Go(func() { worker(load, c, l, p*o.Workers+w, all, t) })
		}
	}

	sleep(ctx, o.Load)
	fmt.Fprintf(out, "\nadding shard-3 through the registry (fleet.Apply), under load:\n")
	disp := &display{w: out}
	applyOpt.Progress = disp.progress
	rep, err := fleet.Apply(ctx, opReg, doc(4), applyOpt)
	if err != nil {
		stopLoad()
		wg.Wait()
		return t, fmt.Errorf("apply: %w", err)
	}
	for _, ph := range rep.Phases {
		fmt.Fprintf(out, "  %-16s acknowledged by %d processes after %v\n", ph.Version, ph.Members, ph.Acked.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "  data moved: %d keys scanned, %d moved, verified %v\n", rep.Rebalance.Scanned, rep.Rebalance.Moved, rep.Rebalance.Verified)
	sleep(ctx, o.Load)
	stopLoad()
	wg.Wait()

	if err := verify(context.WithoutCancel(ctx), clients[0], l, t); err != nil {
		return t, err
	}
	fmt.Fprintf(out, "\nkeys per shard now:")
	for _, s := range clients[0].Shards() {
		sc, _ := clients[0].ShardClient(s.Name)
		keys, _ := sc.Keys(ctx, "fleet:key:*").Result()
		fmt.Fprintf(out, "  %s %d", s.Name, len(keys))
	}
	fmt.Fprintf(out, "\n\n%s\n", t)
	if err := t.FirstError(); err != nil {
		fmt.Fprintf(out, "first error: %v\n", err)
	}
	return t, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// display prints Apply's progress: a line whenever the phase or the
// processes on it change (redshard apply's display, in a few lines).
type display struct {
	w    io.Writer
	mu   sync.Mutex // guards last
	last string
}

func (d *display) progress(p fleet.ApplyProgress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.Rebalancing {
		fmt.Fprintf(d.w, "  %s: every process is on it; Rebalance moves the data\n", p.Config.Version())
		return
	}
	on := map[string]int{}
	for _, m := range p.Members {
		if m.Version() == (registry.Version{}) {
			on["nothing yet (joining)"]++ // it has read no config yet
			continue
		}
		on[m.Version().String()]++
	}
	var parts []string
	for v, n := range on {
		parts = append(parts, fmt.Sprintf("%d on %s", n, v))
	}
	slices.Sort(parts)
	var late []string
	for _, m := range p.Late {
		late = append(late, m.ID)
	}
	slices.Sort(late)
	line := fmt.Sprintf("  %s: %d live (%s)", p.Config.Version(), len(p.Members), strings.Join(parts, ", "))
	if len(late) > 0 {
		line += "; late: " + strings.Join(late, ", ")
	} else {
		line += "; all acknowledged"
	}
	if line != d.last {
		fmt.Fprintf(d.w, "%s  [%v]\n", line, p.Waited.Round(time.Millisecond))
		d.last = line
	}
}
