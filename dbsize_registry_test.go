package redshard_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/registry"
)

// TestDBSizeWithoutRegistryKeys: DBSIZE counted the registry's own keys
// when the registry shares a data server (docs/operations.md allows it).
func TestDBSizeWithoutRegistryKeys(t *testing.T) {
	cl := newCluster(t, 1, 1)
	rdb := redis.NewClient(&redis.Options{Addr: cl.mini["shard-0"].Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	reg := registry.NewRedis(rdb, "redshard:registry:shared")
	t.Cleanup(func() { _ = reg.Close() })
	doc := []byte(fmt.Sprintf(`{"shards": [{"name": "shard-0", "addr": %q}, {"name": "shard-1", "addr": %q}]}`, cl.shards[0].Addr, cl.shards[1].Addr))
	first := registry.Initial(doc)
	if err := reg.Publish(ctx, registry.Config{}, first); err != nil {
		t.Fatal(err)
	}
	if err := reg.Heartbeat(ctx, registry.Member{ID: "m"}); err != nil {
		t.Fatal(err)
	}
	lock, err := reg.Lock(ctx, "driver", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Unlock(ctx) }()
	preload(t, cl.c, 5)
	internal := 0
	for _, m := range cl.mini {
		for _, k := range m.Keys() {
			if strings.HasPrefix(k, redshard.InternalKeyPrefix) {
				internal++
			}
		}
	}
	if internal < 5 { // config, members, member docs, lock, the index
		t.Fatalf("only %d redshard: keys on the servers", internal)
	}
	if got, err := cl.c.DBSize(ctx).Result(); err != nil || got != 5 {
		t.Fatalf("DBSIZE = %d, %v; want 5 (%d redshard: keys on the servers)", got, err, internal)
	}
	// A registry key that is gone is not subtracted any more.
	if err := reg.Leave(ctx, registry.Member{ID: "m"}); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.c.DBSize(ctx).Result(); err != nil || got != 5 {
		t.Fatalf("DBSIZE after the last member left = %d, %v; want 5", got, err)
	}
	if keys := cl.c.Keys(ctx, "*").Val(); len(keys) != 5 {
		t.Fatalf("KEYS * = %v, want the 5 keys", keys)
	}
}
