package redshard

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/health"
)

// The heartbeat (internal/health) sees each shard of the current topology
// as a health.Target (NewClient's wiring), a healthTarget: these methods,
// called from the monitor's goroutine. Nothing in the core calls them by
// name.

// healthTarget is one shard of c's current topology as the monitor sees
// it: the shard's backend, and the client that counts and reports its
// changes of state.
type healthTarget struct {
	*shard
	c *client
}

// healthTargets returns the monitor's targets: each shard that may hold
// keys (topology.sources).
func (c *client) healthTargets() []health.Target {
	src := c.top.Load().sources()
	ts := make([]health.Target, len(src))
	for i, s := range src {
		ts[i] = healthTarget{shard: s, c: c}
	}
	return ts
}

// Beat returns the heartbeat counters of s's backend.
func (s *shard) Beat() *health.Beat { return &s.beat }

// Ping sends one heartbeat on the backend's heartbeat connection.
func (s *shard) Ping(ctx context.Context) error {
	hb := s.heartbeatClient()
	if hb == nil {
		return redis.ErrClosed
	}
	return hb.Ping(ctx).Err()
}

// Down reports whether s's backend is marked down.
func (s *shard) Down() bool { return s.down.Load() }

// MarkDown marks the backend down (named as in the current ring), counts
// it and tells Options.Health.OnShardStateChange.
func (s healthTarget) MarkDown(err error) {
	s.markDown(s.Shard, err)
	s.c.notify(s.shard, true, err)
}

// MarkUp marks the backend up (markUp) and tells OnShardStateChange.
func (s healthTarget) MarkUp() error {
	if err := s.c.markUp(s.c.top.Load(), s.backend); err != nil {
		return err
	}
	s.c.notify(s.shard, false, nil)
	return nil
}

// markUp marks b up, with failover once every key written to a stand-in
// during its outage is cleaned (health.Outage.MarkUp).
func (c *client) markUp(top *topology, b *backend) error {
	if top.gutterTTL <= 0 {
		b.down.Store(false)
		return nil
	}
	n, err := b.outage.MarkUp(&b.down, b.heartbeatClient, b.shard.String())
	c.stats.outageKeysCleaned.Add(int64(n))
	return err
}

func (c *client) notify(s *shard, down bool, err error) {
	if down {
		c.stats.shardDowns.Add(1)
	}
	if f := c.cfg.health.OnShardStateChange; f != nil {
		f(ShardStateChange{Shard: s.Name, Addr: s.Addr, Down: down, Err: err, At: time.Now()})
	}
}
