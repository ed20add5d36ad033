package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redshard/redshard"
)

// rueidisCacheTTL is the client-side TTL of rueidis-csc-per-shard's
// DoCache: how long rueidis may serve a cached reply without hearing from
// the server (the server's invalidations end it sooner).
const rueidisCacheTTL = time.Minute

// rueidisPerShardTarget is sharding done by hand with rueidis: one rueidis
// client per shard, each key sent to the client of the shard redshard's
// ring names. rueidis pipelines the commands of concurrent callers on its
// own. Without cache (rueidis-per-shard) client-side caching is off and
// every read reaches its server; with cache (rueidis-csc-per-shard) reads
// are DoCache with rueidisCacheTTL, under rueidis's default CLIENT TRACKING
// (OPTIN: each cached read is preceded by CLIENT CACHING YES).
//
// Commands are counted by calling the shard's counting hook around each
// one, as the go-redis systems' hooks count theirs, except a read rueidis
// answered from its cache (RedisResult.IsCacheHit), which hands nothing to
// the server and is counted in hits instead. A cache miss is counted as one
// command, though rueidis sends it as CLIENT CACHING YES, MULTI, PTTL, GET
// and EXEC.
type rueidisPerShardTarget struct {
	c       *redshard.Client // preloading, placement
	cache   bool
	clients map[string]rueidis.Client
	count   map[string]redis.ProcessHook
	hits    atomic.Int64 // reads answered by rueidis's cache
}

func newRueidisPerShardTarget(fl *fleet, cnt *counters, cache bool) (*rueidisPerShardTarget, error) {
	rt, err := newRedshardTarget(fl, nil, false, false, newCounters())
	if err != nil {
		return nil, err
	}
	t := &rueidisPerShardTarget{c: rt.c, cache: cache, clients: map[string]rueidis.Client{}, count: map[string]redis.ProcessHook{}}
	for _, s := range fl.shards() {
		o := fl.shardOptions(s)
		rc, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:  []string{s.Addr},
			Username:     o.Username,
			Password:     o.Password,
			SelectDB:     o.DB,
			TLSConfig:    o.TLSConfig,
			DisableCache: !cache,
		})
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
	var res rueidis.RedisResult
	if t.cache {
		res = rc.DoCache(ctx, rc.B().Get().Key(key).Cache(), rueidisCacheTTL)
	} else {
		res = rc.Do(ctx, rc.B().Get().Key(key).Build())
	}
	if res.IsCacheHit() {
		t.hits.Add(1)
	} else {
		_ = t.count[shard](ctx, cmd)
	}
	v, err := res.ToString()
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
	cmd.SetErr(errors.New("rueidis per shard does not split MGET"))
	return cmd
}

func (t *rueidisPerShardTarget) addShard(context.Context, redshard.Shard) error {
	return errors.New("rueidis per shard has a fixed set of shards")
}

func (t *rueidisPerShardTarget) hotStats() *redshard.HotStats { return nil }

// cacheHits returns the reads rueidis answered from its cache so far;
// without cache, false.
func (t *rueidisPerShardTarget) cacheHits() (int64, bool) {
	if !t.cache {
		return 0, false
	}
	return t.hits.Load(), true
}

func (t *rueidisPerShardTarget) close() error {
	for _, rc := range t.clients {
		rc.Close()
	}
	return t.c.Close()
}
