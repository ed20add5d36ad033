package redshard

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Two ways to auto-pipeline, both built on go-redis's own AutoPipeliner
// (redshard does not batch commands itself):
//
//   - Client.AutoPipeline and friends return the AutoPipeliner of the front
//     client. Its batches (the commands of every goroutine, gathered while
//     the previous batch ran) reach the front's pipeline hook, which routes
//     them as any pipeline: one pipeline per shard, sent in parallel, with
//     splits, refusals, fan-outs, handoff and health as for Pipelined.
//   - Options.AutoPipeline gives each shard's command client its blocking
//     AutoPipeliner, and the routing of single commands sends through it
//     (backend.send): a command keeps its exact path through routing, the
//     hot-key layer and the membership protocol, and only the last step,
//     the shard client, batches it with other goroutines' commands.

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

// shardAutoPipeliner builds the blocking AutoPipeliner of a backend's command
// client when Options.AutoPipeline is on, else returns nil. The options were
// validated by NewClient; should go-redis still refuse them, the shard sends
// its commands unbatched.
func (c *client) shardAutoPipeliner(cl *redis.Client) *redis.AutoPipeliner {
	if !c.cfg.opt.AutoPipeline {
		return nil
	}
	o := c.cfg.opt.AutoPipelineOptions
	if o == nil {
		o = redis.DefaultBlockingAutoPipelineOptions()
	}
	ap, err := cl.AutoPipelineWithOptions(o)
	if err != nil {
		return nil
	}
	return ap
}

// send sends one command to the backend's server: through the shard's
// AutoPipeliner when Options.AutoPipeline is on and the command may share a
// batch, else on the command client. blocking is true for commands that may
// wait on the server (BLPOP, XREAD BLOCK, WAIT, ...).
func (b *backend) send(ctx context.Context, cmd redis.Cmder, blocking bool) error {
	if b.ap == nil || blocking || !b.batchable(ctx) {
		return b.client.Process(ctx, cmd)
	}
	if b.stream != nil { // failFast's work, around the stream's hooks
		return b.process(ctx, cmd, b.ap.Process)
	}
	return b.ap.Process(ctx, cmd)
}

// batchable reports whether a command with context ctx may ride a batch: a
// batch runs on the AutoPipeliner's own context, so a command whose context
// matters to how it is sent goes alone, as it would without AutoPipeline.
func (b *backend) batchable(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false // go-redis reports the context's error without sending
	}
	if b.c.timeoutsUsed.Load() {
		if _, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
			return false // a WithTimeout timeout is applied by timeoutHook
		}
	}
	if b.ctxTimeout {
		if _, ok := ctx.Deadline(); ok {
			return false // the deadline bounds the command's I/O
		}
	}
	return true
}
