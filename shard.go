package redshard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/redshard/redshard/internal/health"
	"github.com/redshard/redshard/internal/hot"
	"github.com/redshard/redshard/internal/netconn"
	"github.com/redshard/redshard/internal/pubsub"
)

// backend is the one owner of everything redshard holds for one shard
// server: the command client, the heartbeat client and its counters, the
// health state, the hot-key tracking state and the outage record. It is
// shared by every topology in which the shard appears with the same
// endpoint, and close releases all of it. It is safe for concurrent use.
type backend struct {
	env    *shardEnv
	shard  Shard         // the configuration the clients were built for
	id     string        // the server's identity (Shard.identity)
	client *redis.Client // commands

	// ap is client's blocking AutoPipeliner when Options.AutoPipeline is
	// on (nil otherwise); ctxTimeout is client's ContextTimeoutEnabled.
	// Both are set by newBackend and never change (see backend.send).
	ap         *redis.AutoPipeliner
	ctxTimeout bool

	// stream is the client of ap under AutoPipelineOptions.FullDuplex (nil
	// otherwise, and for a Sentinel shard, whose ap is client's): a client
	// of its own, without redshard's hooks, so that go-redis's full-duplex
	// engine sends each command without a goroutine of its own to run
	// hooks in (a hooked client pays one per command, and a runtime.Stack
	// to guard it). What the command client's hooks do, send and
	// streamDialer do, around the stream's own hooks: the application's
	// shard hooks, if it adds any, sit below failFast's error rewriting on
	// the stream as on the command client.
	stream *redis.Client

	// peekClock is the clock of the command connections' peekGates: the
	// client's heartbeat ticks, or nil (every pooled connection is checked
	// before use, as go-redis does) when there are no heartbeats or the
	// client does not retry a command whose connection turns out closed.
	// Set by newBackend.
	peekClock *atomic.Uint32

	down    atomic.Bool                    // set by the health monitor
	downErr atomic.Pointer[shardDownError] // what commands get while down, built once per outage
	outage  health.Outage                  // keys written to stand-ins while down (Failover)
	beat    health.Beat                    // heartbeat counters, touched only by the monitor's goroutine

	hot atomic.Pointer[hot.Shard] // nil until the hot-key layer first uses the shard

	conns netconn.Set // the command client's open connections, severed when the shard goes down

	mu        sync.Mutex // guards closed, heartbeat, timeouts and the creation of hot
	closed    bool
	heartbeat *redis.Client                   // dedicated heartbeat connection, made on first use
	timeouts  map[time.Duration]*redis.Client // WithTimeout clones of client (timeout.go)

	closeErr error // set by close, under mu
}

// shardEnv is what the backends of one client share with it, set before
// the first backend is built: the resolved options, the health monitor,
// the hot-key layer, the shard hooks added so far and the fleet's admission
// of connections. It is the client's (embedded in client), and nothing
// in it refers back to the client's routing or membership: what a
// backend needs from above comes in through admission.
type shardEnv struct {
	cfg     *config         // resolved Options; immutable
	monitor *health.Monitor // nil when health checks are off
	hot     *hot.Path       // nil when Options.HotKeys is nil

	shardHooks   atomic.Pointer[[]shardHook] // AddHook/AddShardHook factories, for new shard clients
	timeoutsUsed atomic.Bool                 // WithTimeout has been called (see timeoutHook)

	// admission, if set, returns the OnConnect that admits the data
	// connections to s (a fleet's fence), or nil when they need none.
	admission func(s Shard) func(context.Context, *redis.Conn) error
}

// connKind says what a connection to a shard is for; each kind has its own
// settings on top of the shard's options.
type connKind int

const (
	connCommand   connKind = iota // the shard's command client
	connHeartbeat                 // one connection, short timeouts, no retries
	connReader                    // hot-key tracked reads (the shard's protocol)
	connTracking                  // the invalidation subscriber (RESP2)
	connStream                    // the full-duplex AutoPipeliner's client (backend.stream)
)

// newBackend opens (lazily, as go-redis does) the command client of s.
// Caller holds the client's mu or owns the client exclusively.
func (e *shardEnv) newBackend(s Shard) *backend {
	b := &backend{env: e, shard: s, id: s.identity()}
	b.client = e.dial(s, connCommand, nil, timeoutHook{b}, e.monitor.Hook())
	// Below the hooks added so far (shard hooks added later sit below it):
	// the hooks above it see a command cut off by markDown fail with the
	// shard's ErrShardDown.
	b.client.AddHook(failFast{b})
	b.ctxTimeout = b.client.Options().ContextTimeoutEnabled
	if !e.cfg.health.Disable && b.client.Options().MaxRetries > 0 {
		b.peekClock = e.monitor.Ticks()
	}
	if o := e.cfg.opt.AutoPipelineOptions; e.cfg.opt.AutoPipeline && o != nil && o.FullDuplex && s.Failover == nil {
		b.stream = e.dialWith(s, connStream, nil, b.streamDialer)
		b.ap = e.shardAutoPipeliner(b.stream)
	} else {
		b.ap = e.shardAutoPipeliner(b.client)
	}
	return b
}

