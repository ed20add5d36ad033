package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// addShard starts one more miniredis and returns the cluster's shard list
// with it added.
func (cl *cluster) addShard(t testing.TB, name string, weight float64) []redshard.Shard {
	m := miniredis.RunT(t)
	cl.mini[name] = m
	cl.shards = append(cl.shards, redshard.Shard{Name: name, Addr: m.Addr(), Weight: weight})
	return append([]redshard.Shard(nil), cl.shards...)
}

func preload(t testing.TB, c *redshard.Client, n int) {
	t.Helper()
	pipe := c.Pipeline()
	for i := 0; i < n; i++ {
		pipe.Set(ctx, fmt.Sprintf("key:%d", i), fmt.Sprintf("value:%d", i), 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// inventory is every key on every miniredis, with the shards that hold it,
// and a checksum of all keys and values.
func (cl *cluster) inventory(t testing.TB) (where map[string][]string, sum uint32) {
	where = map[string][]string{}
	var lines []string
	for name, m := range cl.mini {
		for _, k := range m.Keys() {
			if strings.HasPrefix(k, redshard.InternalKeyPrefix) {
				continue // redshard's own (settled sets of a change in progress)
			}
			where[k] = append(where[k], name)
			v, _ := m.Get(k)
			lines = append(lines, k+"="+v)
		}
	}
	sort.Strings(lines)
	return where, crc32.ChecksumIEEE([]byte(strings.Join(lines, "\n")))
}

func TestSetShardsHandoffKeepsReadsHitting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(cl *cluster) []redshard.Shard
	}{
		{"add", func(cl *cluster) []redshard.Shard { return cl.addShard(t, "shard-new", 1) }},
		{"remove", func(cl *cluster) []redshard.Shard { return cl.shards[1:] }},
		{"reweight", func(cl *cluster) []redshard.Shard {
			s := append([]redshard.Shard(nil), cl.shards...)
			s[0].Weight = 3
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, 1, 1, 1, 1)
			const n = 2000
			preload(t, cl.c, n)
			before := map[string]string{}
			for i := 0; i < n; i++ {
				k := fmt.Sprintf("key:%d", i)
				before[k], _ = cl.c.ShardFor(k)
			}
			if err := cl.c.SetShards(ctx, tc.change(cl)); err != nil {
				t.Fatal(err)
			}
			moved := 0
			for i := 0; i < n; i++ {
				k := fmt.Sprintf("key:%d", i)
				if owner, _ := cl.c.ShardFor(k); owner != before[k] {
					moved++
				}
				got, err := cl.c.Get(ctx, k).Result()
				if err != nil || got != fmt.Sprintf("value:%d", i) {
					t.Fatalf("GET %s after SetShards = %q, %v", k, got, err)
				}
			}
			st := cl.c.Stats()
			if moved == 0 || st.HandoffMoved != int64(moved) || st.Epoch != 2 || !st.HandoffActive {
				t.Fatalf("moved %d keys, stats %+v", moved, st)
			}
			t.Logf("%d of %d keys changed owner; all read back through handoff", moved, n)
			// Each key now lives only on its owner.
			where, _ := cl.inventory(t)
			for k, shards := range where {
				owner, _ := cl.c.ShardFor(k)
				if len(shards) != 1 || shards[0] != owner {
					t.Fatalf("key %s on %v, owner %s", k, shards, owner)
				}
			}
		})
	}
}

func TestHandoffWritesApplyToTheMovedValue(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	for i := 0; i < 200; i++ {
		cl.c.Set(ctx, fmt.Sprintf("n:%d", i), 10, 0)
	}
	if err := cl.c.SetShards(ctx, cl.addShard(t, "shard-new", 2)); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("n:%d", i)
		if i%2 == 0 {
			if got := cl.c.Incr(ctx, k).Val(); got != 11 {
				t.Fatalf("INCR %s after the change = %d, want 11 (the moved value + 1)", k, got)
			}
		} else {
			cl.c.Del(ctx, k)
			deleted = append(deleted, k)
		}
	}
	if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range deleted {
		if err := cl.c.Get(ctx, k).Err(); err != redis.Nil {
			t.Fatalf("deleted key %s came back: %v", k, err)
		}
		for name, m := range cl.mini {
			if m.Exists(k) {
				t.Fatalf("deleted key %s is still on %s", k, name)
			}
		}
	}
}

