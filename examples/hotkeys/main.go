// Command hotkeys shows what one celebrity key does to a sharded cache, and
// how redshard's hot-key mitigations take its load off its shard.
//
// It starts four embedded miniredis shards, so it runs anywhere with nothing
// installed:
//
//	go run ./examples/hotkeys
//
// The same workload runs three times: with mitigation off, with LocalCache
// and with SplitCopies. 30% of the operations name one key ("celebrity"), the rest
// are spread over 100,000 keys; 95% are GETs and 5% SETs. For each run it
// prints how many commands each shard served, the busiest shard against the
// mean, the hot keys the client detected, and what the mitigation did.
package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

const (
	numShards   = 4
	workers     = 16
	opsPerRun   = 60_000
	celebrity   = "celebrity"
	userKeys    = 100_000
	celebShare  = 30 // percent of operations on the celebrity key
	writeShare  = 5  // percent of operations that are SETs
	warmupShare = 4  // the first 1/warmupShare of a run is not counted
)

func main() {
	var servers []*miniredis.Miniredis
	var shards []redshard.Shard
	for i := 0; i < numShards; i++ {
		m, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		defer m.Close()
		servers = append(servers, m)
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: m.Addr()})
	}
	fmt.Printf("%d embedded miniredis shards; %d ops per run from %d goroutines: %d%% on %q, the rest over %d keys; %d%% SETs\n",
		numShards, opsPerRun, workers, celebShare, celebrity, userKeys, writeShare)

	runs := []struct {
		title string
		hot   *redshard.HotKeyOptions
	}{
		{"no mitigation", nil},
		{"LocalCache: hot reads answered from the client's memory", &redshard.HotKeyOptions{Mitigation: redshard.LocalCache}},
		{"SplitCopies: hot reads spread over the owner and 2 copies", &redshard.HotKeyOptions{Mitigation: redshard.SplitCopies}},
	}
	for _, r := range runs {
		for _, m := range servers {
			m.FlushAll()
		}
		if err := run(r.title, shards, servers, r.hot); err != nil {
			log.Fatal(err)
		}
	}
}

// run drives the workload through a fresh client and prints what happened.
func run(title string, shards []redshard.Shard, servers []*miniredis.Miniredis, hot *redshard.HotKeyOptions) error {
	c, err := redshard.NewClient(&redshard.Options{Shards: shards, HotKeys: hot})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("\n== %s\n", title)

	start := time.Now()
	if err := drive(c, opsPerRun/warmupShare, 1); err != nil { // lets the detector find the key
		return err
	}
	before := make([]int, len(servers))
	for i, m := range servers {
		before[i] = m.CommandCount()
	}
	if err := drive(c, opsPerRun-opsPerRun/warmupShare, 2); err != nil {
		return err
	}
	elapsed := time.Since(start)

	// Per-shard load, in the client's shard order.
	byAddr := map[string]*miniredis.Miniredis{}
	base := map[string]int{}
	for i, m := range servers {
		byAddr[m.Addr()] = m
		base[m.Addr()] = before[i]
	}
	owner, _ := c.ShardFor(celebrity)
	total, most := 0, 0
	served := map[string]int{}
	for _, s := range c.Shards() {
		n := byAddr[s.Addr].CommandCount() - base[s.Addr]
		served[s.Name] = n
		total += n
		most = max(most, n)
	}
	for _, s := range c.Shards() {
		n := served[s.Name]
		note := ""
		if s.Name == owner {
			note = "  <- owns " + celebrity
		}
		fmt.Printf("  %-8s %7d commands %s%s\n", s.Name, n, bar(n, most), note)
	}
	fmt.Printf("  busiest/mean: %.2f   (%.1fs)\n", float64(most)*float64(len(servers))/float64(total), elapsed.Seconds())

	if hot == nil {
		fmt.Println("  hot keys: detection is off (Options.HotKeys is nil)")
		return nil
	}
	st := c.Stats().Hot
	var keys []string
	for _, k := range st.Keys {
		keys = append(keys, fmt.Sprintf("%s (%.0f/s)", k.Key, k.Rate))
	}
	fmt.Printf("  hot keys: %s\n", strings.Join(keys, ", "))
	switch hot.Mitigation {
	case redshard.LocalCache:
		reads := st.CacheHits + st.CacheMisses
		fmt.Printf("  local cache: %d of %d hot reads answered locally (%.0f%%); %d misses shared another's read\n",
			st.CacheHits, reads, 100*float64(st.CacheHits)/float64(max(reads, 1)), st.Coalesced)
		for _, s := range st.Shards {
			if s.Name == owner {
				fmt.Printf("  invalidation on %s: %v (miniredis has no CLIENT TRACKING: replies live MaxStaleness, 1s)\n", owner, s.Invalidation)
			}
		}
	case redshard.SplitCopies:
		fmt.Printf("  split: %d hot reads answered by copies, %d copies made (each write through the client deletes them)\n",
			st.SplitReads, st.CopyFills)
	}
	return nil
}

// drive runs n operations of the workload from several goroutines.
func drive(c *redshard.Client, n int, seed uint64) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			ctx := context.Background()
			for i := 0; i < n/workers; i++ {
				key := celebrity
				if r.IntN(100) >= celebShare {
					key = "user:" + strconv.Itoa(r.IntN(userKeys))
				}
				var err error
				if r.IntN(100) < writeShare {
					err = c.Set(ctx, key, i, 0).Err()
				} else if err = c.Get(ctx, key).Err(); err == redis.Nil {
					err = nil
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// bar draws n against most as a row of blocks.
func bar(n, most int) string {
	const width = 30
	return strings.Repeat("#", n*width/max(most, 1))
}
