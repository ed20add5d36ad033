package integration_test

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

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// testFleet is a set of real redis-servers, some of them on the ring.
type testFleet struct {
	servers map[string]*redistest.Server
	all     []redshard.Shard // every server, in start order
}

func newFleet(t *testing.T, n int) *testFleet {
	f := &testFleet{servers: map[string]*redistest.Server{}}
	for i := 0; i < n; i++ {
		s := redistest.Start(t)
		name := fmt.Sprintf("shard-%d", i)
		f.servers[name] = s
		f.all = append(f.all, redshard.Shard{Name: name, Addr: s.Addr()})
	}
	return f
}

// contents returns, for every key on every server, the servers that hold
// it, and a checksum over all keys and their serialized values.
func (f *testFleet) contents(t *testing.T) (map[string][]string, uint32) {
	ctx := context.Background()
	where := map[string][]string{}
	var lines []string
	for name, s := range f.servers {
		c := s.Client(t)
		iter := c.Scan(ctx, 0, "", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			where[k] = append(where[k], name)
			typ := c.Type(ctx, k).Val()
			var v string
			switch typ {
			case "string":
				v = c.Get(ctx, k).Val()
			case "hash":
				m := c.HGetAll(ctx, k).Val()
				var fs []string
				for f, x := range m {
					fs = append(fs, f+"="+x)
				}
				sort.Strings(fs)
				v = strings.Join(fs, ",")
			case "list":
				v = strings.Join(c.LRange(ctx, k, 0, -1).Val(), ",")
			case "set":
				m := c.SMembers(ctx, k).Val()
				sort.Strings(m)
				v = strings.Join(m, ",")
			case "zset":
				v = fmt.Sprint(c.ZRangeWithScores(ctx, k, 0, -1).Val())
			default:
				v = typ
			}
			lines = append(lines, k+"="+v)
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(lines)
	return where, crc32.ChecksumIEEE([]byte(strings.Join(lines, "\n")))
}

// preloadTypes writes n keys of every data type through c.
func preloadTypes(t *testing.T, c *redshard.Client, n int) {
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := 0; i < n; i++ {
		switch i % 5 {
		case 0:
			pipe.Set(ctx, fmt.Sprintf("str:%d", i), i, 0)
		case 1:
			pipe.HSet(ctx, fmt.Sprintf("hash:%d", i), "a", i, "b", i+1)
		case 2:
			pipe.RPush(ctx, fmt.Sprintf("list:%d", i), i, i+1, i+2)
		case 3:
			pipe.SAdd(ctx, fmt.Sprintf("set:%d", i), i, i*2)
		case 4:
			pipe.ZAdd(ctx, fmt.Sprintf("zset:%d", i), redis.Z{Score: float64(i), Member: "m"})
		}
		if i%7 == 0 {
			pipe.Expire(ctx, fmt.Sprintf("str:%d", i), time.Hour)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRebalanceRealRedisAllTypes(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, 5)
	c, err := redshard.NewClient(&redshard.Options{Shards: f.all[:4]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	preloadTypes(t, c, 5000)
	whereBefore, sumBefore := f.contents(t)

	for _, change := range []struct {
		name   string
		shards []redshard.Shard
	}{
		{"add shard-4", f.all},
		{"remove shard-1", append(append([]redshard.Shard(nil), f.all[:1]...), f.all[2:]...)},
		{"re-weight shard-0 to 3", func() []redshard.Shard {
			s := append(append([]redshard.Shard(nil), f.all[:1]...), f.all[2:]...)
			s[0].Weight = 3
			return s
		}()},
	} {
		if err := c.SetShards(ctx, change.shards); err != nil {
			t.Fatalf("%s: %v", change.name, err)
		}
		rep, err := c.Rebalance(ctx, redshard.RebalanceOptions{BatchSize: 200})
		if err != nil {
			t.Fatalf("%s: Rebalance: %v", change.name, err)
		}
		where, sum := f.contents(t)
		if len(where) != len(whereBefore) || sum != sumBefore {
			t.Fatalf("%s: %d keys after (want %d), checksum changed %v", change.name, len(where), len(whereBefore), sum != sumBefore)
		}
		for k, on := range where {
			if owner, _ := c.ShardFor(k); len(on) != 1 || on[0] != owner {
				t.Fatalf("%s: key %s on %v, owner %s", change.name, k, on, owner)
			}
		}
		if rep.Failed != 0 || rep.Misplaced != 0 {
			t.Fatalf("%s: report %+v", change.name, rep)
		}
		t.Logf("%s: moved %d keys (%d bytes) in %v", change.name, rep.Moved, rep.Bytes, rep.Elapsed.Round(time.Millisecond))
	}
	// TTLs survive the moves.
	if ttl := c.TTL(ctx, "str:0").Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("str:0 TTL after the moves: %v", ttl)
	}
}

func TestRebalanceInterruptedRealRedis(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, 4)
	c, err := redshard.NewClient(&redshard.Options{Shards: f.all[:3]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	preloadTypes(t, c, 6000)
	_, sumBefore := f.contents(t)
	if err := c.SetShards(ctx, f.all); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	first, err := c.Rebalance(cctx, redshard.RebalanceOptions{BatchSize: 50, Progress: func(p redshard.RebalanceProgress) {
		if p.Moved >= 300 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Rebalance returned %v", err)
	}
	second, err := c.Rebalance(ctx, redshard.RebalanceOptions{BatchSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	where, sum := f.contents(t)
	if sum != sumBefore || len(where) != 6000 || second.Misplaced != 0 || first.Moved == 0 || second.Moved == 0 {
		t.Fatalf("after resuming: %d keys, checksum equal %v, first moved %d, second moved %d, misplaced %d",
			len(where), sum == sumBefore, first.Moved, second.Moved, second.Misplaced)
	}
	for k, on := range where {
		if len(on) != 1 {
			t.Fatalf("key %s on %v after resuming", k, on)
		}
	}
}

// TestMembershipUnderLoadRealRedis adds, removes and re-weights shards while
// readers and writers run: no read returns a value older than a write that
// had returned before the read started, and no deleted key comes back.
func TestMembershipUnderLoadRealRedis(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, 5)
	c, err := redshard.NewClient(&redshard.Options{Shards: f.all[:4]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const keys = 400
	// Each key has one writer, whose operations are numbered 1, 2, 3, ...:
	// operation s deletes the key when s%17 == 0 and otherwise sets it to s.
	// started[i] is the last operation begun, done[i] the last that returned.
	// A read that starts after done=d and ends before started=e must see the
	// result of an operation in [d, e].
	var started, done [keys]atomic.Int64
	for i := 0; i < keys; i++ {
		c.Set(ctx, fmt.Sprintf("v:%d", i), 0, 0)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, stale, failures atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			seq := make(map[int]int64)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (n*4 + w) % keys
				seq[i]++
				s := seq[i]
				k := fmt.Sprintf("v:%d", i)
				started[i].Store(s)
				var err error
				if s%17 == 0 {
					err = c.Del(ctx, k).Err()
				} else {
					err = c.Set(ctx, k, s, 0).Err()
				}
				if err != nil {
					failures.Add(1)
					return
				}
				done[i].Store(s)
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
				i := (n*7 + r) % keys
				from := done[i].Load()
				got, err := c.Get(ctx, fmt.Sprintf("v:%d", i)).Int64()
				to := started[i].Load()
				reads.Add(1)
				switch {
				case err == redis.Nil:
					deleted := false // some delete in [from, to]?
					for s := from; s <= to && !deleted; s++ {
						deleted = s > 0 && s%17 == 0
					}
					if !deleted {
						stale.Add(1) // a deleted value, or a write lost
					}
				case err != nil:
					failures.Add(1)
				case got < from || got > to:
					stale.Add(1) // an older value, or one resurrected after a delete
				}
			}
		})
	}
	waitReads := func(n int64) {
		for target := reads.Load() + n; reads.Load() < target; {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitReads(2000)
	steps := []struct {
		name   string
		shards []redshard.Shard
	}{
		{"add", f.all},
		{"remove", f.all[1:]},
		{"re-weight", func() []redshard.Shard {
			s := append([]redshard.Shard(nil), f.all[1:]...)
			s[0].Weight = 2
			return s
		}()},
	}
	for _, st := range steps {
		if err := c.SetShards(ctx, st.shards); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		waitReads(2000)
		if _, err := c.Rebalance(ctx, redshard.RebalanceOptions{BatchSize: 100}); err != nil {
			t.Fatalf("%s: Rebalance: %v", st.name, err)
		}
		waitReads(1000)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads across add, remove and re-weight: %d stale or resurrected, %d failed", reads.Load(), stale.Load(), failures.Load())
	if stale.Load() != 0 || failures.Load() != 0 {
		t.Fatal("membership changes broke read-your-writes")
	}
}
