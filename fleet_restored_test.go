package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// registryBackup is a copy of every key of the test registry
// (redshard:registry:test...), by type, with its time to live.
type registryBackup []func(context.Context, redis.Pipeliner)

// backupRegistry copies the test registry's keys (miniredis has no DUMP
// of a hash or a sorted set).
func backupRegistry(t *testing.T, rdb *redis.Client) registryBackup {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "redshard:registry:test*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var b registryBackup
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case "string":
			v, err := rdb.Get(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, func(ctx context.Context, p redis.Pipeliner) { p.Set(ctx, k, v, 0) })
		case "hash":
			v, err := rdb.HGetAll(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, func(ctx context.Context, p redis.Pipeliner) { p.HSet(ctx, k, v) })
		case "zset":
			v, err := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, func(ctx context.Context, p redis.Pipeliner) { p.ZAdd(ctx, k, v...) })
		case "set":
			v, err := rdb.SMembers(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, func(ctx context.Context, p redis.Pipeliner) { p.SAdd(ctx, k, v) })
		default:
			t.Fatalf("registry key %s is a %s: not copied", k, typ)
		}
		if ttl > 0 {
			b = append(b, func(ctx context.Context, p redis.Pipeliner) { p.PExpire(ctx, k, ttl) })
		}
	}
	return b
}

