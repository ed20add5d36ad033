package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// cachedWithoutTracking returns a one-shard LocalCache client without
// tracking (only MaxStaleness, an hour, would hide a cached reply), an
// admin client of its server, and a hot key of this test whose value v1
// the client has served from its cache.
func cachedWithoutTracking(t *testing.T) (*redshard.Client, *redis.Client, string) {
	t.Helper()
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
	return c, admin, key
}

// TestHotUncachedReadSupersedesCache: a read the local cache does not
// answer (DUMP, a command it does not cache), alone, in a pipeline or in a
// transaction, returns the key as another process last wrote it; a GET of
// the key that follows must not return the older cached reply (reads never
// go backwards, issue 27). Without tracking nothing else would ever hide
// that reply before MaxStaleness.
func TestHotUncachedReadSupersedesCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		dump func(ctx context.Context, c *redshard.Client, key string) (string, error)
	}{
		{"alone", func(ctx context.Context, c *redshard.Client, key string) (string, error) {
			return c.Dump(ctx, key).Result()
		}},
		{"pipeline", func(ctx context.Context, c *redshard.Client, key string) (string, error) {
			var d *redis.StringCmd
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Ping(ctx)
				d = p.Dump(ctx, key)
				return nil
			})
			if err != nil {
				return "", err
			}
			return d.Result()
		}},
		{"transaction", func(ctx context.Context, c *redshard.Client, key string) (string, error) {
			var d *redis.StringCmd
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				d = p.Dump(ctx, key)
				return nil
			})
			if err != nil {
				return "", err
			}
			return d.Result()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, admin, key := cachedWithoutTracking(t)
			ctx := context.Background()
			if err := admin.Set(ctx, key, "v2", 0).Err(); err != nil {
				t.Fatal(err)
			}
			want, err := admin.Dump(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got, err := tc.dump(ctx, c, key); err != nil || got != want {
				t.Fatalf("DUMP through the client = %q, %v; want v2's %q", got, err, want)
			}
			if v, err := c.Get(ctx, key).Result(); err != nil || v != "v2" {
				t.Fatalf("GET after DUMP returned v2 = %q, %v: the read went backwards", v, err)
			}
		})
	}
}

// TestHotServerReadsSupersedeCache: a read that reaches the server by a
// path other than the hot-key layer's Process must supersede its keys'
// cached replies too, or a GET that follows returns what the read has
// already shown to be gone (reads never go backwards, issue 27): EXISTS of
// several keys on one shard (a split read sent as it is to that shard; an
// MGET of keys cached by admission went the same way), and a GET in a
// Watch transaction, sent on the transaction's connection.
func TestHotServerReadsSupersedeCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		// read reads key through c by the path under test and returns
		// whether it found the key.
		read func(ctx context.Context, c *redshard.Client, key, other string) (bool, error)
	}{
		{"EXISTS on one shard", func(ctx context.Context, c *redshard.Client, key, other string) (bool, error) {
			n, err := c.Exists(ctx, key, other).Result()
			return n == 2, err
		}},
		{"GET in Watch", func(ctx context.Context, c *redshard.Client, key, other string) (bool, error) {
			found := false
			err := c.Watch(ctx, func(tx *redis.Tx) error {
				err := tx.Get(ctx, key).Err()
				found = err == nil
				if err == redis.Nil {
					err = nil
				}
				return err
			}, key)
			return found, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, admin, key := cachedWithoutTracking(t)
			ctx := context.Background()
			other := key + ":other"
			t.Cleanup(func() { _ = admin.Del(context.Background(), other).Err() })
			if err := admin.Set(ctx, other, "o", 0).Err(); err != nil {
				t.Fatal(err)
			}
			// Another process deletes the key; without tracking nothing
			// tells the cache.
			if err := admin.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if found, err := tc.read(ctx, c, key, other); err != nil || found {
				t.Fatalf("the read found %s deleted: %v, %v; want it gone", key, found, err)
			}
			if v, err := c.Get(ctx, key).Result(); err != redis.Nil {
				t.Fatalf("GET after a read saw the key gone = %q, %v: the read went backwards", v, err)
			}
		})
	}
}
