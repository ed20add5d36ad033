package redshard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// backend is the one owner of everything redshard holds for one shard
// server: the command client, the heartbeat client and its counters, the
// health state, the hot-key tracking state and the outage record. It is
// shared by every topology in which the shard appears with the same
// endpoint, and close releases all of it. It is safe for concurrent use.
type backend struct {
	c      *Client
	shard  Shard         // the configuration the clients were built for
	id     string        // the server's identity (Shard.identity)
	client *redis.Client // commands

	down    atomic.Bool                    // set by the health monitor
	downErr atomic.Pointer[shardDownError] // what commands get while down, built once per outage
	outage  outage                         // keys written to stand-ins while down (Failover)

	// Heartbeat counters, touched only by the monitor goroutine.
	fails, oks int
	lastErr    error

	hot atomic.Pointer[hotShard] // nil until the hot-key layer first uses the shard

	mu        sync.Mutex // guards closed, heartbeat and the creation of hot
	closed    bool
	heartbeat *redis.Client // dedicated heartbeat connection, made on first use

	closeErr error // set by close, under mu
}

// connKind says what a connection to a shard is for; each kind has its own
// settings on top of the shard's options.
type connKind int

const (
	connCommand   connKind = iota // the shard's command client
	connHeartbeat                 // one connection, short timeouts, no retries
	connReader                    // hot-key tracked reads (RESP2)
	connTracking                  // the invalidation subscriber (RESP2)
)

// newBackend opens (lazily, as go-redis does) the command client of s.
// Caller holds c.mu or owns c exclusively.
func (c *Client) newBackend(s Shard) *backend {
	b := &backend{c: c, shard: s, id: s.identity()}
	b.client = c.dial(s, connCommand, nil)
	return b
}

// dial builds one go-redis client to shard s for the given purpose. It is
// the only place redshard creates a client to a shard, so every connection
// honours Options.NewShardClient, Shard.Options and Shard.Failover, and
// every command-sending one gets the shard hooks. onConnect, if set, runs
// after the options' own OnConnect on each new connection.
func (c *Client) dial(s Shard, kind connKind, onConnect func(context.Context, *redis.Conn) error) *redis.Client {
	o := &c.cfg.opt
	opt := o.shardOptions(s)
	var fo *redis.FailoverOptions
	if s.Failover != nil {
		f := *s.Failover
		fo = &f
	}
	hb := c.cfg.health.Timeout
	apply := func(protocol *int, poolSize, minIdle, maxIdle, maxActive, maxRetries *int,
		dial, read, write, pool *time.Duration, ctxTimeout *bool,
		maint **maintnotifications.Config, on *func(context.Context, *redis.Conn) error) {
		switch kind {
		case connHeartbeat:
			*poolSize, *minIdle, *maxIdle, *maxActive, *maxRetries = 1, 0, 1, 1, -1
			*dial, *read, *write, *pool = hb, hb, hb, hb
			*ctxTimeout = true
			*maint = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		case connReader, connTracking:
			// RESP2, as measured (notes/tracking-invalidation.md); no
			// maintenance notifications, which would move connections
			// behind our back.
			*protocol = 2
			*maint = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		}
		if onConnect != nil {
			user := *on
			*on = func(ctx context.Context, cn *redis.Conn) error {
				if user != nil {
					if err := user(ctx, cn); err != nil {
						return err
					}
				}
				return onConnect(ctx, cn)
			}
		}
	}
	apply(&opt.Protocol, &opt.PoolSize, &opt.MinIdleConns, &opt.MaxIdleConns, &opt.MaxActiveConns, &opt.MaxRetries,
		&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.ContextTimeoutEnabled,
		&opt.MaintNotificationsConfig, &opt.OnConnect)
	if fo != nil {
		apply(&fo.Protocol, &fo.PoolSize, &fo.MinIdleConns, &fo.MaxIdleConns, &fo.MaxActiveConns, &fo.MaxRetries,
			&fo.DialTimeout, &fo.ReadTimeout, &fo.WriteTimeout, &fo.PoolTimeout, &fo.ContextTimeoutEnabled,
			new(*maintnotifications.Config), &fo.OnConnect)
		s.Failover = fo
	}

	var cl *redis.Client
	switch {
	case o.NewShardClient != nil:
		cl = o.NewShardClient(s, opt)
	case fo != nil:
		cl = redis.NewFailoverClient(fo)
	default:
		cl = redis.NewClient(opt)
	}
	if kind == connCommand || kind == connReader {
		for _, newHook := range c.shardHookList() {
			cl.AddHook(newHook(s))
		}
	}
	return cl
}

