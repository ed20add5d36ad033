package redshard_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/conformance"
)

// TestKeyspaceDuringChange: during a removal KEYS, a full SCAN and DBSIZE
// through the client missed the keys still on the removed server (28 of
// 40 reported, while GET found all 40). During a change (here held in
// flight by not running Rebalance), with some keys moved by handoff and
// one on both its previous and its new owner, each key counts once.
func TestKeyspaceDuringChange(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name   string
		change func(cl *cluster) []redshard.Shard
	}{
		{"removal", func(cl *cluster) []redshard.Shard { return cl.shards[1:] }},
		{"addition", func(cl *cluster) []redshard.Shard { return cl.addShard(t, "shard-new", 2) }},
		{"reweight", func(cl *cluster) []redshard.Shard {
			s := slices.Clone(cl.shards)
			s[0].Weight = 4
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, 1, 1, 1)
			preload(t, cl.c, n)
			before := map[string]string{}
			for i := range n {
				k := fmt.Sprintf("key:%d", i)
				before[k], _ = cl.c.ShardFor(k)
			}
			if err := cl.c.SetShards(ctx, tc.change(cl)); err != nil {
				t.Fatal(err)
			}
			// Count the keys still on a server the change moves them
			// from, and put one moving key on its new owner too.
			moving, both := 0, ""
			for i := range n {
				k := fmt.Sprintf("key:%d", i)
				if to, _ := cl.c.ShardFor(k); to != before[k] {
					moving++
					if both == "" && i >= 10 { // not among the keys read below
						both = k
						cl.mini[to].Set(k, "written on the new owner")
					}
				}
			}
			if moving == 0 || both == "" {
				t.Fatal("the change moves no key: the test proves nothing")
			}
			// Move a few keys by handoff (a read), leave the others.
			for i := range 10 {
				if err := cl.c.Get(ctx, fmt.Sprintf("key:%d", i)).Err(); err != nil {
					t.Fatal(err)
				}
			}
			check := func(when string) {
				t.Helper()
				keys, err := cl.c.Keys(ctx, "*").Result()
				if err != nil || len(keys) != n || len(distinct(keys)) != n {
					t.Errorf("%s: KEYS * = %d keys (%d distinct), %v; want %d", when, len(keys), len(distinct(keys)), err, n)
				}
				var scanned []string
				iter := cl.c.Scan(ctx, 0, "*", 7).Iterator()
				for iter.Next(ctx) {
					scanned = append(scanned, iter.Val())
				}
				if iter.Err() != nil || len(scanned) != n || len(distinct(scanned)) != n {
					t.Errorf("%s: a full SCAN = %d keys (%d distinct), %v; want %d", when, len(scanned), len(distinct(scanned)), iter.Err(), n)
				}
				if got, err := cl.c.DBSize(ctx).Result(); err != nil || got != n {
					t.Errorf("%s: DBSIZE = %d, %v; want %d", when, got, err, n)
				}
				for range 20 {
					k, err := cl.c.RandomKey(ctx).Result()
					if _, ok := before[k]; err != nil || !ok {
						t.Fatalf("%s: RANDOMKEY = %q, %v; want one of the keys", when, k, err)
					}
				}
			}
			check(fmt.Sprintf("during the change (%d keys moving)", moving))
			if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
				t.Fatal(err)
			}
			check("after Rebalance")
		})
	}
}

// TestRandomKeyOnRemovedServer: with every key still on the server a change
// removes, RANDOMKEY answered nil.
func TestRandomKeyOnRemovedServer(t *testing.T) {
	cl := newCluster(t, 1, 1)
	k := conformance.KeyPerShard(cl.c.ShardFor, "only", "shard-0")[0]
	if err := cl.c.Set(ctx, k, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.SetShards(ctx, cl.shards[1:]); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.c.RandomKey(ctx).Result(); err != nil || got != k {
		t.Fatalf("RANDOMKEY = %q, %v; want %q, on the removed server", got, err, k)
	}
	if got, err := cl.c.DBSize(ctx).Result(); err != nil || got != 1 {
		t.Fatalf("DBSIZE = %d, %v; want 1", got, err)
	}
}

func distinct(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// TestKeyspaceDuringChangePipelined: in a pipeline during a change, KEYS,
// DBSIZE and RANDOMKEY read the servers after the pipeline's earlier
// commands, as one server would.
func TestKeyspaceDuringChangePipelined(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	preload(t, cl.c, 40)
	if err := cl.c.SetShards(ctx, cl.shards[1:]); err != nil {
		t.Fatal(err)
	}
	pipe := cl.c.Pipeline()
	pipe.Set(ctx, "written-first", "v", 0)
	keys := pipe.Keys(ctx, "*")
	size := pipe.DBSize(ctx)
	random := pipe.RandomKey(ctx)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if got := keys.Val(); len(got) != 41 || len(distinct(got)) != 41 || !slices.Contains(got, "written-first") {
		t.Errorf("pipelined KEYS * = %d keys (%d distinct), written-first listed: %v; want 41, yes",
			len(got), len(distinct(got)), slices.Contains(got, "written-first"))
	}
	if size.Val() != 41 {
		t.Errorf("pipelined DBSIZE = %d, %v; want 41", size.Val(), size.Err())
	}
	if random.Err() != nil || random.Val() == "" {
		t.Errorf("pipelined RANDOMKEY = %q, %v", random.Val(), random.Err())
	}
}

// TestKeyspaceDuringChangeShardDown: during a change, KEYS, PUBSUB
// CHANNELS, DBSIZE and SCAN ask the servers of both rings; with one of
// them down they answer its ErrShardDown, never the other servers' part as
// if it were the whole.
func TestKeyspaceDuringChangeShardDown(t *testing.T) {
	cl, events, c := healthCluster(t, false)
	for _, k := range cl.keysOn(t, "shard-1", "k", 3) {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A change held in flight (no Rebalance): shard-0 weighs more.
	next := slices.Clone(cl.shards)
	next[0].Weight = 4
	if err := c.SetShards(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := c.Keys(ctx, "*").Err(); err != nil {
		t.Fatalf("KEYS during the change, every shard up: %v", err)
	}
	cl.mini["shard-1"].Close()
	waitEvent(t, events, "shard-1", true)
	if keys, err := c.Keys(ctx, "*").Result(); !errors.Is(err, redshard.ErrShardDown) {
		t.Errorf("KEYS during the change with shard-1 down = %q, %v; want ErrShardDown", keys, err)
	}
	if chans, err := c.PubSubChannels(ctx, "*").Result(); !errors.Is(err, redshard.ErrShardDown) {
		t.Errorf("PUBSUB CHANNELS during the change with shard-1 down = %q, %v; want ErrShardDown", chans, err)
	}
	if n, err := c.DBSize(ctx).Result(); !errors.Is(err, redshard.ErrShardDown) {
		t.Errorf("DBSIZE during the change with shard-1 down = %d, %v; want ErrShardDown", n, err)
	}
	var scanned []string
	iter := c.Scan(ctx, 0, "*", 100).Iterator()
	for iter.Next(ctx) {
		scanned = append(scanned, iter.Val())
	}
	if err := iter.Err(); !errors.Is(err, redshard.ErrShardDown) {
		t.Errorf("a full SCAN during the change with shard-1 down = %q, %v; want ErrShardDown", scanned, err)
	}
	// Up again, so that go-redis's redial of it ends before the test does.
	if err := cl.mini["shard-1"].Restart(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, "shard-1", false)
}
