package redshard

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

// LeaseKeyPrefix is prepended to a key to name its GetOrLoad lease
// ("redshard:lease:" + key). The lease is stored on the shard that owns the
// key, with an expiry, so it never outlives LoadOptions.Lease. Do not use
// keys with this prefix for data.
const LeaseKeyPrefix = "redshard:lease:"

// loader is the GetOrLoad state of a Client. Its zero value is ready to use;
// the group and the counters are safe for concurrent use.
type loader struct {
	group singleflight.Group // one flight per key in this process, run by Client.flights

	hits, misses, coalesced, canceled           atomic.Uint64
	loads, leaseWins, leaseWaits, leaseWaitHits atomic.Uint64
	leaseTimeouts, failures, storeErrors        atomic.Uint64
}

// LoadStats returns the GetOrLoad counters of c. It is safe for concurrent
// use.
func (c *client) LoadStats() LoadStats {
	l := &c.load
	return LoadStats{
		Hits:          l.hits.Load(),
		Misses:        l.misses.Load(),
		Coalesced:     l.coalesced.Load(),
		Canceled:      l.canceled.Load(),
		Loads:         l.loads.Load(),
		LeaseWins:     l.leaseWins.Load(),
		LeaseWaits:    l.leaseWaits.Load(),
		LeaseWaitHits: l.leaseWaitHits.Load(),
		LeaseTimeouts: l.leaseTimeouts.Load(),
		Errors:        l.failures.Load(),
		StoreErrors:   l.storeErrors.Load(),
	}
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
	opt, lease := c.cfg.load, c.cfg.lease
	v, err := c.front.Get(ctx, key).Result()
	if err == nil {
		c.load.hits.Add(1)
		return v, nil
	}
	if !errors.Is(err, redis.Nil) {
		return "", loadErr("GET", key, err)
	}

	c.load.misses.Add(1)
	res, joined, err := c.flights.do(ctx, &c.load.group, key, opt.Wait+opt.Lease, func(fctx context.Context) (any, error) {
		return c.flight(fctx, key, ttl, load, opt, lease)
	})
	switch {
	case ctx.Err() != nil:
		c.load.canceled.Add(1)
		return "", ctx.Err()
	case joined:
		c.load.coalesced.Add(1)
	}
	if p, ok := err.(*loadPanic); ok {
		panic(p)
	}
	if err != nil {
		return "", err
	}
	return res.(string), nil
}

// flight is the shared part of a GetOrLoad miss, run once per key at a time
// in this process with a detached, deadline-bound ctx.
//
// It reads the key again before loading. The caller's GET and its DoChan
// are not atomic: a flight for the key may end in between, having stored
// the value, and without the second read this caller would start a new
// flight and load again. With the lease on, the read is made after taking
// the lease, where it also covers another process that stored the value and
// released the lease just before; one read before the lease would only add
// a round trip to every miss.
func (c *client) flight(ctx context.Context, key string, ttl time.Duration, load func(context.Context) (string, error), opt LoadOptions, lease bool) (val string, err error) {
	defer func() {
		if err != nil {
			c.load.failures.Add(1)
		}
	}()
	if !lease {
		if v, ok, err := c.recheck(ctx, key); ok || err != nil {
			return v, err
		}
		return c.loadAndStore(ctx, key, ttl, load, opt)
	}

	// The lease goes to the owning shard's client itself, not through the
	// ring: its name hashes elsewhere, and it must sit next to the key.
	shardName, shard := c.ShardFor(key)
	lk := LeaseKeyPrefix + key
	token := rand.Text()
	setNX := redis.NewBoolCmd(ctx, "set", lk, token, "px", opt.Lease.Milliseconds(), "nx")
	err = indexInternal(ctx, shard, setNX, lk)
	won := setNX.Val()
	if err == redis.Nil {
		won, err = false, nil
	}
	if err != nil {
		return "", fmt.Errorf("redshard: GetOrLoad %q: taking lease on shard %s: %w", key, shardName, err)
	}
	if won {
		c.load.leaseWins.Add(1)
		// Released on every way out, a load panic and Goexit included.
		defer c.release(ctx, shard, lk, token, opt.Lease)
		if v, ok, err := c.recheck(ctx, key); ok || err != nil {
			return v, err
		}
		return c.loadAndStore(ctx, key, ttl, load, opt)
	}

	c.load.leaseWaits.Add(1)
	v, ok, err := c.await(ctx, key, opt)
	switch {
	case err != nil:
		return "", err
	case ok:
		c.load.leaseWaitHits.Add(1)
		return v, nil
	}
	// The holder is slow or dead: load without the lease rather than wait
	// on it for ever.
	c.load.leaseTimeouts.Add(1)
	return c.loadAndStore(ctx, key, ttl, load, opt)
}

