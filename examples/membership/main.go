// Command membership adds a shard to a running fleet of embedded miniredis
// shards twice, printing the miss rate tick by tick: once by restarting
// the client on the new list (what a plain consistent-hash client does: the
// moved keys miss) and once with SetShards, whose handoff brings each moved
// key over on first use. Then it runs Rebalance with its progress and shows
// the keys on each shard.
//
//	go run ./examples/membership
//	go run ./examples/membership -keys 100000 -duration 10s -tick 1s
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

var (
	numKeys = flag.Int("keys", 50000, "keys preloaded on the 4 shards")
	phase   = flag.Duration("duration", 2*time.Second, "how long each run lasts")
	tick    = flag.Duration("tick", 500*time.Millisecond, "reporting interval; the shard joins after the first")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	fmt.Printf("4 shards, %d keys, 95%% reads; a 5th shard joins after %v\n\n", *numKeys, *tick)
	run(ctx, "a new client on the new list (no handoff)", false).Close()
	c := run(ctx, "SetShards on the running client (handoff)", true)
	defer c.Close()

	fmt.Println("\nRebalance (moves what handoff has not moved yet):")
	next := int64(0)
	rep, err := c.Rebalance(ctx, redshard.RebalanceOptions{BatchSize: 2000, Progress: func(p redshard.RebalanceProgress) {
		if p.Scanned < next {
			return
		}
		next = p.Scanned + p.Total/4
		fmt.Printf("  scanned %6d/%d  moved %5d  skipped %6d  failed %d  %6d bytes\n",
			p.Scanned, p.Total, p.Moved, p.Skipped, p.Failed, p.Bytes)
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("  done in %v: moved %d, verified=%v, misplaced %d\n", rep.Elapsed.Round(time.Millisecond), rep.Moved, rep.Verified, rep.Misplaced)
	fmt.Println("\nkeys per shard now:")
	shares := c.Ring().Shares()
	for _, s := range c.Shards() {
		sc, _ := c.ShardClient(s.Name)
		n, _ := sc.DBSize(ctx).Result()
		fmt.Printf("  %-8s %6d keys (%.1f%%, ring share %.1f%%)\n", s.Name, n, 100*float64(n)/float64(*numKeys), 100*shares[s.Name])
	}
}

// run preloads 4 shards, starts a workload, adds a 5th shard and prints
// the miss rate per tick. With setShards the running client switches with
// SetShards (handoff); without, the workload moves to a new client built
// with the 5 shards, as a restarted process would. It returns the client
// the workload used last.
func run(ctx context.Context, title string, setShards bool) *redshard.Client {
	var shards []redshard.Shard
	for i := 0; i < 5; i++ {
		m, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: m.Addr()})
	}
	c, err := redshard.NewClient(&redshard.Options{Shards: shards[:4]})
	if err != nil {
		log.Fatal(err)
	}
	pipe := c.Pipeline()
	for i := 0; i < *numKeys; i++ {
		pipe.Set(ctx, fmt.Sprintf("key:%d", i), i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		log.Fatal(err)
	}

	var cur atomic.Pointer[redshard.Client] // the client the workload uses
	cur.Store(c)
	var reads, misses atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := cur.Load()
				k := fmt.Sprintf("key:%d", rand.IntN(*numKeys))
				if rand.IntN(100) < 5 {
					c.Set(ctx, k, "updated", 0)
					continue
				}
				err := c.Get(ctx, k).Err()
				reads.Add(1)
				if err == redis.Nil {
					misses.Add(1)
				}
			}
		})
	}
	fmt.Printf("%s:\n", title)
	start := time.Now()
	added := false
	var totalReads, totalMisses int64
	for t := *tick; t <= *phase; t += *tick {
		time.Sleep(time.Until(start.Add(t)))
		r, m := reads.Swap(0), misses.Swap(0)
		if added {
			totalReads, totalMisses = totalReads+r, totalMisses+m
		}
		fmt.Printf("  %4.1fs  %6d reads  miss rate %5.1f%%\n", t.Seconds(), r, 100*float64(m)/float64(max(r, 1)))
		if !added {
			if setShards {
				if err := c.SetShards(ctx, shards); err != nil {
					log.Fatal(err)
				}
			} else {
				next, err := redshard.NewClient(&redshard.Options{Shards: shards})
				if err != nil {
					log.Fatal(err)
				}
				cur.Store(next)
			}
			fmt.Println("        -- shard-4 added --")
			added = true
		}
	}
	close(stop)
	wg.Wait()
	if old := c; cur.Load() != old {
		old.Close()
		c = cur.Load()
	}
	st := c.Stats()
	fmt.Printf("  after the change: %d reads, miss rate %.2f%%; keys handed off on first use: %d\n",
		totalReads, 100*float64(totalMisses)/float64(max(totalReads, 1)), st.HandoffMoved)
	return c
}
