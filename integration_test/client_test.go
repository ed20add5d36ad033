package integration_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/conformance"
	"github.com/redshard/redshard/internal/redistest"
)

// startShards starts one redis-server per weight and a redshard client
// over them, closed when the test ends.
func startShards(t *testing.T, weights ...float64) (*redshard.Client, []*redistest.Server) {
	t.Helper()
	var shards []redshard.Shard
	var servers []*redistest.Server
	for i, w := range weights {
		s := redistest.Start(t)
		servers = append(servers, s)
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: s.Addr(), Weight: w})
	}
	c, err := redshard.NewClient(&redshard.Options{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, servers
}

// TestDropInConformanceRealRedis runs the conformance table through a plain
// go-redis client on one redis-server and through redshard on four.
func TestDropInConformanceRealRedis(t *testing.T) {
	ctx := context.Background()
	single := redistest.Start(t).Client(t)
	c, _ := startShards(t, 1, 1, 2, 1)
	for _, st := range conformance.Steps() {
		want := st.Run(ctx, single)
		got := st.Run(ctx, c)
		if got != want {
			t.Errorf("%s:\n  single server: %s\n  redshard:      %s", st.Name, want, got)
		}
	}
}

// TestKeysLiveOnTheirOwner writes through redshard and checks each real
// server holds exactly the keys the ring gives it.
func TestKeysLiveOnTheirOwner(t *testing.T) {
	ctx := context.Background()
	c, _ := startShards(t, 1, 2, 1)
	const n = 3000
	pipe := c.Pipeline()
	for i := 0; i < n; i++ {
		pipe.Set(ctx, fmt.Sprintf("k:%d", i), i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, s := range c.Shards() {
		sc, _ := c.ShardClient(s.Name)
		iter := sc.Scan(ctx, 0, "", 500).Iterator()
		for iter.Next(ctx) {
			total++
			if owner, _ := c.ShardFor(iter.Val()); owner != s.Name {
				t.Fatalf("key %s is on %s, owner is %s", iter.Val(), s.Name, owner)
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if total != n {
		t.Fatalf("found %d keys on the servers, wrote %d", total, n)
	}
	if got := c.DBSize(ctx).Val(); got != n {
		t.Fatalf("DBSIZE = %d", got)
	}
}

func TestCrossShardRefusedOnRealRedis(t *testing.T) {
	ctx := context.Background()
	c, _ := startShards(t, 1, 1)
	var a, b string
	for i := 0; a == "" || b == ""; i++ {
		k := fmt.Sprint("key", i)
		switch s, _ := c.ShardFor(k); s {
		case "shard-0":
			a = k
		case "shard-1":
			b = k
		}
	}
	c.Set(ctx, a, "1", 0)
	if err := c.Rename(ctx, a, b).Err(); !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("RENAME across shards: %v", err)
	}
	if err := c.Eval(ctx, "return redis.call('get', KEYS[1])", []string{a, b}).Err(); !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("EVAL across shards: %v", err)
	}
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, a)
		p.Incr(ctx, b)
		return nil
	})
	if !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("transaction across shards: %v", err)
	}
	if got := c.Get(ctx, a).Val(); got != "1" {
		t.Fatalf("refused transaction changed %s to %s", a, got)
	}
}
