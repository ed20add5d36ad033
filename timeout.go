package redshard

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithTimeout returns a client that routes every command exactly as c does
// (same shards, hooks, hot-key layer and membership), with the read and
// write timeout of go-redis's (*redis.Client).WithTimeout applied to the
// commands it sends to the shards. It shares c's connections; closing it
// closes nothing of c's, and it stops working when c is closed.
//
// It returns a *redis.Client, as go-redis's WithTimeout does, so a few
// methods of that type cannot route: Watch, Subscribe, SSubscribe,
// PSubscribe and Conn on the returned client report an error wrapping
// ErrNotSharded. Use c's own methods for those. The timeout applies to
// commands on the shards' command connections; redshard's own reads (hot-key
// shared reads, handoffs) keep the shards' options. The returned client
// keeps c open while it is reachable (see Client on clients dropped unclosed).
func (c *Client) WithTimeout(timeout time.Duration) *redis.Client {
	c.timeoutsUsed.Store(true)
	return newFront(timeoutRoute{c: c, timeout: timeout})
}

// timeoutRoute is the hook of a WithTimeout client's front: it routes like
// routeHook, with the timeout in the context.
type timeoutRoute struct {
	c       *Client // the handle, not its state: a WithTimeout client keeps its Client reachable
	timeout time.Duration
}

func (h timeoutRoute) DialHook(next redis.DialHook) redis.DialHook {
	return routeHook{h.c.client}.DialHook(next)
}

func (h timeoutRoute) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.c.processCommand(context.WithValue(ctx, timeoutKey{}, h.timeout), cmd)
	}
}

func (h timeoutRoute) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.c.processCommands(context.WithValue(ctx, timeoutKey{}, h.timeout), cmds)
	}
}
