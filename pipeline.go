package redshard

import (
	"context"
	"runtime"

	"github.com/redis/go-redis/v9"
)

// Pipelined runs fn with a pipeline and executes it, as go-redis's
// Pipelined does, routed over the shards (see the README for how a
// pipeline is split). The client stays open while fn runs, even if the
// Client is not used after the call.
//
// Pipeline and TxPipeline (go-redis's, unchanged) do not keep the client
// open: keep the Client while a pipeline of it is in use. Lending them as
// a PubSub is lent (internal/loan) cost about 0.8µs per call (a runtime
// cleanup, and the Loans' mutex), and a wrapper that referred to the Client
// would not be a *redis.Pipeline, which go-redis's own tests assert.
func (c *Client) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	defer runtime.KeepAlive(c) // the pipeline is c's: c stays open while fn runs
	return c.front.Pipelined(ctx, fn)
}

// TxPipelined is Pipelined wrapped in MULTI/EXEC: its commands must all be
// on one shard (ErrCrossShard otherwise). The client stays open while fn
// runs.
func (c *Client) TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	defer runtime.KeepAlive(c)
	return c.front.TxPipelined(ctx, fn)
}