// recheck reads key: its value and true on a hit, false on a miss.
func (c *client) recheck(ctx context.Context, key string) (string, bool, error) {
	v, err := c.front.Get(ctx, key).Result()
	switch {
	case err == nil:
		return v, true, nil
	case errors.Is(err, redis.Nil):
		return "", false, nil
	default:
		return "", false, loadErr("GET", key, err)
	}
}

// await reads key every opt.PollInterval, the first time at once, until it
// has a value (true) or opt.Wait has passed (false).
func (c *client) await(ctx context.Context, key string, opt LoadOptions) (string, bool, error) {
	wait := time.NewTimer(opt.Wait)
	defer wait.Stop()
	tick := time.NewTicker(opt.PollInterval)
	defer tick.Stop()
	for {
		if v, ok, err := c.recheck(ctx, key); ok || err != nil {
			return v, ok, err
		}
		select {
		case <-ctx.Done():
			return "", false, loadErr("waiting for lease holder", key, ctx.Err())
		case <-wait.C:
			return "", false, nil
		case <-tick.C:
		}
	}
}

// loadAndStore calls load with a deadline of opt.Lease and stores what it
// returns with ttl.
func (c *client) loadAndStore(ctx context.Context, key string, ttl time.Duration, load func(context.Context) (string, error), opt LoadOptions) (string, error) {
	lctx, cancel := context.WithTimeout(ctx, opt.Lease)
	v, err := c.callLoad(lctx, load)
	cancel()
	if err != nil {
		return "", err
	}
	// A fresh bound: a load that used all of ctx's time is still stored.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opt.Lease)
	defer cancel()
	if err := c.front.Set(sctx, key, v, ttl).Err(); err != nil {
		c.load.storeErrors.Add(1)
	}
	return v, nil
}

// callLoad calls load, turning a panic into a *loadPanic error. A panic
// must not escape: singleflight would re-raise it on a goroutine of its own
// where nothing can recover it, and crash the process.
func (c *client) callLoad(ctx context.Context, load func(context.Context) (string, error)) (v string, err error) {
	c.load.loads.Add(1)
	defer func() {
		if r := recover(); r != nil {
			err = &loadPanic{value: r, stack: debug.Stack()}
		}
	}()
	return load(ctx)
}

// releaseScript deletes a lease only if it still holds the caller's token,
// so a loader that outlived its lease never frees another loader's.
// KEYS = lease, internal index.
var releaseScript = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then
	redis.call('srem', KEYS[2], KEYS[1])
	return redis.call('del', KEYS[1])
end
return 0`)

// release frees a lease taken with token. If it fails, the lease expires by
// itself after at most lease.
func (c *client) release(ctx context.Context, shard *redis.Client, leaseKey, token string, lease time.Duration) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease)
	defer cancel()
	_ = releaseScript.Run(rctx, shard, []string{leaseKey, internalIndex}, token).Err()
}

// loadErr wraps a Redis error of GetOrLoad with the step and the key.
func loadErr(step, key string, err error) error {
	return fmt.Errorf("redshard: GetOrLoad %q: %s: %w", key, step, err)
}

// loadPanic is the value GetOrLoad panics with in each waiting caller when
// load panicked.
type loadPanic struct {
	value any
	stack []byte // of the goroutine that ran load
}

func (p *loadPanic) Error() string {
	return fmt.Sprintf("redshard: GetOrLoad: load panicked: %v\n\n%s", p.value, p.stack)
}

// Unwrap returns the panic value if it is an error.
func (p *loadPanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}
