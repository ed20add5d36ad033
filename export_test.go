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

// SetSwitchHook makes SetShards call f right after it switched the ring,
// before it returns; nil removes it.
func SetSwitchHook(f func()) { switchHook = f }

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

// Dropped watches a Client's state once the Client itself is dropped: it
// refers to the state only, so the Client can become unreachable.
type Dropped struct{ c *client }

// Drop returns what watches c's state after c is dropped.
func Drop(c *Client) Dropped { return Dropped{c.client} }

// Orphaned reports whether the cleanup of the dropped Client has run.
func (d Dropped) Orphaned() bool {
	_, orphaned := d.c.loans.State()
	return orphaned
}

// Loans returns how many things the client handed out are in use.
func (d Dropped) Loans() int {
	open, _ := d.c.loans.State()
	return open
}

// Closed reports whether the client has been closed.
func (d Dropped) Closed() bool { return d.c.closed.Load() }

// Close closes the client (a failed test's cleanup).
func (d Dropped) Close() error { return d.c.close() }
