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

// Default LoadOptions values.
const (
	DefaultLoadLease        = 5 * time.Second
	DefaultLoadPollInterval = 10 * time.Millisecond
)

// LoadOptions turns on fleet-wide stampede control for GetOrLoad: of all the
// processes that miss a key at the same moment, one takes a lease on the
// key's shard and loads, and the others wait for its value. With
// Options.Load nil, GetOrLoad only coalesces the misses of one process, so a
// fleet of N processes loads a missing key up to N times.
type LoadOptions struct {
	// Lease is how long a loader holds the lease, and the deadline of each
	// load call. A loader that dies frees the key after Lease. At least 1ms
	// (the lease is SET with PX). Default DefaultLoadLease (5s).
	Lease time.Duration

	// Wait is how long a process that lost the lease waits for the value to
	// appear before it calls load itself; so if the lease holder dies, each
	// waiting process loads once after Wait. Default Lease.
	Wait time.Duration

	// PollInterval is how often a waiting process reads the key again. A
	// shorter interval returns sooner after the value appears but sends more
	// GETs to the key's shard: 1/PollInterval per second for each waiting
	// process (not per waiting goroutine: they share one poller). At least
	// 1ms. Default DefaultLoadPollInterval (10ms).
	PollInterval time.Duration
}

// LoadStats counts what GetOrLoad did since the client was created. The
// counters are read one by one, so a snapshot taken while calls are running
// may be off by the calls in progress.
type LoadStats struct {
	Hits      uint64 // calls answered by their first GET
	Misses    uint64 // calls that missed and joined a load flight (their own or another's)
	Coalesced uint64 // calls that got the result of another caller's flight (singleflight shares)
	Canceled  uint64 // calls whose ctx ended while they waited for a flight

	Loads         uint64 // calls of a load function
	LeaseWins     uint64 // flights that took the lease
	LeaseWaits    uint64 // flights that found the lease taken and waited
	LeaseWaitHits uint64 // waits that saw the value appear
	LeaseTimeouts uint64 // waits that ended after Wait and loaded anyway

	Errors      uint64 // flights that failed: load error or panic, or a Redis error
	StoreErrors uint64 // loaded values returned but not cached because the SET failed
}

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
