package redshard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// TestTimeInOneShardPipeline: TIME (a PerServer command) in a pipeline or
// transaction whose keys all live on one shard runs on that shard, as
// throttled's go-redis store sends TIME and GET together; with keys on two
// shards, or no key, it is refused with ErrNotSharded, as alone.
func TestTimeInOneShardPipeline(t *testing.T) {
	cl := newCluster(t, 1, 1)
	clock := map[string]time.Time{
		"shard-0": time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC),
		"shard-1": time.Date(2002, 2, 2, 0, 0, 0, 0, time.UTC),
	}
	for name, at := range clock {
		cl.mini[name].SetTime(at)
	}
	k0 := cl.keysOn(t, "shard-0", "k", 1)[0]
	k1 := cl.keysOn(t, "shard-1", "k", 1)[0]
	cl.c.Set(ctx, k1, "v", 0)

	for _, tc := range []struct {
		name      string
		pipelined func(redis.Cmdable, func(redis.Pipeliner) error) ([]redis.Cmder, error)
	}{
		{"pipeline", func(c redis.Cmdable, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
			return c.Pipelined(ctx, fn)
		}},
		{"transaction", func(c redis.Cmdable, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
			return c.TxPipelined(ctx, fn)
		}},
	} {
		for _, key := range []string{k0, k1} {
			owner, _ := cl.c.ShardFor(key)
			var now *redis.TimeCmd
			var get *redis.StringCmd
			_, err := tc.pipelined(cl.c, func(p redis.Pipeliner) error {
				now = p.Time(ctx)
				get = p.Get(ctx, key)
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("%s: TIME and GET %s: %v", tc.name, key, err)
			}
			if got := now.Val(); !got.Equal(clock[owner]) {
				t.Errorf("%s: TIME next to GET %s = %v, want %s's clock %v", tc.name, key, got, owner, clock[owner])
			}
			if key == k1 && get.Val() != "v" {
				t.Errorf("%s: GET %s = %q, %v", tc.name, key, get.Val(), get.Err())
			}
		}
	}

	// Keys on two shards: no one server's clock is the answer.
	cmds, _ := cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, k0)
		p.Time(ctx)
		p.Get(ctx, k1)
		return nil
	})
	if err := cmds[1].Err(); !errors.Is(err, redshard.ErrNotSharded) {
		t.Errorf("TIME in a pipeline over two shards: %v, want ErrNotSharded", err)
	}
	if err := cmds[2].Err(); err != nil {
		t.Errorf("GET next to a refused TIME: %v", err)
	}
	// No key at all.
	cmds, _ = cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Ping(ctx)
		p.Time(ctx)
		return nil
	})
	if err := cmds[1].Err(); !errors.Is(err, redshard.ErrNotSharded) {
		t.Errorf("TIME in a pipeline with no key: %v, want ErrNotSharded", err)
	}
	if _, err := cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Time(ctx)
		return nil
	}); !errors.Is(err, redshard.ErrNotSharded) {
		t.Errorf("TIME in a transaction with no key: %v, want ErrNotSharded", err)
	}
	// Alone it is refused, as before.
	if err := cl.c.Time(ctx).Err(); !errors.Is(err, redshard.ErrNotSharded) {
		t.Errorf("TIME alone on two shards: %v, want ErrNotSharded", err)
	}
}
