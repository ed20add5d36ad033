package redshard

import (
	"errors"
	"fmt"
)

// MarkShardDown marks the named shard of the current ring down, as the
// health monitor does after its heartbeats failed.
func (c *client) MarkShardDown(name string) error {
	s, ok := c.top.Load().shard(name)
	if !ok {
		return fmt.Errorf("no shard %q", name)
	}
	s.backend.markDown(s.Shard, errors.New("marked down by a test"))
	return nil
}

// MarkShardUp marks the named shard of the current ring up, as the health
// monitor does after its heartbeats succeeded again.
func (c *client) MarkShardUp(name string) error {
	top := c.top.Load()
	s, ok := top.shard(name)
	if !ok {
		return fmt.Errorf("no shard %q", name)
	}
	return c.markUp(top, s.backend)
}
