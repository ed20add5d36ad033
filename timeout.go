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

// timeoutKey is the context key under which a command of a WithTimeout
// client carries its timeout down to the shard clients (see timeoutHook).
type timeoutKey struct{}

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

// timeoutHook is the outermost hook of a backend's command client: a
// command whose context carries a WithTimeout timeout is sent through a
// go-redis WithTimeout clone of the client instead (same pools, same hooks
// below this one), so that the timeout applies to its reads and writes.
type timeoutHook struct{ b *backend }

func (h timeoutHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// The context lookup walks the caller's context chain, so it is made only
// once WithTimeout has been called (timeoutsUsed): a client that never
// uses it pays one atomic load per command.

func (h timeoutHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.b.c.timeoutsUsed.Load() {
			return next(ctx, cmd)
		}
		if d, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
			return h.b.withTimeout(d).Process(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (h timeoutHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !h.b.c.timeoutsUsed.Load() {
			return next(ctx, cmds)
		}
		d, ok := ctx.Value(timeoutKey{}).(time.Duration)
		if !ok {
			return next(ctx, cmds)
		}
		cl := h.b.withTimeout(d)
		if isTx(cmds) { // go-redis wrapped them in MULTI/EXEC; the clone does it again
			_, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.BatchProcess(ctx, cmds[1:len(cmds)-1]...)
				return nil
			})
			return err
		}
		_, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.BatchProcess(ctx, cmds...)
			return nil
		})
		return err
	}
}

// maxTimeoutClients bounds the WithTimeout clones a backend keeps.
const maxTimeoutClients = 16

// withTimeout returns the backend's command client with read and write
// timeout d: a go-redis WithTimeout clone sharing its pools. go-redis's
// clone has no hooks, so the shard hooks and failFast are added again, in
// the order the command client has them.
func (b *backend) withTimeout(d time.Duration) *redis.Client {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cl := b.timeouts[d]; cl != nil {
		return cl
	}
	if b.timeouts == nil || len(b.timeouts) >= maxTimeoutClients {
		b.timeouts = map[time.Duration]*redis.Client{}
	}
	cl := b.client.WithTimeout(d)
	for _, newHook := range b.c.shardHookList() {
		cl.AddHook(newHook(b.shard))
	}
	cl.AddHook(failFast{b})
	b.timeouts[d] = cl
	return cl
}
