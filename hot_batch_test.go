package redshard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// TestHotMGetServesCachedKeys: a 16-key MGET with a celebrity key never
// sends the celebrity to its shard while its reply is cached, and a write
// through the client is read back at once.
func TestHotMGetServesCachedKeys(t *testing.T) {
	for _, autopipe := range []bool{false, true} {
		t.Run(fmt.Sprintf("autopipeline=%v", autopipe), func(t *testing.T) {
			hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache},
				func(o *redshard.Options) { o.AutoPipeline = autopipe })
			const celeb = "celebrity"
			hc.c.Set(ctx, celeb, "v1", 0)
			keys := []string{celeb}
			for i := 0; i < 15; i++ {
				k := fmt.Sprint("fan:", i)
				keys = append(keys, k)
				if i%3 != 0 { // some keys missing: nil in the reply
					hc.c.Set(ctx, k, "f"+fmt.Sprint(i), 0)
				}
			}
			keys[0], keys[7] = keys[7], keys[0] // the celebrity in the middle
			hotWarm(t, hc.c, celeb)
			h := newAPCountHook()
			hc.c.AddHook(h)

			check := func(want string) {
				t.Helper()
				vals, err := hc.c.MGet(ctx, keys...).Result()
				if err != nil || len(vals) != len(keys) {
					t.Fatalf("MGET = %v, %v", vals, err)
				}
				for i, k := range keys {
					var w interface{}
					switch {
					case k == celeb:
						w = want
					case k[len("fan:"):] != "" && atoi(k[len("fan:"):])%3 != 0:
						w = "f" + k[len("fan:"):]
					}
					if vals[i] != w {
						t.Fatalf("MGET[%d] (%s) = %v, want %v", i, k, vals[i], w)
					}
				}
			}
			check("v1") // fills the cache: one GET of the celebrity
			if n := h.count("get", celeb); n != 1 {
				t.Fatalf("the first MGET read the celebrity %d times, want 1 (a GET that fills the cache)", n)
			}
			for i := 0; i < 50; i++ {
				check("v1")
			}
			if n := h.count("get", celeb) + h.count("mget", celeb); n != 1 {
				t.Fatalf("the celebrity was sent to its shard %d times while cached", n)
			}
			if n := h.count("mget", keys[0]); n != 51 {
				t.Fatalf("the other keys were sent %d times, want 51", n)
			}
			hc.c.Set(ctx, celeb, "v2", 0) // evicts the cached reply before it returns
			check("v2")
			if n := h.count("get", celeb); n != 2 {
				t.Fatalf("after a write, the celebrity was read %d times, want 2", n)
			}
			// A MGET of hot keys only sends nothing to the shards once cached.
			before := h.cmds.Load() + h.pipes.Load()
			if v, err := hc.c.MGet(ctx, celeb, celeb).Result(); err != nil || v[0] != "v2" || v[1] != "v2" {
				t.Fatalf("MGET celebrity celebrity = %v, %v", v, err)
			}
			if after := h.cmds.Load() + h.pipes.Load(); after != before {
				t.Fatalf("a MGET of cached keys sent %d commands", after-before)
			}
		})
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestHotMGetDuringMembershipChanges: MGETs with a cached hot key while the
// ring grows and shrinks return every existing key, or an error, never a
// nil for a key that exists (the cold keys' part used to be routed as a new
// command: on a newer ring its error was dropped, and its first move waited
// for the MGET itself).
func TestHotMGetDuringMembershipChanges(t *testing.T) {
	hc := newHotCluster(t, 3, redshard.HotKeyOptions{Mitigation: redshard.LocalCache}, nil)
	c := hc.c
	keys := []string{"celebrity"}
	for i := 0; i < 200; i++ {
		keys = append(keys, fmt.Sprint("cold:", i))
	}
	for _, k := range keys {
		c.Set(ctx, k, "v:"+k, 0)
	}
	hotWarm(t, c, "celebrity")
	stop := make(chan struct{})
	done := make(chan error, 1)
	var mgets int
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			vals, err := c.MGet(mctx, keys...).Result()
			cancel()
			mgets++
			if err != nil {
				done <- fmt.Errorf("MGET %d: %w", mgets, err)
				return
			}
			for i, v := range vals {
				if v != "v:"+keys[i] {
					done <- fmt.Errorf("MGET %d: %s = %v, want v:%s", mgets, keys[i], v, keys[i])
					return
				}
			}
		}
	}()
	base := append([]redshard.Shard(nil), hc.shards...)
	for round := 0; round < 3; round++ {
		grown := hc.addShard(t, fmt.Sprint("extra-", round), 1)
		for _, shards := range [][]redshard.Shard{grown, base} {
			if err := c.SetShards(ctx, shards); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		hc.shards = base
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if mgets == 0 {
		t.Fatal("no MGET ran")
	}
}

// TestHotOneShardKeylessWriteEvicts: on a one-shard ring a script that
// declares no key is sent as it is and may write any key, so the cached
// replies are dropped, whether it is sent alone, in a pipeline or in a
// transaction: the next read sees its write.
func TestHotOneShardKeylessWriteEvicts(t *testing.T) {
	const script = "return redis.call('set', 'celebrity', ARGV[1])"
	for _, how := range []string{"alone", "pipeline", "transaction"} {
		t.Run(how, func(t *testing.T) {
			hc := newHotCluster(t, 1, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour}, nil)
			c := hc.c
			c.Set(ctx, "celebrity", "v1", 0)
			hotWarm(t, c, "celebrity")
			if v := c.Get(ctx, "celebrity").Val(); v != "v1" { // cached now
				t.Fatalf("GET = %q", v)
			}
			var err error
			switch how {
			case "alone":
				err = c.Eval(ctx, script, nil, "v2").Err()
			case "pipeline":
				_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error { p.Eval(ctx, script, nil, "v2"); return nil })
			case "transaction":
				_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error { p.Eval(ctx, script, nil, "v2"); return nil })
			}
			if err != nil {
				t.Fatal(err)
			}
			if v := c.Get(ctx, "celebrity").Val(); v != "v2" {
				t.Fatalf("GET after a keyless EVAL (%s) = %q, want v2", how, v)
			}
		})
	}
}