func TestSetShardsUnderConcurrentLoad(t *testing.T) {
	cl := newCluster(t, 1, 1, 1, 1)
	const keys = 300
	// version[i] is the highest version of key i whose write has returned.
	var version [keys]atomic.Int64
	for i := 0; i < keys; i++ {
		cl.c.Set(ctx, fmt.Sprintf("c:%d", i), 0, 0)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, stale atomic.Int64
	var errs []error
	var errMu sync.Mutex
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for n := int64(1); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := int((n*7 + int64(w)*13) % keys)
				// Versions of one key are written by one writer only.
				if i%4 != w {
					continue
				}
				v := version[i].Load() + 1
				if err := cl.c.Set(ctx, fmt.Sprintf("c:%d", i), v, 0).Err(); err != nil {
					fail(err)
					return
				}
				version[i].Store(v)
			}
		})
	}
	for r := 0; r < 4; r++ {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (n*11 + r*5) % keys
				floor := version[i].Load()
				got, err := cl.c.Get(ctx, fmt.Sprintf("c:%d", i)).Int64()
				if err != nil {
					fail(fmt.Errorf("GET c:%d: %w", i, err))
					return
				}
				reads.Add(1)
				if got < floor {
					stale.Add(1)
				}
			}
		})
	}
	waitFor := func(n int64) {
		for deadline := time.Now().Add(10 * time.Second); reads.Load() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(200)
	if err := cl.c.SetShards(ctx, cl.addShard(t, "shard-new", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(reads.Load() + 500)
	if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{BatchSize: 50}); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.SetShards(ctx, cl.shards[1:]); err != nil { // remove one
		t.Fatal(err)
	}
	waitFor(reads.Load() + 500)
	if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{BatchSize: 50}); err != nil {
		t.Fatal(err)
	}
	waitFor(reads.Load() + 200)
	close(stop)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if stale.Load() != 0 {
		t.Fatalf("%d of %d reads returned a value older than a write that had returned", stale.Load(), reads.Load())
	}
	t.Logf("%d reads, none stale, across an add and a remove", reads.Load())
}