// shardHookList returns the shard hook factories added so far, without
// taking c.mu.
func (c *Client) shardHookList() []shardHook {
	if p := c.shardHooks.Load(); p != nil {
		return *p
	}
	return nil
}

// addHook adds a shard hook to the backend's command-sending clients.
func (b *backend) addHook(newHook shardHook) {
	b.client.AddHook(newHook(b.shard))
	if hs := b.hot.Load(); hs != nil {
		hs.addHook(newHook)
	}
}

// heartbeatClient returns the backend's heartbeat client, opening it on
// first use, or nil once the backend is closed.
func (b *backend) heartbeatClient() *redis.Client {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	if b.heartbeat == nil {
		b.heartbeat = b.c.dial(b.shard, connHeartbeat, nil)
	}
	return b.heartbeat
}

// hotState returns the backend's hot-key state, creating it on first use.
// It must only be called while the hot-key layer is on (c.hot != nil).
func (b *backend) hotState() *hotShard {
	if hs := b.hot.Load(); hs != nil {
		return hs
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if hs := b.hot.Load(); hs != nil {
		return hs
	}
	hs := b.c.hot.newShardState(b)
	hs.closed = b.closed // a closed backend's state never opens a connection
	b.hot.Store(hs)
	return hs
}

// close closes every client of the backend and stops its tracking
// goroutine. It is idempotent and returns the command client's close error.
func (b *backend) close() error {
	b.mu.Lock()
	if b.closed {
		defer b.mu.Unlock()
		return b.closeErr
	}
	b.closed = true
	hb := b.heartbeat
	b.mu.Unlock()

	if hs := b.hot.Load(); hs != nil {
		hs.close()
	}
	if hb != nil {
		_ = hb.Close()
	}
	err := b.client.Close()
	if errors.Is(err, redis.ErrClosed) {
		err = nil
	}
	b.mu.Lock()
	b.closeErr = err
	b.mu.Unlock()
	return err
}

// retire closes the backends of shards that left the ring after a grace
// period for commands that started on an older ring. Caller holds c.mu.
// The entry is removed when it fires, so nothing accumulates across
// membership changes.
func (c *Client) retireLocked(gone []*backend) {
	if len(gone) == 0 {
		return
	}
	r := &retirement{backends: gone}
	c.retiring[r] = struct{}{}
	r.timer = time.AfterFunc(retireGrace, func() {
		c.mu.Lock()
		_, ok := c.retiring[r]
		delete(c.retiring, r)
		c.mu.Unlock()
		if ok { // else Close took it
			for _, b := range r.backends {
				_ = b.close()
			}
		}
	})
}

// retirement is a group of backends waiting to be closed.
type retirement struct {
	backends []*backend
	timer    *time.Timer
}

// shardDownError is ErrShardDown for one shard, built once per outage.
type shardDownError struct {
	shard Shard
	cause error
}

func (e *shardDownError) Error() string {
	return fmt.Sprintf("redshard: shard %s is down (last heartbeat: %v)", e.shard, e.cause)
}

func (e *shardDownError) Unwrap() error { return ErrShardDown }

// downError returns the error for a command on a down backend.
func (b *backend) downError() error {
	if e := b.downErr.Load(); e != nil {
		return e
	}
	return ErrShardDown
}
