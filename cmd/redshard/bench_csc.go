package main

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// goredisCSCPerShardTarget is sharding done by hand with go-redis's own
// client-side cache: one redis.Client per shard, RESP3, with
// Options.ClientSideCacheConfig at go-redis's defaults (10,000 entries per
// client, no MaxStaleness), each key sent to the client of the shard
// redshard's ring names.
//
// Every command passes the client's hooks, cache hits included: go-redis
// consults its cache inside the hooks. So the counting hook counts a hit as
// a command, and the run's report moves the hits the cache itself counted
// (CSCStats().Hits of each shard's client) from the shard's commands to
// served locally (see shardHits).
type goredisCSCPerShardTarget struct {
	handRouted
	clients map[string]*redis.Client
}

func newGoredisCSCPerShardTarget(fl *fleet, cnt *counters) (*goredisCSCPerShardTarget, error) {
	rt, err := newRedshardTarget(fl, nil, false, false, newCounters())
	if err != nil {
		return nil, err
	}
	t := &goredisCSCPerShardTarget{clients: map[string]*redis.Client{}}
	t.handRouted = handRouted{name: "goredis-csc-per-shard", c: rt.c,
		pick: func(key string) redis.Cmdable { return t.client(key) }}
	for _, s := range fl.shards() {
		o := fl.shardOptions(s)
		o.Protocol = 3 // the cache needs RESP3's invalidation pushes
		o.ClientSideCacheConfig = &redis.ClientSideCacheConfig{}
		c := redis.NewClient(o)
		c.AddHook(cnt.hook(s.Name))
		t.clients[s.Name] = c
	}
	return t, nil
}

func (t *goredisCSCPerShardTarget) client(key string) *redis.Client {
	return t.clients[t.c.Ring().Lookup(key)]
}

// shardHits returns, per shard name, the reads the shard client's cache
// answered so far (CSCStats().Hits: a read that waited for another
// caller's fetch of the same key counts too).
func (t *goredisCSCPerShardTarget) shardHits() map[string]int64 {
	out := make(map[string]int64, len(t.clients))
	for name, c := range t.clients {
		out[name] = int64(c.CSCStats().Hits)
	}
	return out
}

func (t *goredisCSCPerShardTarget) cacheHits() (int64, bool) {
	var n int64
	for _, h := range t.shardHits() {
		n += h
	}
	return n, true
}

func (t *goredisCSCPerShardTarget) close() error {
	var errs []error
	for name, c := range t.clients {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("shard %s: %w", name, err))
		}
	}
	errs = append(errs, t.c.Close())
	return errors.Join(errs...)
}
