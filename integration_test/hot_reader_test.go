package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/redistest"
)

// TestHotReaderClosedByServerDropsCache is issue 27's second defect: the
// server closes the connection that made the tracked reads (CLIENT KILL
// TYPE normal, or by its ID as the idle timeout or client eviction would),
// forgetting what it tracked; another client then writes the cached key.
// The cache must stop serving the old value promptly (well before
// MaxStaleness, an hour here), though no command of the client ever
// touches the killed connection again: every read is a cache hit.
func TestHotReaderClosedByServerDropsCache(t *testing.T) {
	for _, kill := range []string{"client kill type normal", "idle timeout"} {
		t.Run(kill, func(t *testing.T) {
			s := redistest.Start(t)
			admin := s.Client(t)
			ctx := context.Background()
			key := fmt.Sprintf("reader-closed:%d", time.Now().UnixNano())
			t.Cleanup(func() { _ = admin.Del(context.Background(), key).Err() })
			if err := admin.Set(ctx, key, "v1", 0).Err(); err != nil {
				t.Fatal(err)
			}
			t0 := time.Unix(1_700_000_000, 0)
			c, err := redshard.NewClient(&redshard.Options{
				Shards: []redshard.Shard{{Name: "s", Addr: s.Addr()}},
				HotKeys: &redshard.HotKeyOptions{
					Mitigation:   redshard.LocalCache,
					MaxStaleness: time.Hour,
					Tracking:     redshard.TrackingOn,
					Detector:     &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: func() time.Time { return t0 }},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			warm(t, c, key)
			eventually(t, "a cache hit of v1", func() bool {
				before := c.Stats().Hot.CacheHits
				v, err := c.Get(ctx, key).Result()
				return err == nil && v == "v1" && c.Stats().Hot.CacheHits > before
			})

			switch kill {
			case "client kill type normal":
				if err := admin.Do(ctx, "client", "kill", "type", "normal").Err(); err != nil {
					t.Fatal(err)
				}
			default:
				ids := readerIDs(t, admin)
				if len(ids) == 0 {
					t.Fatal("no connection of the server ran the tracked GET")
				}
				if err := admin.ConfigSet(ctx, "timeout", "1").Err(); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the server to close the idle reading connections", func() bool {
					return len(readerIDs(t, admin, ids...)) == 0
				})
			}
			if err := admin.Set(ctx, key, "v2", 0).Err(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the write after the reader's close to be read", func() bool {
				v, err := c.Get(ctx, key).Result()
				return err == nil && v == "v2"
			})
		})
	}
}

// readerIDs returns the IDs of the server's connections whose last
// command was GET or PTTL: those of the client's tracked reads (a GET and
// the PTTL after it), since every GET of
// the test but the first is a cache hit. With among, only those of its IDs
// that are still connected.
func readerIDs(t *testing.T, admin *redis.Client, among ...int64) []int64 {
	t.Helper()
	return clientIDs(t, admin, func(id int64, fields []string) bool {
		if among != nil {
			return slices.Contains(among, id)
		}
		// A tracked read's last command is the PTTL after its GET.
		return slices.Contains(fields, "cmd=get") || slices.Contains(fields, "cmd=pttl")
	})
}

// clientIDs returns the IDs of admin's server's connections whose CLIENT
// LIST line (its fields) keep accepts.
func clientIDs(t *testing.T, admin *redis.Client, keep func(id int64, fields []string) bool) []int64 {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, line := range strings.Split(list, "\n") {
		var id int64
		if _, err := fmt.Sscanf(line, "id=%d", &id); err != nil {
			continue
		}
		if keep(id, strings.Fields(line)) {
			ids = append(ids, id)
		}
	}
	return ids
}
