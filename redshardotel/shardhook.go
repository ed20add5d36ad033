package redshardotel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.opentelemetry.io/otel"

	"github.com/redshard/redshard"
)

// errHostDial is what a host client's dial returns: it never connects.
var errHostDial = errors.New("redshardotel: the instrumentation host never connects")

// InstrumentShards applies instrument, an instrumentation that can only be
// given a *redis.Client because it adds hooks to it (redisotel's
// InstrumentTracing, say), to every client c opens to send a shard's
// commands, now and after later membership changes:
//
//	redshardotel.InstrumentShards(rdb, func(s redshard.Shard, host *redis.Client) error {
//		return redisotel.InstrumentTracing(host, redisotel.WithAttributes(
//			attribute.String("redshard.shard", s.Name)))
//	})
//
// instrument gets a host client per shard client, with the shard's Addr,
// that never connects: it records the hooks added to it, and a hook added
// last hands each command back to the shard client. So the hooks see what
// the shard really gets; they see no dials. Instrumentation that reads the
// host's state (pool statistics, as redisotel's InstrumentMetrics does)
// reads a client with no connections: use InstrumentMetrics for metrics.
//
// InstrumentShards returns the errors instrument returned for the current
// shards; errors for shards added later are given to otel.Handle. It is
// safe for concurrent use.
func InstrumentShards(c *redshard.Client, instrument func(s redshard.Shard, host *redis.Client) error) error {
	if c == nil {
		return ErrNilClient
	}
	if instrument == nil {
		return errors.New("redshardotel: nil instrument function")
	}
	// AddShardHook builds the current shards' hooks before it returns; a
	// shard's hot-key reader may be opened meanwhile by another goroutine.
	var (
		mu   sync.Mutex
		now  = true // guarded by mu
		errs []error
	)
	c.AddShardHook(func(s redshard.Shard) redis.Hook {
		h, err := newHostHook(s, instrument)
		if err != nil {
			err = fmt.Errorf("redshardotel: instrumenting shard %s: %w", s, err)
			mu.Lock()
			defer mu.Unlock()
			if now {
				errs = append(errs, err)
			} else {
				otel.Handle(err)
			}
		}
		return h
	})
	mu.Lock()
	defer mu.Unlock()
	now = false
	return errors.Join(errs...)
}

func newHostHook(s redshard.Shard, instrument func(redshard.Shard, *redis.Client) error) (*hostHook, error) {
	opt := &redis.Options{
		Addr:       s.Addr,
		MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errHostDial
		},
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if opt.Addr == "" && s.Options != nil {
		opt.Addr = s.Options.Addr
	}
	host := redis.NewClient(opt)
	err := instrument(s, host)
	host.AddHook(handBack{})
	return &hostHook{host: host}, err
}

// continuation is the rest of a shard client's hook chain, carried through
// the host's hooks in the context.
type continuation struct {
	process  redis.ProcessHook
	pipeline redis.ProcessPipelineHook
	err      error // what pipeline returned
}

type continuationKey struct{}

// hostHook sends a shard client's commands through its host's hooks.
type hostHook struct{ host *redis.Client }

func (h *hostHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hostHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.host.Process(context.WithValue(ctx, continuationKey{}, &continuation{process: next}), cmd)
	}
}

func (h *hostHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		k := &continuation{pipeline: next}
		ctx = context.WithValue(ctx, continuationKey{}, k)
		pipe := h.host.Pipeline()
		for _, cmd := range cmds {
			_ = pipe.Process(ctx, cmd) // queues it
		}
		_, _ = pipe.Exec(ctx) // returns the first command's error; the chain's own is k.err
		return k.err
	}
}

// handBack is a host's innermost hook: it ends the host's chain with the
// shard client's.
type handBack struct{}

func (handBack) DialHook(next redis.DialHook) redis.DialHook { return next }

func (handBack) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		k, _ := ctx.Value(continuationKey{}).(*continuation)
		if k == nil || k.process == nil { // a command sent to the host itself
			return errHostDial
		}
		return k.process(ctx, cmd)
	}
}

func (handBack) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		k, _ := ctx.Value(continuationKey{}).(*continuation)
		if k == nil || k.pipeline == nil {
			return errHostDial
		}
		k.err = k.pipeline(ctx, cmds)
		return k.err
	}
}
