package redshard

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// SetRetireGrace shortens the grace period of removed shards' clients for
// a test and returns a func that restores it.
func SetRetireGrace(d time.Duration) (restore func()) {
	old := retireGrace
	retireGrace = d
	return func() { retireGrace = old }
}

// Retiring returns how many groups of removed shards' backends wait to be
// closed.
func (c *client) Retiring() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.retiring)
}

// ShardAutoPipeliner returns the AutoPipeliner of the named shard's
// backend (Options.AutoPipeline), or nil.
func (c *client) ShardAutoPipeliner(name string) *redis.AutoPipeliner {
	s, ok := c.top.Load().shard(name)
	if !ok {
		return nil
	}
	return s.ap
}

// FrontPoolStats returns the pool statistics of c's front client, which
// never dials.
func (c *client) FrontPoolStats() *redis.PoolStats { return c.front.PoolStats() }
