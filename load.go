package redshard

import (
	"context"
	"fmt"
	"time"

	"github.com/redshard/redshard/internal/loader"
)

// LeaseKeyPrefix is prepended to a key to name its GetOrLoad lease
// ("redshard:lease:" + key). The lease is stored on the shard that owns the
// key, with an expiry, so it never outlives LoadOptions.Lease. Do not use
// keys with this prefix for data.
const LeaseKeyPrefix = loader.LeasePrefix

// LoadStats returns the GetOrLoad counters of c. It is safe for concurrent
// use.
func (c *client) LoadStats() LoadStats {
	// A conversion: LoadStats and loader.Stats have the same fields, in
	// the same order, so that neither gains a counter without the other.
	return LoadStats(c.load.Stats())
}

// GetOrLoad returns the string value of key. On a miss it calls load once
// per key in this process however many goroutines miss at the same moment
// (golang.org/x/sync/singleflight), stores the result with ttl (0: no
// expiry) and returns it to all of them. With Options.Load set, the
// processes of a fleet also agree, through a lease on the key's shard, on
// which one of them loads (see LoadOptions). It is safe for concurrent use.
//
// Callers that join a flight share its ttl, load and context values: those
// of the caller that started it. load runs with a context that carries
// those values but not the caller's cancellation, so one caller giving up
// does not fail the others; its deadline is LoadOptions.Lease (the default,
// 5s, also applies when Options.Load is nil). Each caller still returns
// ctx.Err() as soon as its own ctx ends.
//
// If load returns an error, every caller of that flight gets it (as is),
// nothing is cached and the lease is released, so the next call loads
// again. If load panics, the panic is recovered in the flight, the lease is
// released, and every caller still waiting panics in its own goroutine with
// an error that carries the panic value and the loader's stack (and unwraps
// to the value if it was an error): each caller sees what it would have seen
// calling load itself, and a recover in its call chain (net/http's, say)
// works. If no caller is waiting any more, the panic is only counted in
// LoadStats.Errors. load must not call runtime.Goexit (t.FailNow, ...):
// callers of that flight would wait until their own ctx ends.
//
// If the value is loaded but cannot be stored, it is still returned and
// LoadStats.StoreErrors counts it. An empty key, a nil load or a negative
// ttl is an error wrapping ErrInvalidArgument. Close cancels the context
// of a running load and waits for it to return.
func (c *client) GetOrLoad(ctx context.Context, key string, ttl time.Duration, load func(ctx context.Context) (string, error)) (string, error) {
	switch {
	case key == "":
		return "", fmt.Errorf("%w: empty key", ErrInvalidArgument)
	case load == nil:
		return "", fmt.Errorf("%w: nil load function for key %q", ErrInvalidArgument, key)
	case ttl < 0:
		return "", fmt.Errorf("%w: negative ttl %v for key %q", ErrInvalidArgument, ttl, key)
	}
	o := c.cfg.load
	opt := loader.Options{Lease: o.Lease, Wait: o.Wait, PollInterval: o.PollInterval, Fleet: c.cfg.lease}
	env := loader.Env{KV: c.front, Owner: c.ShardFor, Flights: c.flights, Index: indexInternal, IndexKey: internalIndex}
	return c.load.Get(ctx, &env, opt, key, ttl, load)
}