// restoreRegistry replaces the test registry's keys with b's, as a
// restore from that backup would.
func restoreRegistry(t *testing.T, rdb *redis.Client, b registryBackup) {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "redshard:registry:test*").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if len(keys) > 0 {
			p.Del(ctx, keys...)
		}
		for _, put := range b {
			put(ctx, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// splitKeys returns n keys whose owner differs between the first k and
// k+1 servers of f, and n whose owner does not.
func splitKeys(t *testing.T, f *testFleet, k, n int) (moving, staying []string) {
	t.Helper()
	ring := func(m int) *redshard.Client {
		var shards []redshard.Shard
		for i := range m {
			shards = append(shards, redshard.Shard{Name: fmt.Sprintf("s%d", i), Addr: f.addrs[i]})
		}
		c, err := redshard.NewClient(&redshard.Options{Shards: shards, Health: &redshard.HealthOptions{Disable: true}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := ring(k), ring(k+1)
	defer a.Close()
	defer b.Close()
	for i := 0; len(moving) < n || len(staying) < n; i++ {
		key := fmt.Sprintf("restored:%d", i)
		x, _ := a.ShardFor(key)
		y, _ := b.ShardFor(key)
		switch {
		case x != y && len(moving) < n:
			moving = append(moving, key)
		case x == y && len(staying) < n:
			staying = append(staying, key)
		}
	}
	return moving, staying
}

// awaitStatus waits, for at most 15s, until c's FleetStatus satisfies ok.
func awaitStatus(t *testing.T, c *redshard.Client, what string, ok func(redshard.FleetStatus) bool) redshard.FleetStatus {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, _ := c.FleetStatus()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15s the process is not %s: %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFleetRestoredRegistryNewProcess (issue 26, finding 1): the fleet is
// at epoch 2 and the registry is restored from a backup taken at epoch 1.
// A process that starts then must not follow epoch 1 as if it were
// current: it starts fenced (ErrRegistryBehind in FleetStatus.Err), serves
// the keys no change moved and refuses the others, so neither its
// acknowledged writes nor the live process's go missing for the other. The
// next apply restores the registry, and then both see everything.
func TestFleetRestoredRegistryNewProcess(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(2))
	backup := backupRegistry(t, f.rdb)
	a := f.client(t, f.open(t), "a")
	f.apply(t, ctx, f.doc(3))
	moving, staying := splitKeys(t, f, 2, 10)
	for _, k := range append(moving, staying...) {
		if err := a.Set(ctx, k, "a", 0).Err(); err != nil {
			t.Fatalf("A: SET %s: %v", k, err)
		}
	}

	restoreRegistry(t, f.rdb, backup)
	c := f.client(t, f.open(t), "c")
	st, _ := c.FleetStatus()
	if !st.Fenced || !errors.Is(st.Err, redshard.ErrRegistryBehind) {
		t.Errorf("a process started on a registry restored to epoch 1 while the servers' beacons say epoch 2 reports %+v, want fenced with ErrRegistryBehind", st)
	}
	t.Logf("C says: %v", st.Err)

	// Nothing either acknowledges is missing for the other.
	refused := 0
	for _, k := range moving {
		got, err := c.Get(ctx, k).Result()
		switch {
		case err != nil:
			if !errors.Is(err, redshard.ErrFenced) || !errors.Is(err, redshard.ErrRegistryBehind) {
				t.Errorf("C: GET %s: %v, want ErrFenced wrapping ErrRegistryBehind", k, err)
			}
			refused++
		case got != "a":
			t.Errorf("C: GET %s = %q, A acknowledged %q", k, got, "a")
		}
		if err := c.Set(ctx, k, "c", 0).Err(); err != nil {
			if !errors.Is(err, redshard.ErrFenced) || !errors.Is(err, redshard.ErrRegistryBehind) {
				t.Errorf("C: SET %s: %v, want ErrFenced wrapping ErrRegistryBehind", k, err)
			}
			continue
		}
		if got, err := a.Get(ctx, k).Result(); err != nil || got != "c" {
			t.Errorf("C acknowledged SET %s c, A reads %q, %v", k, got, err)
		}
	}
	if refused == 0 {
		t.Errorf("C served all %d keys that epoch 2 moved", len(moving))
	}
	// The keys no change moved are served.
	for _, k := range staying {
		if err := c.Set(ctx, k, "c", 0).Err(); err != nil {
			t.Errorf("C: SET %s, a key no change moved: %v", k, err)
		} else if got, err := a.Get(ctx, k).Result(); err != nil || got != "c" {
			t.Errorf("C acknowledged SET %s c, A reads %q, %v", k, got, err)
		}
	}

	rep := f.apply(t, ctx, f.doc(3))
	if rep.Restored == "" {
		t.Fatalf("apply over the restored registry did not restore it: %+v", rep)
	}
	awaitStatus(t, c, "unfenced after the restore", func(st redshard.FleetStatus) bool {
		return !st.Fenced && st.Err == nil && st.Version == rep.To
	})
	for _, k := range moving {
		if got, err := c.Get(ctx, k).Result(); err != nil || got != "a" {
			t.Errorf("C after the restore: GET %s = %q, %v; want %q", k, got, err, "a")
		}
	}
}

// TestFleetStartBeaconUnreadable: a process that starts while a server of
// its config is down cannot tell whether that server's beacon says the
// registry is behind: it starts fenced, serves the keys of the servers
// whose beacons it read, and ends the fence once the server is back.
func TestFleetStartBeaconUnreadable(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(3))
	f.mini[2].Close()
	c := f.client(t, f.open(t), "c")
	st, _ := c.FleetStatus()
	if !st.Fenced || st.Err == nil || errors.Is(st.Err, redshard.ErrRegistryBehind) {
		t.Fatalf("a process started with a server down reports %+v, want fenced, saying it could not read a beacon", st)
	}
	t.Logf("C says: %v", st.Err)
	served := 0
	for i := range 30 {
		k := fmt.Sprintf("k%d", i)
		if name, _ := c.ShardFor(k); name == "s2" {
			continue
		}
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Errorf("SET %s on a server that is up: %v", k, err)
		}
		served++
	}
	if served == 0 {
		t.Fatal("no key of the 30 lives on a server that is up")
	}
	if err := f.mini[2].Restart(); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, c, "unfenced once the server is back", func(st redshard.FleetStatus) bool { return !st.Fenced && st.Err == nil })
}
