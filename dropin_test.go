package redshard_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A server's error that comes back through a split, a fan-out or a
// pipeline is still a redis.Error, with the server's prefix first and the
// shard named after it.
func TestShardErrorKeepsRedisErrorType(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 1, 1)
	a, b := cl.twoShardKeys(t)
	bad := cl.mini["shard-1"]

	cases := []struct {
		name string
		run  func() error
	}{
		{"MGET split", func() error { return cl.c.MGet(ctx, a, b).Err() }},
		{"MSET split", func() error { return cl.c.MSet(ctx, a, 1, b, 2).Err() }},
		{"DEL split", func() error { return cl.c.Del(ctx, a, b).Err() }},
		{"EXISTS split", func() error { return cl.c.Exists(ctx, a, b).Err() }},
		{"FLUSHDB fan-out", func() error { return cl.c.FlushDB(ctx).Err() }},
		{"DBSIZE fan-out", func() error { return cl.c.DBSize(ctx).Err() }},
		{"KEYS fan-out", func() error { return cl.c.Keys(ctx, "*").Err() }},
		{"SCAN", func() error {
			_, cur, err := cl.c.Scan(ctx, 0, "", 10).Result()
			for err == nil && cur != 0 {
				_, cur, err = cl.c.Scan(ctx, cur, "", 10).Result()
			}
			return err
		}},
		{"Do MGET split", func() error { return cl.c.Do(ctx, "mget", a, b).Err() }},
		{"pipeline split", func() error {
			var mget *redis.SliceCmd
			_, _ = cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
				mget = p.MGet(ctx, a, b)
				return nil
			})
			return mget.Err()
		}},
		{"pipeline direct", func() error {
			var get *redis.StringCmd
			_, _ = cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
				get = p.Get(ctx, b)
				return nil
			})
			return get.Err()
		}},
	}
	bad.SetError("WRONGTYPE Operation against a key holding the wrong kind of value")
	defer bad.SetError("")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "WRONGTYPE ") {
				t.Errorf("error %q does not start with the server's prefix", err)
			}
			if _, ok := err.(redis.Error); !ok {
				t.Errorf("err.(redis.Error) fails for %T %q", err, err)
			}
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				t.Errorf("errors.As(redis.Error) fails for %q", err)
			}
			if !redis.HasErrorPrefix(err, "WRONGTYPE") {
				t.Errorf("redis.HasErrorPrefix fails for %q", err)
			}
			if strings.Contains(tc.name, "split") || strings.Contains(tc.name, "fan-out") || tc.name == "SCAN" {
				if !strings.Contains(err.Error(), "shard-1") {
					t.Errorf("error %q does not name the shard", err)
				}
			}
		})
	}
}
