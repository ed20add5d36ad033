package redshard

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/flight"
	"github.com/redshard/redshard/internal/health"
	"github.com/redshard/redshard/internal/loader"
	"github.com/redshard/redshard/internal/loan"
	"github.com/redshard/redshard/internal/member"
	"github.com/redshard/redshard/internal/pubsub"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/ring"
)

// Client is a redis.UniversalClient that spreads keys over many Redis
// servers with a weighted consistent-hash ring (package ring). It is safe for
// concurrent use. Create it with NewClient; the zero value is not usable.
//
// Every command of go-redis works through it: single-key commands go to the
// key's owner; MGET, MSET, MSETEX, DEL, UNLINK, EXISTS and TOUCH are split
// per shard and merged in the caller's order; commands whose keys must live
// together run when they do and otherwise fail with ErrCrossShard before
// anything is sent; keyless commands fan out with a defined merge or fail
// with ErrNotSharded. See the README for the full table.
//
// Close a Client when done with it. A Client that is never closed is
// closed once neither it nor anything it handed out is in use any more (a
// cleanup, as for an os.File): its goroutines stop and its connections
// close. What keeps it open, even once the Client itself is unreachable: a
// PubSub or a Conn while it is reachable, an AutoPipeliner until it is
// closed, a WithTimeout client while it is reachable, and a Watch or a
// ForEachShard until it returns (their Tx and shard clients are not to be
// kept beyond it). The clients of ShardClient and ShardFor are the Client's
// own: keep the Client while you use them.
type Client struct {
	// front is a go-redis client that never dials: it gives Client the whole
	// command set, and its hooks route each command to a shard client. It is
	// embedded through an unexported alias so that its methods are Client's
	// and the field itself is out of the caller's reach: a front used on its
	// own (Watch, Options) would not route.
	*front
	// client is the state; nothing redshard starts refers to the Client
	// itself, so an unreachable Client can be cleaned up (NewClient), once
	// nothing it handed out is in use (internal/loan).
	*client
}

// front is the type of the Client's embedded front client.
type front = redis.Client

// client is a Client's state: everything its goroutines, hooks and shard
// clients refer to. It never refers to its Client.
type client struct {
	front   *redis.Client // the Client's front client
	apFront *redis.Client // the front of Client.AutoPipeline's pipeliners (autopipeline.go)

	// shardEnv is what the client's shard backends share with it: the
	// resolved Options, the health monitor, the hot-key layer, the shard
	// hooks and how connections to a shard are made (shard.go).
	shardEnv
	closed atomic.Bool

	top      atomic.Pointer[topology]     // current ring and shard backends
	cmdHooks atomic.Pointer[commandChain] // AddCommandHook chain; nil: none

	mu       sync.Mutex               // guards retiring and joining; serialises topology changes and hook additions
	retiring map[*retirement]struct{} // removed shards' backends, closed after a grace period
	joining  []*backend               // backends of servers a SetShards is adding, not yet on the ring: hooks and Close reach them

	changing sync.Mutex // held by SetShards from start to end: one change at a time

	fleet *member.Follower // nil unless Options.Registry

	flights *flight.Runner // shared calls (hot reads, handoffs, loads) and Pub/Sub goroutines, cancelled and awaited by Close
	stats   counters
	load    loader.Group // GetOrLoad state (internal/loader); its zero value is ready

	pubsub pubsub.Lazy // Subscribe's front client and multiplexers (internal/pubsub); its zero value is ready
	loans  *loan.Loans // what the Client handed out and is in use (internal/loan)
}