func TestRebalanceMovesEverythingAndLosesNothing(t *testing.T) {
	cl := newCluster(t, 1, 1, 1, 1)
	// No traffic: Rebalance alone. Health checks off: on a loaded machine a
	// heartbeat that times out marked a live shard down, and Rebalance
	// refused to move its keys (health has tests of its own).
	opt := redshard.Options{Shards: cl.shards, Health: &redshard.HealthOptions{Disable: true}}
	c, err := redshard.NewClient(&opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	preload(t, c, 3000)
	for i := 0; i < 100; i++ { // some keys with a TTL
		c.Set(ctx, fmt.Sprintf("ttl:%d", i), i, time.Hour)
	}
	_, sumBefore := cl.inventory(t)
	if err := c.SetShards(ctx, cl.addShard(t, "shard-new", 2)); err != nil {
		t.Fatal(err)
	}
	var calls int
	rep, err := c.Rebalance(ctx, redshard.RebalanceOptions{BatchSize: 100, Progress: func(redshard.RebalanceProgress) { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	where, sumAfter := cl.inventory(t)
	if len(where) != 3100 || sumAfter != sumBefore {
		t.Fatalf("after Rebalance: %d keys (want 3100), checksum %x (want %x)", len(where), sumAfter, sumBefore)
	}
	for k, shards := range where {
		if owner, _ := c.ShardFor(k); len(shards) != 1 || shards[0] != owner {
			t.Fatalf("key %s on %v, owner %s", k, shards, owner)
		}
	}
	if rep.Moved == 0 || rep.Failed != 0 || !rep.Verified || rep.Misplaced != 0 || rep.Scanned < 3100 || calls == 0 {
		t.Fatalf("report %+v, %d progress calls", rep, calls)
	}
	for pair := range rep.Moves {
		if pair[1] != "shard-new" {
			t.Fatalf("a key moved from %s to %s: adding a shard must only move keys onto it", pair[0], pair[1])
		}
	}
	if ttl := cl.mini[func() string { s, _ := c.ShardFor("ttl:1"); return s }()].TTL("ttl:1"); ttl <= 0 {
		t.Fatalf("ttl:1 lost its TTL: %v", ttl)
	}
	t.Logf("moved %d of %d keys (%.1f%%), %d bytes", rep.Moved, rep.Scanned, 100*float64(rep.Moved)/float64(rep.Scanned), rep.Bytes)
}

func TestRebalanceResumesAfterInterruption(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	c, err := redshard.NewClient(&redshard.Options{Shards: cl.shards, Health: &redshard.HealthOptions{Disable: true}}) // see TestRebalanceMovesEverythingAndLosesNothing
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	preload(t, c, 3000)
	_, sumBefore := cl.inventory(t)
	if err := c.SetShards(ctx, cl.addShard(t, "shard-new", 1)); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	first, err := c.Rebalance(cctx, redshard.RebalanceOptions{BatchSize: 20, Progress: func(p redshard.RebalanceProgress) {
		if p.Moved > 50 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Rebalance: %v", err)
	}
	second, err := c.Rebalance(ctx, redshard.RebalanceOptions{BatchSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	if first.Moved == 0 || second.Moved == 0 {
		t.Fatalf("the first run moved %d and the second %d: the interruption did not fall half-way", first.Moved, second.Moved)
	}
	where, sumAfter := cl.inventory(t)
	if len(where) != 3000 || sumAfter != sumBefore || second.Misplaced != 0 {
		t.Fatalf("after resuming: %d keys, checksum equal %v, misplaced %d", len(where), sumAfter == sumBefore, second.Misplaced)
	}
	for k, shards := range where {
		if len(shards) != 1 {
			t.Fatalf("key %s duplicated on %v", k, shards)
		}
	}
	t.Logf("first run moved %d before it was cancelled, second run %d", first.Moved, second.Moved)
}

func TestSetShardsRejectsBadListsAndChains(t *testing.T) {
	cl := newCluster(t, 1, 1)
	for _, tc := range []struct {
		shards []redshard.Shard
		want   error
	}{
		{nil, redshard.ErrNoShards},
		{[]redshard.Shard{{Name: "a", Addr: "x:1"}, {Name: "a", Addr: "x:2"}}, redshard.ErrDuplicateName},
		{[]redshard.Shard{{Name: "a"}}, redshard.ErrEmptyAddr},
		{[]redshard.Shard{{Name: "a", Addr: "x:1", Weight: -2}}, redshard.ErrInvalidWeight},
	} {
		if err := cl.c.SetShards(ctx, tc.shards); !errors.Is(err, tc.want) {
			t.Errorf("SetShards(%v) = %v, want %v", tc.shards, err, tc.want)
		}
	}
	if st := cl.c.Stats(); st.Epoch != 1 || len(st.Shards) != 2 {
		t.Fatalf("a rejected list changed the ring: %+v", st)
	}
	if err := cl.c.SetShards(ctx, cl.addShard(t, "c", 1)); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.SetShards(ctx, cl.shards[1:]); !errors.Is(err, redshard.ErrHandoffInProgress) {
		t.Fatalf("second change during handoff: %v", err)
	}
	rep, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{})
	if err != nil || !rep.Finished {
		t.Fatalf("Rebalance = %+v, %v; want the change finished", rep, err)
	}
	if err := cl.c.SetShards(ctx, cl.shards[1:]); err != nil {
		t.Fatalf("change after Rebalance finished the last one: %v", err)
	}
	if st := cl.c.Stats(); st.Epoch != 3 {
		t.Fatalf("epoch = %d, want 3", st.Epoch)
	}
}

func TestSetShardsReusesClients(t *testing.T) {
	cl := newCluster(t, 1, 1)
	_, before := cl.c.ShardFor("k") // whichever shard
	name, _ := cl.c.ShardFor("k")
	if err := cl.c.SetShards(ctx, cl.addShard(t, "z", 1)); err != nil {
		t.Fatal(err)
	}
	after, _ := cl.c.ShardClient(name)
	if after != before {
		t.Fatal("SetShards replaced the client of an unchanged shard")
	}
}

func TestRemovedShardClosesAfterRebalance(t *testing.T) {
	defer redshard.SetRetireGrace(time.Millisecond)()
	cl := newCluster(t, 1, 1, 1)
	preload(t, cl.c, 300)
	removed, _ := cl.c.ShardClient("shard-0")
	if err := cl.c.SetShards(ctx, cl.shards[1:]); err != nil {
		t.Fatal(err)
	}
	if err := removed.Ping(ctx).Err(); err != nil {
		t.Fatalf("the removed shard's client must stay open until its keys are moved: %v", err)
	}
	if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(cl.mini["shard-0"].Keys()); n != 0 {
		t.Fatalf("%d keys left on the removed shard", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for removed.Ping(ctx).Err() != redis.ErrClosed {
		if time.Now().After(deadline) {
			t.Fatal("the removed shard's client was never closed")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRebalanceRateLimitWaits(t *testing.T) {
	cl := newCluster(t, 1, 1)
	c, err := redshard.NewClient(&redshard.Options{Shards: cl.shards, Health: &redshard.HealthOptions{Disable: true}}) // see TestRebalanceMovesEverythingAndLosesNothing
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	preload(t, c, 500)
	if err := c.SetShards(ctx, cl.addShard(t, "shard-new", 1)); err != nil {
		t.Fatal(err)
	}
	// One batch of 10 keys every 10 s: nothing can move before ctx ends.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	rep, err := c.Rebalance(cctx, redshard.RebalanceOptions{BatchSize: 10, Rate: 1})
	if !errors.Is(err, context.DeadlineExceeded) || rep.Moved != 0 {
		t.Fatalf("Rebalance with Rate 1 key/s: moved %d, %v; want nothing moved before the first tick", rep.Moved, err)
	}
	rep, err = c.Rebalance(ctx, redshard.RebalanceOptions{BatchSize: 10, Rate: 1e6})
	if err != nil || rep.Moved == 0 {
		t.Fatalf("Rebalance with a high rate: moved %d, %v", rep.Moved, err)
	}
}

// TestChangeLastsUntilRebalance: a change's handoff has no time limit: a
// moved key is found on its previous owner until Rebalance moves it.
func TestChangeLastsUntilRebalance(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	preload(t, cl.c, 300)
	if err := cl.c.SetShards(ctx, cl.addShard(t, "shard-new", 1)); err != nil {
		t.Fatal(err)
	}
	moved := cl.keysOn(t, "shard-new", "key", 1)[0]
	if !cl.c.Stats().HandoffActive {
		t.Fatal("no handoff after SetShards")
	}
	if v, err := cl.c.Get(ctx, moved).Result(); err != nil || v == "" {
		t.Fatalf("GET %s during the change = %q, %v; want its value from the previous owner", moved, v, err)
	}
	rep, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{})
	if err != nil || !rep.Finished || cl.c.Stats().HandoffActive {
		t.Fatalf("Rebalance = %+v, %v; HandoffActive %v", rep, err, cl.c.Stats().HandoffActive)
	}
}
