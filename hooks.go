package redshard

import (
	"slices"

	"github.com/redis/go-redis/v9"
)

// Hooks come in two kinds, seen at two levels:
//
//   - shard hooks (AddHook, AddShardHook) are added to every go-redis
//     client redshard opens to a shard to send commands, now and after
//     later membership changes: they see the traffic that really reaches
//     each server (a split MGET as one MGET per shard, a fanned-out DBSIZE
//     as one DBSIZE per shard, a tracked hot-key read as the pipeline that
//     carries it). Heartbeats are not shown to them.
//   - command hooks (AddCommandHook) see each command as the application
//     issued it, before routing: their duration covers splitting, merging
//     and reads answered from the local cache, and they see commands that
//     redshard refused (ErrCrossShard, ErrNotSharded) or failed fast
//     (ErrShardDown) without sending anything.

// AddHook adds hook to every shard client, now and after later membership
// changes, so tracing and metrics hooks (redisotel, for example) see the
// traffic that really reaches each server. Hooks do not see the caller's
// command before routing (see AddCommandHook), nor reads answered from the
// local cache, and their DialHook dials real shards. It is safe for
// concurrent use.
func (c *Client) AddHook(hook redis.Hook) {
	c.AddShardHook(func(Shard) redis.Hook { return hook })
}

// AddShardHook is AddHook with a hook built per shard client: newHook is
// called once for every client redshard opens to send a shard's commands
// (now, and whenever a later membership change opens one), with the
// shard's configuration, so that the hook can label what it records with
// the shard's name and address. newHook must not call the Client. It is
// safe for concurrent use.
func (c *client) AddShardHook(newHook func(s Shard) redis.Hook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hooks := append(slices.Clone(c.shardHooksLocked()), newHook)
	c.shardHooks.Store(&hooks)
	for _, s := range c.top.Load().sources() {
		s.backend.addHook(newHook)
	}
	for _, b := range c.joining { // servers a SetShards is adding
		b.addHook(newHook)
	}
}

// shardHooksLocked returns the shard hook factories added so far.
func (c *client) shardHooksLocked() []shardHook {
	if p := c.shardHooks.Load(); p != nil {
		return *p
	}
	return nil
}

// AddCommandHook adds hook in front of routing: its ProcessHook and
// ProcessPipelineHook see every command and pipeline as the application
// sent it, and next is redshard's routing (which never dials: the hook's
// DialHook is not used). Hooks added later run inside earlier ones. It is
// safe for concurrent use; a command already running keeps the hooks it
// started with.
func (c *client) AddCommandHook(hook redis.Hook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var prev []redis.Hook
	if ch := c.cmdHooks.Load(); ch != nil {
		prev = ch.hooks
	}
	ch := &commandChain{hooks: append(slices.Clone(prev), hook)}
	ch.process, ch.pipeline = c.routeOne, c.routeMany
	for i := len(ch.hooks) - 1; i >= 0; i-- {
		ch.process = ch.hooks[i].ProcessHook(ch.process)
		ch.pipeline = ch.hooks[i].ProcessPipelineHook(ch.pipeline)
	}
	c.cmdHooks.Store(ch)
}
