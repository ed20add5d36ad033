package redshard

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/health"
)

// HealthOptions configures the per-shard heartbeat. The zero value is
// usable; a nil Options.Health means the defaults below. Values too small
// to mean anything (an Interval or Timeout under 10ms) are errors.
type HealthOptions struct {
	// Disable turns the heartbeat off: shards are never marked down and a
	// dead shard's commands fail however go-redis fails them (dial errors,
	// timeouts).
	Disable bool

	// Interval between heartbeats (a PING on a dedicated connection per
	// shard). At least 10ms. Default 500ms. Pub/Sub probes with it and
	// Timeout (at least 500ms and 1s there): a shard's subscriber
	// connection that has received nothing for Interval sends a PING, and
	// is replaced (the subscriber told) if nothing arrives within Timeout;
	// with Disable, 3s and 3s.
	Interval time.Duration

	// Timeout of one heartbeat: a shard that does not answer within it has
	// failed the heartbeat (a frozen host is detected by this, not by a
	// pool timeout). At least 10ms. Default Interval.
	Timeout time.Duration

	// FailureThreshold is the number of consecutive failed heartbeats that
	// mark a shard down. Default 2.
	FailureThreshold int

	// RecoveryThreshold is the number of consecutive good heartbeats that
	// mark a down shard up again. Default 2.
	RecoveryThreshold int

	// Failover, for cache workloads, sends a down shard's commands to the
	// next distinct shard on the ring that is up (a "gutter" as in
	// Facebook's memcache) instead of failing them. Keys written there get
	// their TTL capped to GutterTTL, and when the shard comes back the
	// client deletes, before routing to it again, every key it wrote
	// elsewhere during the outage, on both shards: the returning shard's
	// old values are never served. Off by default: data that must not be
	// lost or served stale should fail fast instead.
	Failover bool

	// GutterTTL caps the TTL of keys written to a stand-in shard. At least
	// 1ms. Default 30s.
	GutterTTL time.Duration

	// OnShardStateChange, if set, is called (from the monitor's goroutine,
	// one call at a time) when a shard is marked down or up.
	OnShardStateChange func(ShardStateChange)
}

// ShardStateChange reports a shard marked down or up by the health monitor.
type ShardStateChange struct {
	Shard string
	Addr  string
	Down  bool
	Err   error // the last heartbeat error when Down
	At    time.Time
}

// The heartbeat (internal/health) sees each shard of the current topology
// as a health.Target (NewClient's wiring): these methods, called from the
// monitor's goroutine. Nothing in the core calls them by name.

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
func (s *shard) MarkDown(err error) {
	s.markDown(s.Shard, err)
	s.c.notify(s, true, err)
}

// MarkUp marks the backend up (markUp) and tells OnShardStateChange.
func (s *shard) MarkUp() error {
	if err := s.c.markUp(s.c.top.Load(), s.backend); err != nil {
		return err
	}
	s.c.notify(s, false, nil)
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
