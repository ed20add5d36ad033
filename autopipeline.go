package redshard

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Two ways to auto-pipeline, both built on go-redis's own AutoPipeliner
// (redshard does not batch commands itself):
//
//   - Client.AutoPipeline and friends (front.go) return the AutoPipeliner
//     of the front client. Its batches (the commands of every goroutine, gathered while
//     the previous batch ran) reach the front's pipeline hook, which routes
//     them as any pipeline: one pipeline per shard, sent in parallel, with
//     splits, refusals, fan-outs, handoff and health as for Pipelined.
//   - Options.AutoPipeline gives each shard's command client its blocking
//     AutoPipeliner, and the routing of single commands sends through it
//     (backend.send): a command keeps its exact path through routing, the
//     hot-key layer and the membership protocol, and only the last step,
//     the shard client, batches it with other goroutines' commands.

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
	if b.env.timeoutsUsed.Load() {
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