// streamDialer wraps the dialer of the stream client (see backend.stream)
// with what the command client's hooks do at a dial: start the heartbeat
// and track the connection for markDown.
func (b *backend) streamDialer(next dialer) dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		b.env.monitor.Start()
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return b.conns.Track(conn, b.peekClock), nil
	}
}

// dialer is the type of redis.Options.Dialer.
type dialer = func(ctx context.Context, network, addr string) (net.Conn, error)

// markDown marks the backend down (named as in the current ring) and severs its command connections (not its Pub/Sub links'), so
// that commands already waiting on a frozen or dead server fail at once
// (failFast turns their errors into ErrShardDown) instead of after
// ReadTimeout × retries, and refuses new connections until it is up again.
func (b *backend) markDown(as Shard, cause error) {
	b.downErr.Store(&shardDownError{shard: as, cause: cause})
	b.down.Store(true)
	b.conns.SeverAll()
}

// failFast is a hook of every backend's command client: it tracks the
// client's connections so that markDown can sever them, and reports the
// errors of commands cut off that way as the shard's ErrShardDown. A
// severed connection's reads and writes fail with netconn.ErrSevered, which
// go-redis does not retry (a retry would dial the frozen server and wait
// ReadTimeout again); dials are not refused, since go-redis's pool would
// take refusals for a dead server and keep failing for a while after the
// shard came back.
type failFast struct{ b *backend }

func (f failFast) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if pubsub.IsLink(ctx) { // a Pub/Sub link probes its own connection: markDown leaves it
			return conn, nil
		}
		return f.b.conns.Track(conn, f.b.peekClock), nil
	}
}

func (f failFast) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return f.b.process(ctx, cmd, next)
	}
}

// process runs cmd through next as failFast does: a command go-redis does
// not run again is counted on every connection, and an I/O error while the
// shard is down is the shard's ErrShardDown.
func (b *backend) process(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	if cmd.NoRetry() {
		defer b.conns.CheckAll()()
	}
	err := next(ctx, cmd)
	if err != nil && b.down.Load() && !isRedisError(err) && err != redis.Nil {
		err = b.downError()
		cmd.SetErr(err)
	}
	return err
}

func (f failFast) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if isTx(cmds) { // go-redis does not run a transaction again
			defer f.b.conns.CheckAll()()
		}
		err := next(ctx, cmds)
		if err != nil && f.b.down.Load() {
			down := f.b.downError()
			for _, cmd := range cmds {
				if e := cmd.Err(); e != nil && !isRedisError(e) && e != redis.Nil {
					cmd.SetErr(down)
				}
			}
			if !isRedisError(err) {
				err = down
			}
		}
		return err
	}
}

// dial builds one go-redis client to shard s for the given purpose. It is
// the only place redshard creates a client to a shard, so every connection
// honours Options.NewShardClient (NewFailoverShardClient for a Sentinel
// shard), Shard.Options and Shard.Failover, and
// every command-sending one gets the shard hooks. onConnect, if set, runs
// after the options' own OnConnect on each new connection; first, if any,
// are the client's outermost hooks.
func (e *shardEnv) dial(s Shard, kind connKind, onConnect func(context.Context, *redis.Conn) error, first ...redis.Hook) *redis.Client {
	return e.dialWith(s, kind, onConnect, nil, first...)
}