// NewClient validates opt (see Options.Validate) and returns a client for
// its shards. It does not contact the shards, and runs no goroutine of its
// own until the client is used: connections are made on first use, as
// go-redis does, and the heartbeat (HealthOptions) starts with the client's
// first connection to a shard. (Each shard's go-redis client starts what
// go-redis starts for any client.) A client that follows a Registry reads
// it here and starts following it.
func NewClient(opt *Options) (*Client, error) {
	cfg, err := opt.resolve()
	if err != nil {
		return nil, err
	}
	c := &client{shardEnv: shardEnv{cfg: cfg}, retiring: map[*retirement]struct{}{}, flights: flight.New()}
	// Every connection that carries data is admitted by the fleet's fence
	// (Client.admit); fleetOnConnect says nil without a registry.
	c.admission = c.fleetOnConnect
	if h := cfg.health; !h.Disable { // before any shard client, whose first dial starts it
		opt := health.Options{Interval: h.Interval, Timeout: h.Timeout,
			FailureThreshold: h.FailureThreshold, RecoveryThreshold: h.RecoveryThreshold}
		c.monitor = health.New(opt, c.healthTargets) // each shard is one (health.go)
	}
	c.loans = loan.New(func() { _ = c.close() })
	if cfg.hot != nil {
		route := func(ctx context.Context, top *topology, cmd redis.Cmder, info command.Info, keys []int) error {
			return c.routeOther(ctx, top, cmd, info, keys, nil, false)
		}
		if c.hot, err = newHotPath(cfg.hot, c.flights, c.top.Load, route); err != nil {
			return nil, err
		}
	}
	var gutterTTL time.Duration
	if h := cfg.health; !h.Disable && h.Failover {
		gutterTTL = h.GutterTTL
	}
	var first registry.Config
	if reg := cfg.opt.Registry; reg != nil {
		var f *member.Follower
		f, first, err = newFollower(c, reg, cfg.opt.Fleet)
		if err != nil {
			c.closeHot()
			return nil, err
		}
		empty := &topology{gutterTTL: gutterTTL, flight: &inflight{}}
		top, _, err := c.buildFleet(empty, registry.Config{}, first, f.HoldTimeout())
		if err != nil {
			f.Stop()
			c.closeHot()
			return nil, fmt.Errorf("redshard: the registry's config (%s): %w", first.Version(), err)
		}
		top.fence = f.StartFence(first)
		c.top.Store(top.seal())
		c.fleet = f
	} else {
		top := &topology{epoch: 1, ring: cfg.ring, gutterTTL: gutterTTL, flight: &inflight{}}
		top.shards = c.buildShards(cfg.ring, cfg.shards, nil)
		c.top.Store(top.seal())
	}

	c.front = newFront(routeHook{c})
	c.apFront = newAPFront(c)
	if c.fleet != nil {
		if err := c.fleet.Start(first); err != nil {
			_ = c.close()
			return nil, err
		}
	}
	h := &Client{front: c.front, client: c}
	// An unreachable, unclosed Client is closed once nothing it handed
	// out is in use (internal/loan), on a goroutine of its own: the runtime
	// runs cleanups one at a time, and close waits for the client's
	// shared calls.
	runtime.AddCleanup(h, func(c *client) { go c.loans.Orphan() }, c)
	return h, nil
}

// closeHot stops the hot-key layer, if any.
func (c *client) closeHot() {
	if c.hot != nil {
		c.hot.Close()
	}
}

// buildShards creates the backends of r, reusing those of old (current
// shards and orphans) for the same server with the same options, whatever
// the shard's name: one server, one backend. Caller holds c.mu or owns c
// exclusively.
func (c *client) buildShards(r *ring.Ring, shards []Shard, old *topology) []*shard {
	cfg := make(map[string]Shard, len(shards))
	for _, s := range shards {
		cfg[s.Name] = s
	}
	var prev []*shard
	if old != nil {
		prev = old.sources()
	}
	nodes := r.Nodes()
	out := make([]*shard, len(nodes))
	for i, n := range nodes {
		s := cfg[n.Name]
		if j := slices.IndexFunc(prev, func(p *shard) bool { return sameEndpoint(p.backend.shard, s) }); j >= 0 {
			out[i] = &shard{Shard: s, backend: prev[j].backend}
			continue
		}
		out[i] = &shard{Shard: s, backend: c.newBackend(s)}
	}
	return out
}

// sameEndpoint reports whether a shard client built for a can serve b: the
// same server, reached with the same options. Options are compared by
// pointer, Failover by content (see sameFailover): a follower parses its
// registry's document again at every phase, and each parse makes new
// FailoverOptions for the same Sentinel shard.
func sameEndpoint(a, b Shard) bool {
	return a.identity() == b.identity() && a.Addr == b.Addr && a.Options == b.Options && sameFailover(a.Failover, b.Failover)
}

