package main

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// handRouted is the shell of a peer that places keys by hand with
// redshard's ring and sends each GET and SET to one per-shard go-redis
// client (an AutoPipeliner, a client with its own cache): pick returns the
// key's. c is the redshard client used for preloading and placement.
type handRouted struct {
	name string // the --compare name, for errors
	c    *redshard.Client
	pick func(key string) redis.Cmdable
}

func (t *handRouted) cmdable() redis.Cmdable { return t.c }
func (t *handRouted) kv() kv                 { return t }

func (t *handRouted) Get(ctx context.Context, key string) *redis.StringCmd {
	return t.pick(key).Get(ctx, key)
}

func (t *handRouted) Set(ctx context.Context, key string, value interface{}, exp time.Duration) *redis.StatusCmd {
	return t.pick(key).Set(ctx, key, value, exp)
}

// MGet is not routed by hand (bench refuses --mget with these systems).
func (t *handRouted) MGet(ctx context.Context, keys ...string) *redis.SliceCmd {
	cmd := redis.NewSliceCmd(ctx)
	cmd.SetErr(errors.New(t.name + " does not split MGET"))
	return cmd
}

func (t *handRouted) addShard(context.Context, redshard.Shard) error {
	return errors.New(t.name + " has a fixed set of shards")
}

func (t *handRouted) hotStats() *redshard.HotStats { return nil }
