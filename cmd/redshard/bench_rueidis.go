package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redshard/redshard"
)

// rueidisPerShardTarget is sharding done by hand with rueidis: one rueidis
// client per shard (client-side caching off, so every read reaches its
// server), each key sent to the client of the shard redshard's ring names.
// rueidis pipelines the commands of concurrent callers on its own. Commands
// are counted by calling the shard's counting hook around each one, as the
// go-redis systems' hooks count theirs.
type rueidisPerShardTarget struct {
	c       *redshard.Client // preloading, placement
	clients map[string]rueidis.Client
	count   map[string]redis.ProcessHook
}

func newRueidisPerShardTarget(fl *fleet, cnt *counters) (*rueidisPerShardTarget, error) {
	rt, err := newRedshardTarget(fl, nil, false, false, newCounters())
	if err != nil {
		return nil, err
	}
	t := &rueidisPerShardTarget{c: rt.c, clients: map[string]rueidis.Client{}, count: map[string]redis.ProcessHook{}}
	for _, s := range fl.shards() {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true})
		if err != nil {
			_ = t.close()
			return nil, fmt.Errorf("rueidis client to %s: %w", s.Addr, err)
		}
		t.clients[s.Name] = rc
		t.count[s.Name] = cnt.hook(s.Name).ProcessHook(func(context.Context, redis.Cmder) error { return nil })
	}
	return t, nil
}

func (t *rueidisPerShardTarget) cmdable() redis.Cmdable { return t.c }
func (t *rueidisPerShardTarget) kv() kv                 { return t }

func (t *rueidisPerShardTarget) Get(ctx context.Context, key string) *redis.StringCmd {
	shard := t.c.Ring().Lookup(key)
	rc := t.clients[shard]
	cmd := redis.NewStringCmd(ctx, "get", key)
	_ = t.count[shard](ctx, cmd)
	v, err := rc.Do(ctx, rc.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		err = redis.Nil
	}
	if err != nil {
		cmd.SetErr(err)
	} else {
		cmd.SetVal(v)
	}
	return cmd
}

func (t *rueidisPerShardTarget) Set(ctx context.Context, key string, value interface{}, exp time.Duration) *redis.StatusCmd {
	shard := t.c.Ring().Lookup(key)
	rc := t.clients[shard]
	cmd := redis.NewStatusCmd(ctx, "set", key, value)
	_ = t.count[shard](ctx, cmd)
	s := rc.B().Set().Key(key).Value(fmt.Sprint(value))
	var err error
	if exp > 0 {
		err = rc.Do(ctx, s.Px(exp).Build()).Error()
	} else {
		err = rc.Do(ctx, s.Build()).Error()
	}
	if err != nil {
		cmd.SetErr(err)
	} else {
		cmd.SetVal("OK")
	}
	return cmd
}

// MGet is not routed by hand (bench refuses --mget with this system).
func (t *rueidisPerShardTarget) MGet(ctx context.Context, keys ...string) *redis.SliceCmd {
	cmd := redis.NewSliceCmd(ctx)
	cmd.SetErr(errors.New("rueidis-per-shard does not split MGET"))
	return cmd
}

func (t *rueidisPerShardTarget) addShard(context.Context, redshard.Shard) error {
	return errors.New("rueidis-per-shard has a fixed set of shards")
}

func (t *rueidisPerShardTarget) hotStats() *redshard.HotStats { return nil }

func (t *rueidisPerShardTarget) close() error {
	for _, rc := range t.clients {
		rc.Close()
	}
	return t.c.Close()
}
