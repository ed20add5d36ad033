package redshard_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// fullDuplex sets Options.AutoPipeline with go-redis's full-duplex
// AutoPipeliner per shard.
func fullDuplex(o *redshard.Options) {
	o.AutoPipeline = true
	ap := redis.DefaultBlockingAutoPipelineOptions()
	ap.FullDuplex = true
	o.AutoPipelineOptions = ap
}

// fdOrderHook records, per command, the hooks that saw it, in order.
type fdOrderHook struct {
	name string
	mu   *sync.Mutex
	seen map[string][]string // "incr k" -> hook names in the order they ran
}

func (h fdOrderHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h fdOrderHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		k := fmt.Sprint(cmd.Name(), " ", cmd.Args()[len(cmd.Args())-1])
		h.seen[k] = append(h.seen[k], h.name)
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (h fdOrderHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		for _, cmd := range cmds {
			k := fmt.Sprint(cmd.Name(), " ", cmd.Args()[len(cmd.Args())-1])
			h.seen[k] = append(h.seen[k], h.name)
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// Under FullDuplex every command rides its shard's full-duplex stream and
// each shard hook sees it once, in the order the hooks were added; a
// WithTimeout command and a command with a deadline (ContextTimeoutEnabled)
// go alone on the command client: they run once, their hooks see them once.
// Without batchable's checks they would reach timeoutHook on the stream,
// which sends a WithTimeout command again through the timeout clone.
func TestFullDuplexHooksAndTimeouts(t *testing.T) {
	cl := newClusterWith(t, func(o *redshard.Options) {
		fullDuplex(o)
		o.ShardOptions = &redis.Options{ContextTimeoutEnabled: true}
	}, 1, 1)
	for name := range cl.mini {
		if ap := cl.c.ShardAutoPipeliner(name); ap == nil || !ap.Config().FullDuplex {
			t.Fatalf("shard %s: AutoPipeliner %v is not full-duplex", name, ap)
		}
	}
	var mu sync.Mutex
	seen := map[string][]string{}
	cl.c.AddHook(fdOrderHook{"first", &mu, seen})
	cl.c.AddShardHook(func(redshard.Shard) redis.Hook { return fdOrderHook{"second", &mu, seen} })

	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	wt := cl.c.WithTimeout(time.Second)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				for _, tc := range []struct {
					how string
					run func(k string) error
				}{
					{"plain", func(k string) error { return cl.c.Incr(ctx, k).Err() }},
					{"timeout", func(k string) error { return wt.Incr(ctx, k).Err() }},
					{"deadline", func(k string) error { return cl.c.Incr(dctx, k).Err() }},
				} {
					k := fmt.Sprintf("fd:%s:%d:%d", tc.how, g, i)
					if err := tc.run(k); err != nil {
						t.Errorf("INCR %s: %v", k, err)
					}
				}
			}
		})
	}
	wg.Wait()
	for g := range 16 {
		for i := range 20 {
			for _, how := range []string{"plain", "timeout", "deadline"} {
				k := fmt.Sprintf("fd:%s:%d:%d", how, g, i)
				owner, _ := cl.c.ShardFor(k)
				if v, err := cl.mini[owner].Get(k); err != nil || v != "1" {
					t.Fatalf("%s on %s = %q, %v: want 1 (run once)", k, owner, v, err)
				}
				mu.Lock()
				got := fmt.Sprint(seen["incr "+k])
				mu.Unlock()
				if got != "[first second]" {
					t.Fatalf("hooks that saw INCR %s: %s, want [first second]", k, got)
				}
			}
		}
	}
}

// A killed stream connection (CLIENT KILL of every client of the server,
// as apply's sever does to a dropped fleet member) with MaxRetries -1: each
// INCR runs once or fails. Every key ends at 0 or 1 (none ran twice), and
// every INCR that succeeded left its key at 1.
func TestFullDuplexKilledConnection(t *testing.T) {
	srv := redistest.Start(t)
	c, err := redshard.NewClient(&redshard.Options{
		Shards:       []redshard.Shard{{Name: "a", Addr: srv.Addr()}},
		ShardOptions: &redis.Options{MaxRetries: -1},
		Health:       &redshard.HealthOptions{Disable: true},
		AutoPipeline: true,
		AutoPipelineOptions: func() *redis.AutoPipelineOptions {
			o := redis.DefaultBlockingAutoPipelineOptions()
			o.FullDuplex = true
			return o
		}(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()

	const workers, per = 32, 200
	ok := make([][]bool, workers)
	var kills atomic.Int64
	stop := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, _ := admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Result()
			kills.Add(n)
			time.Sleep(2 * time.Millisecond)
		}
	})
	var wg sync.WaitGroup
	for g := range workers {
		ok[g] = make([]bool, per)
		wg.Go(func() {
			for i := range per {
				ok[g][i] = c.Incr(ctx, fmt.Sprintf("kill:%d:%d", g, i)).Err() == nil
			}
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	if kills.Load() == 0 {
		t.Fatal("no connection was killed")
	}
	failed := 0
	for g := range workers {
		for i := range per {
			k := fmt.Sprintf("kill:%d:%d", g, i)
			n, err := admin.Get(ctx, k).Int()
			if err == redis.Nil {
				n, err = 0, nil
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case n > 1:
				t.Fatalf("%s = %d: an INCR ran twice", k, n)
			case ok[g][i] && n != 1:
				t.Fatalf("%s = %d after its INCR succeeded", k, n)
			case !ok[g][i]:
				failed++
			}
		}
	}
	t.Logf("%d connections killed, %d of %d INCRs failed", kills.Load(), failed, workers*per)
}
