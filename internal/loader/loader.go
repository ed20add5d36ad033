package loader

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

	"github.com/redshard/redshard/internal/flight"
)

// LeasePrefix is prepended to a key to name its lease.
const LeasePrefix = "redshard:lease:"

// Options are the resolved settings of a Group's calls.
type Options struct {
	Lease        time.Duration // the lease's expiry and each load's deadline; > 0
	Wait         time.Duration // how long a flight that lost the lease waits for the value
	PollInterval time.Duration // how often a waiting flight reads the key; > 0
	Fleet        bool          // take a lease on the key's shard before loading
}

// Env is what a Group needs of its client.
type Env struct {
	// KV reads and writes a key on whichever shard owns it.
	KV redis.Cmdable
	// Owner returns the name and command client of the shard that owns
	// key; the lease is sent there directly, next to the key.
	Owner func(key string) (name string, cl *redis.Client)
	// Flights runs the flights, detached from their callers; its Close
	// cancels a running load and waits for it.
	Flights *flight.Runner
	// Index sends cmd, which creates the internal key, on cl together
	// with the key's entry in the server's internal-key index, and
	// returns cmd's error.
	Index func(ctx context.Context, cl *redis.Client, cmd redis.Cmder, key string) error
	// IndexKey is the index's key, from which a released lease is removed.
	IndexKey string
}

// Stats counts what a Group did; see redshard.LoadStats, whose fields
// these are one for one.
type Stats struct {
	Hits, Misses, Coalesced, Canceled           uint64
	Loads, LeaseWins, LeaseWaits, LeaseWaitHits uint64
	LeaseTimeouts, Errors, StoreErrors          uint64
}

// Group is the GetOrLoad state of a client: one flight per key in this
// process, and the counters. Its zero value is ready; it is safe for
// concurrent use.
type Group struct {
	group singleflight.Group // one flight per key in this process, run by Env.Flights

	hits, misses, coalesced, canceled           atomic.Uint64
	loads, leaseWins, leaseWaits, leaseWaitHits atomic.Uint64
	leaseTimeouts, failures, storeErrors        atomic.Uint64
}

// Stats returns g's counters.
func (g *Group) Stats() Stats {
	return Stats{
		Hits:          g.hits.Load(),
		Misses:        g.misses.Load(),
		Coalesced:     g.coalesced.Load(),
		Canceled:      g.canceled.Load(),
		Loads:         g.loads.Load(),
		LeaseWins:     g.leaseWins.Load(),
		LeaseWaits:    g.leaseWaits.Load(),
		LeaseWaitHits: g.leaseWaitHits.Load(),
		LeaseTimeouts: g.leaseTimeouts.Load(),
		Errors:        g.failures.Load(),
		StoreErrors:   g.storeErrors.Load(),
	}
}

// Get returns the string value of key, and on a miss loads it, stores it
// with ttl (0: no expiry) and returns it, as redshard's GetOrLoad says.
// The caller has checked its arguments: a non-empty key, a non-nil load,
// ttl >= 0. If load panicked, Get panics with a *Panic.
func (g *Group) Get(ctx context.Context, env *Env, opt Options, key string, ttl time.Duration,
	load func(ctx context.Context) (string, error)) (string, error) {
	v, err := env.KV.Get(ctx, key).Result()
	if err == nil {
		g.hits.Add(1)
		return v, nil
	}
	if !errors.Is(err, redis.Nil) {
		return "", loadErr("GET", key, err)
	}

	g.misses.Add(1)
	f := &flightCall{g: g, env: env, opt: opt}
	res, joined, err := env.Flights.Do(ctx, &g.group, key, opt.Wait+opt.Lease, func(fctx context.Context) (any, error) {
		return f.run(fctx, key, ttl, load)
	})
	switch {
	case ctx.Err() != nil:
		g.canceled.Add(1)
		return "", ctx.Err()
	case joined:
		g.coalesced.Add(1)
	}
	if p, ok := err.(*Panic); ok {
		panic(p)
	}
	if err != nil {
		return "", err
	}
	return res.(string), nil
}

// flightCall is what the flight of one call needs.
type flightCall struct {
	g   *Group
	env *Env
	opt Options
}