// dialWith is dial whose client dials through wrap(the dialer it would
// use) when wrap is not nil; only for a shard without Failover.
func (e *shardEnv) dialWith(s Shard, kind connKind, onConnect func(context.Context, *redis.Conn) error,
	wrap func(dialer) dialer, first ...redis.Hook) *redis.Client {
	o := &e.cfg.opt
	opt := o.shardOptions(s)
	var fo *redis.FailoverOptions
	if s.Failover != nil {
		f := *s.Failover
		fo = &f
	}
	if kind == connCommand || kind == connReader || kind == connStream {
		// Every connection that carries data is admitted by the fleet's
		// fence (admission), after the caller's own step.
		if gate := e.gate(s); gate != nil {
			if own := onConnect; own != nil {
				onConnect = func(ctx context.Context, cn *redis.Conn) error {
					if err := own(ctx, cn); err != nil {
						return err
					}
					return gate(ctx, cn)
				}
			} else {
				onConnect = gate
			}
		}
	}
	hb := e.cfg.health.Timeout
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
			// The subscriber is RESP2, as measured
			// (notes/tracking-invalidation.md): invalidations redirected to
			// it arrive as Pub/Sub messages. The reader keeps the shard's
			// protocol: its replies are cached and served to callers, and
			// must have the Go types the command client's replies have
			// (RESP3 doubles, maps). No maintenance notifications, which
			// would move connections behind our back.
			if kind == connTracking {
				*protocol = 2
			}
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

	if wrap != nil && fo == nil {
		base := opt.Dialer
		if base == nil {
			base = redis.NewDialer(opt)
		}
		opt.Dialer = wrap(base)
	}

	var cl *redis.Client
	switch {
	case fo != nil && o.NewFailoverShardClient != nil:
		cl = o.NewFailoverShardClient(s, fo)
	case fo != nil:
		cl = redis.NewFailoverClient(fo)
	case o.NewShardClient != nil:
		cl = o.NewShardClient(s, opt)
	default:
		cl = redis.NewClient(opt)
	}
	for _, h := range first {
		cl.AddHook(h)
	}
	if kind == connCommand || kind == connReader || kind == connStream {
		for _, newHook := range e.shardHookList() {
			cl.AddHook(newHook(s))
		}
	}
	return cl
}

// gate returns the admission of s's data connections, or nil.
func (e *shardEnv) gate(s Shard) func(context.Context, *redis.Conn) error {
	if e.admission == nil {
		return nil
	}
	return e.admission(s)
}

// shardHook builds the hook of one shard client.
type shardHook func(Shard) redis.Hook

// shardHookList returns the shard hook factories added so far, without
// taking c.mu.
func (e *shardEnv) shardHookList() []shardHook {
	if p := e.shardHooks.Load(); p != nil {
		return *p
	}
	return nil
}

// addHook adds a shard hook to the backend's command-sending clients.
func (b *backend) addHook(newHook shardHook) {
	b.client.AddHook(newHook(b.shard))
	if b.stream != nil {
		b.stream.AddHook(newHook(b.shard))
	}
	b.mu.Lock()
	b.timeouts = nil // rebuilt with the new hook on next use
	b.mu.Unlock()
	if hs := b.hot.Load(); hs != nil {
		hs.AddHook(func() redis.Hook { return newHook(b.shard) })
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
		b.heartbeat = b.env.dial(b.shard, connHeartbeat, nil)
	}
	return b.heartbeat
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
		hs.Close()
	}
	if hb != nil {
		_ = hb.Close()
	}
	err := closeClient(b.client)
	if b.stream != nil {
		err = errors.Join(err, closeClient(b.stream))
	}
	b.mu.Lock()
	b.closeErr = err
	b.mu.Unlock()
	return err
}

// closeClient closes cl; a client closed already is not an error.
func closeClient(cl *redis.Client) error {
	if err := cl.Close(); !errors.Is(err, redis.ErrClosed) {
		return err
	}
	return nil
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

// timeoutKey is the context key under which a command of a WithTimeout
// client carries its timeout down to the shard clients (see timeoutHook).
type timeoutKey struct{}

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
		if !h.b.env.timeoutsUsed.Load() {
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
		if !h.b.env.timeoutsUsed.Load() {
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
	for _, newHook := range b.env.shardHookList() {
		cl.AddHook(newHook(b.shard))
	}
	cl.AddHook(failFast{b})
	b.timeouts[d] = cl
	return cl
}

// shardAutoPipeliner builds the blocking AutoPipeliner of a backend's command
// client when Options.AutoPipeline is on, else returns nil. The options were
// validated by NewClient; should go-redis still refuse them, the shard sends
// its commands unbatched.
func (e *shardEnv) shardAutoPipeliner(cl *redis.Client) *redis.AutoPipeliner {
	if !e.cfg.opt.AutoPipeline {
		return nil
	}
	o := e.cfg.opt.AutoPipelineOptions
	if o == nil {
		o = redis.DefaultBlockingAutoPipelineOptions()
	}
	ap, err := cl.AutoPipelineWithOptions(o)
	if err != nil {
		return nil
	}
	return ap
}

// isTx reports whether go-redis wrapped cmds in MULTI ... EXEC (TxPipeline).
func isTx(cmds []redis.Cmder) bool {
	return len(cmds) >= 2 && cmds[0].Name() == "multi" && cmds[len(cmds)-1].Name() == "exec"
}
