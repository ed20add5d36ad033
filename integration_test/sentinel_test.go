package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// TestSentinelShard puts a Sentinel-managed primary on the ring next to a
// plain server: keys it owns land on the primary Sentinel names.
func TestSentinelShard(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t)
	sentinel := redistest.Start(t, redistest.Sentinel("cache-b-primary", primary.Addr()))
	plain := redistest.Start(t)
	c, err := redshard.NewClient(&redshard.Options{Shards: []redshard.Shard{
		{Name: "cache-a", Addr: plain.Addr()},
		{Name: "cache-b", Failover: &redis.FailoverOptions{
			MasterName: "cache-b-primary", SentinelAddrs: []string{sentinel.Addr()},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 200
	for i := 0; i < n; i++ {
		if err := c.Set(ctx, fmt.Sprint("k", i), i, 0).Err(); err != nil {
			t.Fatalf("SET through the Sentinel shard: %v", err)
		}
	}
	onPrimary := primary.Client(t).DBSize(ctx).Val()
	onPlain := plain.Client(t).DBSize(ctx).Val()
	if onPrimary+onPlain != n || onPrimary == 0 || onPlain == 0 {
		t.Fatalf("primary holds %d keys and the plain shard %d; want %d in all, on both", onPrimary, onPlain, n)
	}
	if got := c.Stats(); got.Shards[1].Down {
		t.Fatalf("the Sentinel shard is marked down: %+v", got)
	}
	if s := fmt.Sprint(c.Shards()); !strings.Contains(s, `cache-b(sentinel master "cache-b-primary")`) {
		t.Fatalf("Shards() = %s", s)
	}
}