// sameFailover reports whether clients built from a and b reach the same
// Sentinel-managed primary the same way: the same master, the same
// Sentinels (in any order), and every other field equal. Pointers
// (TLSConfig, AutoPipelineOptions) and interface values are compared by
// identity; functions (Dialer, OnConnect, credentials providers) by their
// code, as Go cannot compare them: the Sentinel shards of a document all
// take theirs from one template (Options.FailoverShardOptions), and a
// closure rebuilt with other captured values is not noticed.
func sameFailover(a, b *redis.FailoverOptions) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a == b {
		return true
	}
	if !slices.Equal(slices.Sorted(slices.Values(a.SentinelAddrs)), slices.Sorted(slices.Values(b.SentinelAddrs))) {
		return false
	}
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range va.NumField() {
		fa, fb := va.Field(i), vb.Field(i)
		switch fa.Kind() {
		case reflect.Slice:
			if va.Type().Field(i).Name == "SentinelAddrs" {
				continue // compared above, as a set
			}
			if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
				return false
			}
		case reflect.Func:
			if fa.IsNil() != fb.IsNil() || !fa.IsNil() && fa.Pointer() != fb.Pointer() {
				return false
			}
		case reflect.Interface:
			if fa.IsNil() || fb.IsNil() {
				if fa.IsNil() != fb.IsNil() {
					return false
				}
				continue
			}
			if fa.Elem().Type() != fb.Elem().Type() || !fa.Comparable() || !fa.Equal(fb) {
				return false
			}
		default: // numbers, strings, bools, durations; pointers by identity
			if !fa.Equal(fb) {
				return false
			}
		}
	}
	return true
}

// topology returns the current snapshot, or redis.ErrClosed.
func (c *client) topology() (*topology, error) {
	if c.closed.Load() {
		return nil, redis.ErrClosed
	}
	return c.top.Load(), nil
}

// enter returns the current topology with one more command counted in
// flight on it, and the stripe it is counted on; the caller calls exit with
// it when the command is done. A command that loaded a topology just as
// SetShards replaced it counts itself on the new one instead, so once the
// first move of a change has seen the old ring's count at zero, no command
// of the old ring can start.
func (c *client) enter() (*topology, int, error) {
	for !c.closed.Load() {
		top := c.top.Load()
		if f := c.fleet; f != nil && top.fence == nil && !f.Lease().Fresh() {
			// The lease is decided here, not by a timer: a process that
			// was paused past its lease fences itself before its first
			// command after the pause (internal/member).
			f.FenceNow()
			continue
		}
		fl := &top.flight.n
		slot := fl.Enter()
		if c.top.Load() == top {
			return top, slot, nil
		}
		// Replaced meanwhile: by a copy of the same epoch (which shares
		// top.flight) or by a new ring. Count on the newest instead.
		fl.Exit(slot)
	}
	return nil, 0, redis.ErrClosed
}

// Close cancels the shared calls redshard runs for its callers (hot-key
// reads, handoffs, GetOrLoad loads) and waits for them, stops the health
// monitor and the registry follower, and closes every client redshard
// opened to a shard and the front client. Commands issued after Close
// return redis.ErrClosed. Close is idempotent and safe for concurrent use.
// Call it when done: a Client that is dropped unclosed is closed only once
// the garbage collector finds it, and what it handed out, done with (see
// Client), which may be much later. Close closes what the Client handed
// out, in use or not.
func (c *Client) Close() error { return c.close() }

// close is Close, on the state (a cleanup of the Client calls it too).
func (c *client) close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	if c.fleet != nil {
		c.fleet.Stop()
	}
	// The front first: it stops its AutoPipeliners, whose last batches
	// are routed (and fail with redis.ErrClosed) while the shards are open.
	frontErr := errors.Join(c.apFront.Close(), c.front.Close())
	c.flights.Close()
	if c.monitor != nil {
		c.monitor.Close()
	}
	c.mu.Lock()
	top := c.top.Load()
	if top.hold != nil {
		top.hold.release() // held commands wake and find the client closed
	}
	all := top.sources()
	if prev := top.previous(); prev != nil {
		all = append(all, prev.shards...)
	}
	if next := top.prepared(); next != nil {
		all = append(all, next.shards...)
	}
	for r := range c.retiring {
		r.timer.Stop()
		for _, b := range r.backends {
			all = append(all, &shard{Shard: b.shard, backend: b})
		}
	}
	clear(c.retiring)
	for _, b := range c.joining { // a SetShards still carrying functions to them
		all = append(all, &shard{Shard: b.shard, backend: b})
	}
	c.joining = nil
	c.mu.Unlock()

	var errs []error
	seen := map[*backend]bool{}
	for _, s := range all {
		if seen[s.backend] {
			continue
		}
		seen[s.backend] = true
		if err := s.close(); err != nil {
			errs = append(errs, fmt.Errorf("redshard: closing shard %s: %w", s.Shard, err))
		}
	}
	c.closeHot()
	if frontErr != nil && !errors.Is(frontErr, redis.ErrClosed) {
		errs = append(errs, frontErr)
	}
	return errors.Join(errs...)
}