// run is the shared part of a miss, run once per key at a time in this
// process with a detached, deadline-bound ctx.
//
// It reads the key again before loading. The caller's GET and its joining
// the flight are not atomic: a flight for the key may end in between,
// having stored the value, and without the second read this caller would
// start a new flight and load again. With the lease on, the read is made
// after taking the lease, where it also covers another process that
// stored the value and released the lease just before; one read before
// the lease would only add a round trip to every miss.
func (f *flightCall) run(ctx context.Context, key string, ttl time.Duration, load func(context.Context) (string, error)) (val string, err error) {
	g, opt := f.g, f.opt
	defer func() {
		if err != nil {
			g.failures.Add(1)
		}
	}()
	if !opt.Fleet {
		if v, ok, err := f.recheck(ctx, key); ok || err != nil {
			return v, err
		}
		return f.loadAndStore(ctx, key, ttl, load)
	}

	// The lease goes to the owning shard's client itself, not through the
	// ring: its name hashes elsewhere, and it must sit next to the key.
	shardName, shard := f.env.Owner(key)
	lk := LeasePrefix + key
	token := rand.Text()
	setNX := redis.NewBoolCmd(ctx, "set", lk, token, "px", opt.Lease.Milliseconds(), "nx")
	err = f.env.Index(ctx, shard, setNX, lk)
	won := setNX.Val()
	if err == redis.Nil {
		won, err = false, nil
	}
	if err != nil {
		return "", fmt.Errorf("redshard: GetOrLoad %q: taking lease on shard %s: %w", key, shardName, err)
	}
	if won {
		g.leaseWins.Add(1)
		// Released on every way out, a load panic and Goexit included.
		defer f.release(ctx, shard, lk, token)
		if v, ok, err := f.recheck(ctx, key); ok || err != nil {
			return v, err
		}
		return f.loadAndStore(ctx, key, ttl, load)
	}

	g.leaseWaits.Add(1)
	v, ok, err := f.await(ctx, key)
	switch {
	case err != nil:
		return "", err
	case ok:
		g.leaseWaitHits.Add(1)
		return v, nil
	}
	// The holder is slow or dead: load without the lease rather than wait
	// on it for ever.
	g.leaseTimeouts.Add(1)
	return f.loadAndStore(ctx, key, ttl, load)
}

// recheck reads key: its value and true on a hit, false on a miss.
func (f *flightCall) recheck(ctx context.Context, key string) (string, bool, error) {
	v, err := f.env.KV.Get(ctx, key).Result()
	switch {
	case err == nil:
		return v, true, nil
	case errors.Is(err, redis.Nil):
		return "", false, nil
	default:
		return "", false, loadErr("GET", key, err)
	}
}

// await reads key every PollInterval, the first time at once, until it
// has a value (true) or Wait has passed (false).
func (f *flightCall) await(ctx context.Context, key string) (string, bool, error) {
	wait := time.NewTimer(f.opt.Wait)
	defer wait.Stop()
	tick := time.NewTicker(f.opt.PollInterval)
	defer tick.Stop()
	for {
		if v, ok, err := f.recheck(ctx, key); ok || err != nil {
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

// loadAndStore calls load with a deadline of Lease and stores what it
// returns with ttl.
func (f *flightCall) loadAndStore(ctx context.Context, key string, ttl time.Duration, load func(context.Context) (string, error)) (string, error) {
	lctx, cancel := context.WithTimeout(ctx, f.opt.Lease)
	v, err := f.g.callLoad(lctx, load)
	cancel()
	if err != nil {
		return "", err
	}
	// A fresh bound: a load that used all of ctx's time is still stored.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.opt.Lease)
	defer cancel()
	if err := f.env.KV.Set(sctx, key, v, ttl).Err(); err != nil {
		f.g.storeErrors.Add(1)
	}
	return v, nil
}

// callLoad calls load, turning a panic into a *Panic error. A panic must
// not escape: singleflight would re-raise it on a goroutine of its own
// where nothing can recover it, and crash the process.
func (g *Group) callLoad(ctx context.Context, load func(context.Context) (string, error)) (v string, err error) {
	g.loads.Add(1)
	defer func() {
		if r := recover(); r != nil {
			err = &Panic{value: r, stack: debug.Stack()}
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

// release frees a lease taken with token. If it fails, the lease expires
// by itself after at most Lease.
func (f *flightCall) release(ctx context.Context, shard *redis.Client, leaseKey, token string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.opt.Lease)
	defer cancel()
	_ = releaseScript.Run(rctx, shard, []string{leaseKey, f.env.IndexKey}, token).Err()
}

// loadErr wraps a Redis error of GetOrLoad with the step and the key.
func loadErr(step, key string, err error) error {
	return fmt.Errorf("redshard: GetOrLoad %q: %s: %w", key, step, err)
}

// Panic is the value Get panics with in each waiting caller when load
// panicked.
type Panic struct {
	value any
	stack []byte // of the goroutine that ran load
}

func (p *Panic) Error() string {
	return fmt.Sprintf("redshard: GetOrLoad: load panicked: %v\n\n%s", p.value, p.stack)
}

// Unwrap returns the panic value if it is an error.
func (p *Panic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}
