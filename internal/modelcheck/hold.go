package modelcheck

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// hold is one pause of a shard command, carried in the context of the
// operation (or Rebalance) it belongs to. redshard passes the caller's
// context to the shard clients, and its handoff flights keep the context's
// values, so the hook below sees it on every shard command sent for the
// caller.
type hold struct {
	spec    HoldSpec
	armed   atomic.Bool   // cleared by the command that pauses
	arrived chan struct{} // closed once a command has paused
	release chan struct{} // closed by the scheduler (once: see open)
	once    sync.Once

	// Written before arrived is closed, read after.
	shard string // the shard it paused on
	key   string // for Restore/CasDelete: the first key of the move
}

func newHold(spec HoldSpec) *hold {
	h := &hold{spec: spec, arrived: make(chan struct{}), release: make(chan struct{})}
	h.armed.Store(true)
	return h
}

// open releases the hold (and disarms it, if nothing paused yet).
func (h *hold) open() {
	h.armed.Store(false)
	h.once.Do(func() { close(h.release) })
}

type holdCtxKey struct{}

func withHold(ctx context.Context, h *hold) context.Context {
	return context.WithValue(ctx, holdCtxKey{}, h)
}

// holdHook pauses the shard commands that a hold in their context selects.
type holdHook struct{ shard redshard.Shard }

func (holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (k holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return k.pause(ctx, []redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (k holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return k.pause(ctx, cmds, func() error { return next(ctx, cmds) })
	}
}

func (k holdHook) pause(ctx context.Context, cmds []redis.Cmder, run func() error) error {
	h, _ := ctx.Value(holdCtxKey{}).(*hold)
	if h == nil || !h.armed.Load() {
		return run()
	}
	key, ok := selects(h.spec.Target, cmds)
	if !ok || !h.armed.CompareAndSwap(true, false) {
		return run()
	}
	h.shard, h.key = k.shard.Name, key
	var err error
	if h.spec.Point == After {
		err = run()
	}
	close(h.arrived)
	select {
	case <-h.release:
	case <-ctx.Done(): // a handoff flight's own deadline
	}
	if h.spec.Point == Before {
		err = run()
	}
	return err
}

// selects reports whether cmds are what target pauses, and the key moved.
func selects(target Target, cmds []redis.Cmder) (string, bool) {
	internal := false
	for _, c := range cmds {
		switch c.Name() {
		case "restore":
			if target == Restore {
				return argKey(c), true
			}
			internal = true
		case "evalsha", "eval":
			if target == CasDelete {
				return argKey(c), true
			}
			internal = true
		case "dump", "pttl", "scan", "dbsize":
			internal = true
		}
	}
	return "", target == Own && !internal
}

// argKey is the key of RESTORE k ... or EVALSHA sha 1 k ...
func argKey(c redis.Cmder) string {
	args := c.Args()
	i := 1
	if c.Name() != "restore" {
		i = 3
	}
	if len(args) > i {
		if s, ok := args[i].(string); ok {
			return s
		}
	}
	return ""
}