// Shards returns the current shard list, sorted by name, with weights
// normalised (0 -> 1).
func (c *client) Shards() []Shard {
	top := c.top.Load()
	out := make([]Shard, len(top.shards))
	for i, s := range top.shards {
		out[i] = s.Shard
	}
	return out
}

// ShardFor returns the name and client of the shard that owns key (hash
// tags honoured). The client is owned by c: do not close it.
func (c *client) ShardFor(key string) (name string, client *redis.Client) {
	top := c.top.Load()
	s := top.shards[top.ring.LookupIndex(key)]
	return s.Name, s.client
}

// ShardClient returns the client of the named shard. The client is owned
// by c: do not close it.
func (c *client) ShardClient(name string) (*redis.Client, bool) {
	s, ok := c.top.Load().shard(name)
	if !ok {
		return nil, false
	}
	return s.client, true
}

// Ring returns the current ring (immutable; safe to keep).
func (c *client) Ring() *ring.Ring { return c.top.Load().ring }

// ForEachShard calls fn concurrently for every shard client and returns the
// first error. It mirrors redis.Ring.ForEachShard; the clients are owned by
// c: do not close them, nor keep them beyond fn without c.
func (c *Client) ForEachShard(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error {
	defer runtime.KeepAlive(c) // the clients are c's: c stays open while fn runs
	top, err := c.topology()
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, s := range top.shards {
		g.Go(func() error { return fn(ctx, s.client) })
	}
	return g.Wait()
}

// PoolStats returns the connection pool statistics summed over the shards'
// clients (their pipeline pools' too, when go-redis keeps them apart), so
// one shard reports exactly what its go-redis client reports.
func (c *Client) PoolStats() *redis.PoolStats {
	var sum redis.PoolStats
	for _, s := range c.top.Load().shards {
		st := s.client.PoolStats()
		addPoolStats(&sum, st)
		sum.PubSubStats.Created += st.PubSubStats.Created
		sum.PubSubStats.Untracked += st.PubSubStats.Untracked
		sum.PubSubStats.Active += st.PubSubStats.Active
		switch {
		case st.PipelineStats == nil:
		case sum.PipelineStats == nil:
			first := *st.PipelineStats // its type is go-redis's internal pool.Stats
			sum.PipelineStats = &first
		default:
			addPoolStats((*redis.PoolStats)(sum.PipelineStats), (*redis.PoolStats)(st.PipelineStats))
		}
	}
	return &sum
}

// addPoolStats adds the counters of one pool to sum.
func addPoolStats(sum, st *redis.PoolStats) {
	sum.Hits += st.Hits
	sum.Misses += st.Misses
	sum.Timeouts += st.Timeouts
	sum.WaitCount += st.WaitCount
	sum.WaitDurationNs += st.WaitDurationNs
	sum.Unusable += st.Unusable
	sum.TotalConns += st.TotalConns
	sum.IdleConns += st.IdleConns
	sum.StaleConns += st.StaleConns
	sum.PendingRequests += st.PendingRequests
}

// Options returns a copy of the template every shard client is built from
// (Options.ShardOptions, with an empty Addr). Each shard's own client, and
// its options, are available through ShardClient.
func (c *Client) Options() *redis.Options {
	o := c.cfg.opt.shardOptions(Shard{})
	o.Addr = ""
	return o
}

// String describes the client by its shards. It never prints credentials.
func (c *Client) String() string {
	top := c.top.Load()
	var b strings.Builder
	b.WriteString("redshard<")
	for i, s := range top.shards {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%g", s.Shard, s.Weight)
	}
	b.WriteString(">")
	return b.String()
}

var _ redis.UniversalClient = (*Client)(nil)
