package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/registry"
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

// TestSentinelShardInFleet: a fleet whose registry document names a
// Sentinel shard by its master and Sentinels. The follower connects with
// its own settings (here DB 3, which the document does not carry) through
// the primary Sentinel reports, a change of the fleet moves keys off the
// shard, and the follower keeps the shard's client across the change.
func TestSentinelShardInFleet(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t)
	sentinel := redistest.Start(t, redistest.Sentinel("cache-b-primary", primary.Addr()))
	plainA, plainC := redistest.Start(t), redistest.Start(t)
	regSrv := redistest.Start(t)
	open := func() registry.Registry {
		reg, err := registry.NewRedisOptions(regSrv.Client(t), "redshard:registry:sentinel",
			&registry.Options{PollInterval: 50 * time.Millisecond, MemberTTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Close() })
		return reg
	}
	doc := func(plain ...string) json.RawMessage {
		shards := []map[string]any{{"name": "cache-b", "sentinel": map[string]any{"master": "cache-b-primary", "addrs": []string{sentinel.Addr()}}}}
		for i, a := range plain {
			shards = append(shards, map[string]any{"name": fmt.Sprintf("plain-%d", i), "addr": a})
		}
		b, _ := json.Marshal(map[string]any{"shards": shards})
		return b
	}
	so := &redis.Options{DB: 3}
	var built atomic.Int32
	// No heartbeat, whose client NewFailoverShardClient would build too:
	// built counts command clients, those with the fleet's admission (the
	// short-lived clients that read the shard's beacon when the process
	// starts or catches up have none).
	follower := &redshard.Options{Registry: open(), ShardOptions: so, Fleet: &redshard.FleetOptions{MemberID: "web-1"},
		Health: &redshard.HealthOptions{Disable: true},
		NewFailoverShardClient: func(_ redshard.Shard, opt *redis.FailoverOptions) *redis.Client {
			if opt.OnConnect != nil {
				built.Add(1)
			}
			return redis.NewFailoverClient(opt)
		}}
	apply := func(d json.RawMessage) {
		t.Helper()
		if _, err := fleet.Apply(ctx, open(), d, fleet.ApplyOptions{Driver: "test", Client: &redshard.Options{ShardOptions: so}}); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	apply(doc(plainA.Addr()))
	c, err := redshard.NewClient(follower)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const n = 200
	for i := range n {
		if err := c.Set(ctx, fmt.Sprint("k", i), i, 0).Err(); err != nil {
			t.Fatalf("SET through the Sentinel shard: %v", err)
		}
	}
	db3 := func(s *redistest.Server) int64 {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr(), DB: 3})
		defer cl.Close()
		return int64(len(cl.Keys(ctx, "k*").Val())) // not redshard's own keys (the beacon)
	}
	onPrimary, onPlain := db3(primary), db3(plainA)
	if onPrimary+onPlain != n || onPrimary == 0 || onPlain == 0 {
		t.Fatalf("DB 3: the primary holds %d keys and the plain shard %d; want %d in all, on both", onPrimary, onPlain, n)
	}

	apply(doc(plainA.Addr(), plainC.Addr()))
	for i := range n {
		k := fmt.Sprint("k", i)
		if got, err := c.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("after the change: GET %s = %d, %v", k, got, err)
		}
	}
	if after := db3(primary); after >= onPrimary {
		t.Errorf("the primary holds %d keys after a shard was added, %d before: none moved off it", after, onPrimary)
	}
	if got := built.Load(); got != 1 {
		t.Errorf("%d clients built for the Sentinel shard, want 1: it was rebuilt during the change", got)
	}
}
