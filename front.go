package redshard

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// errFrontDial is what the front client's connections say if anything
// ever uses one (Monitor, a WithTimeout client's Subscribe, ...).
var errFrontDial = fmt.Errorf("%w: this connection is not bound to a shard "+
	"(use the Client's own Subscribe, PSubscribe and SSubscribe, ShardFor, or ForEachShard)", ErrNotSharded)

// newFront returns a go-redis client that never dials, with route as its
// hook: it gives the whole command set, and route carries every command out.
func newFront(route redis.Hook) *redis.Client {
	front := redis.NewClient(&redis.Options{
		Addr:            "redshard:0", // never dialed
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		PoolSize:        1,
		// The front never connects; auto mode would resolve its Addr.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		Dialer:                   dialFront,
	})
	front.AddHook(route)
	return front
}

// dialFront is the front client's dialer. Every command of the front goes
// through the route hook, which never uses a connection, so what asks for
// one is code working on the pool itself or bypassing the hooks (Monitor,
// go-redis's own pool tests): it gets a connection on which every read and
// write fails with errFrontDial, and the error comes with the first command
// sent on it, not from the pool.
func dialFront(context.Context, string, string) (net.Conn, error) { return frontConn{}, nil }

// frontConn is the front client's connection: it carries nothing.
type frontConn struct{}

func (frontConn) Read([]byte) (int, error) { return 0, errFrontDial }

func (frontConn) Write([]byte) (int, error) { return 0, errFrontDial }

func (frontConn) Close() error { return nil }

func (frontConn) LocalAddr() net.Addr { return localAddr("redshard-front") }

func (frontConn) RemoteAddr() net.Addr { return localAddr("redshard-front") }

func (frontConn) SetDeadline(time.Time) error { return nil }

func (frontConn) SetReadDeadline(time.Time) error { return nil }

func (frontConn) SetWriteDeadline(time.Time) error { return nil }

// localAddr is the address of a connection redshard makes in memory.
type localAddr string

func (localAddr) Network() string { return "redshard" }

func (a localAddr) String() string { return string(a) }

// AutoPipeline returns the blocking AutoPipeliner of the client (go-redis's
// *redis.AutoPipeliner): each command call blocks until it has run, and the
// commands of concurrent callers are gathered into batches that are routed
// like a pipeline (Pipelined): one pipeline per shard, in parallel, results
// and per-command errors in each caller's command. Options.AutoPipelineOptions
// configures it, or go-redis's DefaultBlockingAutoPipelineOptions. The
// instance is shared and cached until closed, as go-redis's is; closing the
// client closes it. It keeps the Client open until it is closed, even once
// the Client itself is unreachable (see Client). FullDuplex is ignored here (the batches have no one
// connection to hold: each shard's part goes out on that shard's pipeline
// connections); it applies to Options.AutoPipeline's per-shard pipeliners.
//
// The AutoPipeliner delegates Watch, Subscribe, SSubscribe and PSubscribe to
// the front client, where they cannot choose a shard: they report an error
// wrapping ErrNotSharded. Use the Client's own methods for those.
func (c *Client) AutoPipeline() (*redis.AutoPipeliner, error) {
	return c.AutoPipelineWithOptions(nil)
}

// AutoPipelineWithOptions is AutoPipeline with explicit options (nil: as
// AutoPipeline). As with go-redis, the first call's options win while the
// instance lives.
func (c *Client) AutoPipelineWithOptions(o *redis.AutoPipelineOptions) (*redis.AutoPipeliner, error) {
	defer runtime.KeepAlive(c) // until the AutoPipeliner is lent (internal/loan)
	if c.closed.Load() {
		return nil, redis.ErrClosed
	}
	ap, err := c.apFront.AutoPipelineWithOptions(c.frontAPOptions(o, redis.DefaultBlockingAutoPipelineOptions))
	if err == nil {
		c.loans.UntilClosed(ap, false)
	}
	return ap, err
}

// AsyncAutoPipeline returns the deferred AutoPipeliner of the client: command
// calls return at once and the command's result accessors block until it has
// run. Batches are routed as AutoPipeline's are. Options.AutoPipelineOptions
// configures it, or go-redis's DefaultAutoPipelineOptions.
func (c *Client) AsyncAutoPipeline() (*redis.AutoPipeliner, error) {
	return c.AsyncAutoPipelineWithOptions(nil)
}

// AsyncAutoPipelineWithOptions is AsyncAutoPipeline with explicit options
// (nil: as AsyncAutoPipeline).
func (c *Client) AsyncAutoPipelineWithOptions(o *redis.AutoPipelineOptions) (*redis.AutoPipeliner, error) {
	defer runtime.KeepAlive(c)
	if c.closed.Load() {
		return nil, redis.ErrClosed
	}
	ap, err := c.apFront.AsyncAutoPipelineWithOptions(c.frontAPOptions(o, redis.DefaultAutoPipelineOptions))
	if err == nil {
		c.loans.UntilClosed(ap, true)
	}
	return ap, err
}

// newAPFront returns the front client of Client.AutoPipeline's pipeliners:
// a front like the client's own (newFront), with apRoute as its hook.
func newAPFront(c *client) *redis.Client {
	h := apRoute{routeHook: routeHook{c}, batches: new(atomic.Bool)}
	front := newFront(h)
	h.batches.Store(true)
	return front
}

// apRoute routes like routeHook, except for the pipeline return value of the
// AutoPipeliner's batches. go-redis builds a batch's hook chain around its
// own innermost step for every batch (the pipeline chain of Pipeline and
// TxPipeline is built once, when the hook is added), and when the chain does
// not reach that step it sets the chain's error on every command of the
// batch: the first command's error would overwrite its batchmates' replies.
// So a batch's chain returns nil; its errors are on its commands.
type apRoute struct {
	routeHook
	batches *atomic.Bool // set once the hook is installed: chains built later are batches'
}

func (h apRoute) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	if !h.batches.Load() {
		return h.routeHook.ProcessPipelineHook(next)
	}
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := h.c.processCommands(ctx, cmds)
		if isTx(cmds) {
			return err
		}
		return nil
	}
}

// frontAPOptions returns the options of a front AutoPipeliner: o, else
// Options.AutoPipelineOptions, else def(); a copy, with FullDuplex off
// (a full-duplex engine would hold a connection of the front, which never
// dials).
func (c *client) frontAPOptions(o *redis.AutoPipelineOptions, def func() *redis.AutoPipelineOptions) *redis.AutoPipelineOptions {
	if o == nil {
		o = c.cfg.opt.AutoPipelineOptions
	}
	if o == nil {
		o = def()
	}
	cp := *o
	cp.FullDuplex = false
	return &cp
}
