package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redshard/redshard"
)

// TestHotUncachedReadSupersedesCache: a read the local cache does not
// answer (DUMP, a command it does not cache) returns the key as another
// process last wrote it; a GET of the key that follows must not return
// the older cached reply (reads never go backwards, issue 27). Without
// tracking nothing else would ever hide that reply before MaxStaleness.
func TestHotUncachedReadSupersedesCache(t *testing.T) {
	c, servers := hotClient(t, 1, redshard.HotKeyOptions{
		Mitigation: redshard.LocalCache, MaxStaleness: time.Hour, Tracking: redshard.TrackingOff,
	})
	admin := servers["shard-0"].Client(t)
	ctx := context.Background()
	key := fmt.Sprintf("supersede:%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = admin.Del(context.Background(), key).Err() })
	if err := admin.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	warm(t, c, key)
	for i := 0; i < 2; i++ { // a miss that fills, then a hit
		if v, err := c.Get(ctx, key).Result(); err != nil || v != "v1" {
			t.Fatalf("GET = %q, %v; want v1", v, err)
		}
	}
	if c.Stats().Hot.CacheHits == 0 {
		t.Fatal("v1 was never served from the cache: the test proves nothing")
	}
	if err := admin.Set(ctx, key, "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	want, err := admin.Dump(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Dump(ctx, key).Result(); err != nil || got != want {
		t.Fatalf("DUMP through the client = %q, %v; want v2's %q", got, err, want)
	}
	if v, err := c.Get(ctx, key).Result(); err != nil || v != "v2" {
		t.Fatalf("GET after DUMP returned v2 = %q, %v: the read went backwards", v, err)
	}
}
