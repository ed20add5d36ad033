package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/registry"
)

// TestApplySentinelShard: redshard apply publishes a file with a Sentinel
// shard, real Sentinel in front of a real primary; the driver writes the
// shard's beacon through Sentinel with the file's settings (DB 3), status
// names the shard by its master, and a follower on the registry serves
// its keys. Skipped without redis-server.
func TestApplySentinelShard(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t)
	sentinel := redistest.Start(t, redistest.Sentinel("cache-s", primary.Addr()))
	plain := redistest.Start(t)
	regm := miniredis.RunT(t)
	url := "redis://" + regm.Addr() + "/" + testRegistryName
	cfg := writeFile(t, "fleet.json", fmt.Sprintf(`{"shards": [
  {"name": "a", "addr": %q},
  {"name": "s", "sentinel": {"master": "cache-s", "addrs": [%q]}, "weight": 2}
], "db": 3, "health": {"disable": true}}`, plain.Addr(), sentinel.Addr()))

	code, out, errOut := runCmd(t, "apply", "--registry", url, "--config", cfg, "--yes", "--no-progress", "--driver", "op")
	if code != exitOK {
		t.Fatalf("apply: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, `s      sentinel master "cache-s"`) || !strings.Contains(out, "applied: none -> epoch 1 stable") {
		t.Errorf("apply:\n%s", out)
	}
	// go-redis's routine Sentinel lines ("sentinel: selected addr=...")
	// are no failure, and are not summarized as one.
	if strings.Contains(errOut, "go-redis logged") {
		t.Errorf("apply's stderr summarizes go-redis's routine lines as if they failed:\n%s", errOut)
	}
	db3 := redis.NewClient(&redis.Options{Addr: primary.Addr(), DB: 3})
	defer db3.Close()
	if n, err := db3.Exists(ctx, "redshard:beacon").Result(); err != nil || n != 1 {
		t.Errorf("the beacon on the Sentinel shard's primary, DB 3: %d, %v; want it written through Sentinel", n, err)
	}

	code, out, errOut = runCmd(t, "status", "--registry", url)
	if code != exitOK || !strings.Contains(out, `s      sentinel master "cache-s"       2`) {
		t.Errorf("status: exit %d, stderr %q:\n%s", code, errOut, out)
	}

	opt, err := redshard.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: regm.Addr()})
	defer rdb.Close()
	reg, err := registry.NewRedisOptions(rdb, testRegistryName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	c, err := redshard.NewClient(&redshard.Options{Registry: reg, ShardOptions: opt.ShardOptions,
		FailoverShardOptions: opt.FailoverShardOptions, Health: opt.Health})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	onS := 0
	for i := range 50 {
		k := fmt.Sprint("k", i)
		if err := c.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if s, _ := c.ShardFor(k); s == "s" {
			onS++
			if got, err := db3.Get(ctx, k).Int(); err != nil || got != i {
				t.Errorf("%s on the primary, DB 3: %d, %v", k, got, err)
			}
		}
	}
	if onS == 0 {
		t.Fatal("no key on the Sentinel shard: the test proves nothing")
	}
}
