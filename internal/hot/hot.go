package hot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/flight"
	"github.com/redshard/redshard/localcache"
)

// Mitigation is the root's Mitigation, numbered as it is.
type Mitigation int

const (
	LocalCache Mitigation = iota + 1
	SplitCopies
)

// Tracking is the root's Tracking, numbered as it is.
type Tracking int

const (
	TrackingAuto Tracking = iota
	TrackingOff
	TrackingOn
)

// SplitCopyPrefix is the root's SplitCopyPrefix: it starts the name of
// every split copy.
const SplitCopyPrefix = "redshard:copy:"

// Config is the layer's configuration: the root's HotKeyOptions, resolved
// (every default filled in, every field valid).
type Config struct {
	Mitigation   Mitigation
	MaxStaleness time.Duration
	// TrackedLifetime is the most a reply filled by a tracked read lives,
	// bounded further by its key's remaining TTL (see Path.lifetime):
	// the root's DefaultTrackedLifetime when MaxStaleness was left zero,
	// MaxStaleness when it was set. Zero means MaxStaleness.
	TrackedLifetime time.Duration
	Detector        *hotkey.Config
	CacheBytes      int64
	Copies          int
	Tracking        Tracking
}

// Env is what the layer needs of the client it serves, besides the
// Topology and Backend of each command.
type Env struct {
	// Flights runs the shared reads, fills and copy deletions, detached
	// from their callers' contexts; its Close (the client's) ends them.
	Flights *flight.Runner
	// EachShard calls fn with the hot-key state of every shard of the
	// current ring, and of the removed shards whose keys have not moved
	// yet, that has one (Backend.HotState was called).
	EachShard func(fn func(*Shard))
	// IndexInternal sends cmd, which creates the internal key key (a split
	// copy), on cl, recording the key in its server's index of internal
	// keys, and returns cmd's error; DeleteInternal deletes such a key and
	// its index entry.
	IndexInternal  func(ctx context.Context, cl *redis.Client, cmd redis.Cmder, key string) error
	DeleteInternal func(ctx context.Context, cl *redis.Client, key string) error
	// Route sends cmd, which the layer leaves to the root (the MGET of the
	// keys of a hot MGET that are not hot), its usual way on top, which the
	// caller counts in flight, and returns its error.
	Route func(ctx context.Context, top Topology, cmd redis.Cmder) error
}

// Topology is one ring as the layer sees it: the root's topology, the
// snapshot a command was routed on. Its methods must be cheap; Process
// calls some on every command.
type Topology interface {
	// Epoch numbers the ring; rings of different epochs never share a read.
	Epoch() uint64
	// Guarded reports that commands must send their keys through a handoff
	// (a membership change being handed off, a fleet's hold or fence):
	// hot MGETs and pipelines then go their usual way.
	Guarded() bool
	// Shard returns the backend of the ring's shard i. The same server's
	// backend is the same value (==) in every ring.
	Shard(i int) Backend
	// Owner returns the index of the shard that owns key.
	Owner(key string) int
	// Replicas appends to buf the indexes of key's owner and the next n-1
	// distinct shards clockwise on the ring.
	Replicas(key string, buf []int, n int) []int
}

// Backend is one shard server as the layer sees it: the root's backend,
// which owns the server's clients and the layer's state for it.
type Backend interface {
	// Client is the shard's command client.
	Client() *redis.Client
	// Send sends cmd to the shard as the root sends any command
	// (AutoPipeline included); blocking says it is a blocking command.
	Send(ctx context.Context, cmd redis.Cmder, blocking bool) error
	// Down reports whether the health monitor marked the shard down.
	Down() bool
	// HotState returns the shard's hot-key state, made once by NewShard
	// and closed (Shard.Close) with the backend.
	HotState() *Shard
	// Dial returns a new client to the shard, with the shard's options
	// and the client's hooks, for the tracked reads (subscriber false: the
	// shard's protocol) or the invalidation subscriber (true: RESP2).
	// onConnect runs on each of its new connections.
	Dial(subscriber bool, onConnect func(context.Context, *redis.Conn) error) *redis.Client
	// HeartbeatClient returns the client of the shard's heartbeat
	// connection, which no shard hook sees, or nil once it is closed.
	HeartbeatClient() *redis.Client
	// AutoPipelined reports whether Send sends the shard's commands
	// through an AutoPipeliner (Options.AutoPipeline).
	AutoPipelined() bool
	// PeekClock is the clock that gates go-redis's checks of the shard's
	// command connections (netconn's gate: a connection that answered
	// within the current tick is not peeked at again), or nil when every
	// check must run (no heartbeats, or a client that does not retry).
	// The tracked reads' connections use it too.
	PeekClock() *atomic.Uint32
}

const (
	// hotFetchTimeout bounds a shared read, fill or copy deletion, which run
	// detached from the contexts of the callers waiting for them.
	hotFetchTimeout = 5 * time.Second
	// TopN is how many keys HotKeys and Stats report at most.
	TopN = 20
)

// Path is the hot-key layer between routing and the shard clients: it
// counts keys, serves hot reads from the local cache or split copies, and
// invalidates both on writes. It is safe for concurrent use.
type Path struct {
	env      Env
	opt      Config // resolved
	det      *hotkey.Detector
	cache    *localcache.Cache // nil unless LocalCache
	split    *splitRegistry    // nil unless SplitCopies
	instance string            // random tag naming this client's split copies

	flights singleflight.Group // shared reads and copy fills, run by Env.Flights

	nextID  atomic.Int64 // Shard ids, the cache's shard numbers
	charges atomic.Int64 // hot-key work counted by charge (SplitCopies)

	yield yieldGate // admission of misses on auto-pipelined shards

	stats hotCounters
}

// hotCounters are the hot-key layer's event counters.
type hotCounters struct {
	hits          atomic.Int64 // LocalCache reads answered locally
	misses        atomic.Int64 // LocalCache reads not answered locally
	coalesced     atomic.Int64 // callers that shared another caller's flight
	splitReads    atomic.Int64 // reads answered by a split copy
	fallbacks     atomic.Int64 // copy reads that went on to the owner
	fills         atomic.Int64 // copies made
	invalidations atomic.Int64 // keys named by tracking messages
	trackingLost  atomic.Int64 // times a shard's cached replies were dropped with its tracking
	refills       atomic.Int64 // cached replies a write replaced in its own round trip (refill.go)
}

// firstReadTTL reports whether a key's first tracked read sends PTTL too:
// when MaxStaleness is the tracked lifetime itself (set by the user),
// without it the reply would live that long, past its key's TTL.
func (h *Path) firstReadTTL() bool { return h.opt.TrackedLifetime <= h.opt.MaxStaleness }

// ConfigError is New's error: Field of the Config is invalid.
type ConfigError struct {
	Field string // "Detector" or "CacheBytes"
	Err   error
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *ConfigError) Unwrap() error { return e.Err }

// New builds the hot-key layer from a resolved configuration.
func New(env Env, opt *Config) (*Path, error) {
	det, err := hotkey.New(opt.Detector)
	if err != nil {
		return nil, &ConfigError{"Detector", err}
	}
	var tag [8]byte
	_, _ = rand.Read(tag[:]) // never fails (crypto/rand)
	h := &Path{env: env, opt: *opt, det: det, instance: hex.EncodeToString(tag[:])}
	if h.opt.TrackedLifetime <= 0 {
		h.opt.TrackedLifetime = h.opt.MaxStaleness
	}
	switch opt.Mitigation {
	case LocalCache:
		if h.cache, err = localcache.New(&localcache.Config{MaxBytes: opt.CacheBytes, Now: cacheClock}); err != nil {
			return nil, &ConfigError{"CacheBytes", err}
		}
	case SplitCopies:
		h.split = newSplitRegistry()
	}
	return h, nil
}

// cacheClock, when set (tests), is the clock of the local cache's entry
// lifetimes in the Paths New makes.
var cacheClock func() time.Time

// Counts is a snapshot of the layer's event counters (the root's HotStats
// says what each counts).
type Counts struct {
	Hits, Misses, Coalesced               int64
	SplitReads, SplitFallbacks, CopyFills int64
	Invalidations, TrackingLost           int64
}

// Counts returns the layer's event counters, read one by one.
func (h *Path) Counts() Counts {
	return Counts{
		Hits:           h.stats.hits.Load(),
		Misses:         h.stats.misses.Load(),
		Coalesced:      h.stats.coalesced.Load(),
		SplitReads:     h.stats.splitReads.Load(),
		SplitFallbacks: h.stats.fallbacks.Load(),
		CopyFills:      h.stats.fills.Load(),
		Invalidations:  h.stats.invalidations.Load(),
		TrackingLost:   h.stats.trackingLost.Load(),
	}
}

// Top returns the keys counted most, highest estimated rate first (at
// most TopN), hot or not. It locks and allocates.
func (h *Path) Top() []hotkey.Key { return h.det.Top(TopN) }

// CacheStats returns the local cache's statistics (zero without LocalCache).
func (h *Path) CacheStats() localcache.Stats { return h.cache.Stats() }

// ShardStats is the hot-key state of one shard.
type ShardStats struct {
	Invalidation  InvalidationState
	Connected     bool  // the invalidation connection is subscribed
	Invalidations int64 // keys named by the shard's invalidation messages
}

// ShardStats returns the state of the shard whose state is hs, or of a
// shard that has none yet when hs is nil.
func (h *Path) ShardStats(hs *Shard) ShardStats {
	st := ShardStats{Invalidation: InvalidationUnprobed}
	if h.opt.Mitigation != LocalCache || h.opt.Tracking == TrackingOff {
		st.Invalidation = InvalidationOff
	}
	if hs != nil {
		st.Invalidation = InvalidationState(hs.state.Load())
		st.Connected = hs.live.Load() != 0
		st.Invalidations = hs.invalidations.Load()
	}
	return st
}

// Process runs a command routed to shard i (class Keyed or Channel, or a
// one-key Split command; owner up). Every key is counted; a write's keys
// are invalidated after it ran, before Process returns; a supported read
// of a hot key goes to the local cache or a split copy.
func (h *Path) Process(ctx context.Context, top Topology, info command.Info, cmd redis.Cmder, keys []int, i int) error {
	s := top.Shard(i)
	blocking := info.Flags&command.Blocking != 0
	// Split-class commands (EXISTS, DEL, ...) come here only with one key.
	if len(keys) == 0 || (info.Class != command.Keyed && (info.Class != command.Split || len(keys) != 1)) {
		return s.Send(ctx, cmd, blocking)
	}
	args := cmd.Args()
	// Neither Write nor ReadOnly (EVAL, FCALL, ...) may write: treat as a write.
	if info.Flags&command.ReadOnly == 0 {
		h.Observe(args, keys)
		// A write of a key whose GET reply is cached (or of a hot key,
		// leaving a string) refills it in the write's own round trip, but
		// not while keys are handed off, held or fenced, and has bumped the key when it returns
		// (refill.go; LocalCache, so no split copies); any other goes as
		// it is.
		if h.cache != nil && len(keys) == 1 && !blocking && !top.Guarded() && h.refillWrite(ctx, s, info.Name, command.Arg(args[keys[0]]), cmd) {
			return cmd.Err()
		}
		err := s.Send(ctx, cmd, blocking)
		if h.split != nil && h.det.IsHot(command.Arg(args[keys[0]])) {
			h.charge(s, 1)
		}
		h.invalidate(args, keys)
		return err
	}
	key := command.Arg(args[keys[0]])
	if len(keys) == 1 && h.cache != nil && cacheable[info.Name] && !h.det.IsHot(key) && h.cachesUnhot(ctx, s) {
		return h.unhotRead(ctx, top, s, info, cmd, key, keys, blocking)
	}
	// One call counts the key and says whether it is hot: for a hot key,
	// an atomic add on its own counter, no lock.
	hot := h.det.ObserveHot(key)
	for _, k := range keys[1:] {
		h.det.Observe(command.Arg(args[k]))
	}
	if len(keys) != 1 || !hot {
		err := s.Send(ctx, cmd, blocking)
		h.Served(info, args, keys, err)
		return err
	}
	switch h.opt.Mitigation {
	case LocalCache:
		if kind := replyKind(cmd); kind != 0 && cacheable[info.Name] {
			return h.cachedRead(ctx, top, s, key, subKey(kind, info.Name, args, keys[0]), cmd)
		}
	case SplitCopies:
		if (cacheable[info.Name] || copyable[info.Name]) && replyKind(cmd) != 0 {
			return h.splitRead(ctx, top, info, i, key, keys[0], cmd)
		}
	}
	err := s.Send(ctx, cmd, blocking)
	h.Served(info, args, keys, err)
	return err
}

// unhotRead is Process for a cacheable one-key read of a key the detector
// does not find hot, on a shard where cachesUnhot: the cache answers it if
// it holds the reply (unhotHit); else it is read through the cache if the
// key is hot by now or admitsUnhot says so, else sent as it is. Every read the
// cache does not answer is counted by the detector, as Process counts it.
func (h *Path) unhotRead(ctx context.Context, top Topology, s Backend, info command.Info, cmd redis.Cmder, key string, keys []int, blocking bool) error {
	kind := replyKind(cmd)
	if kind == 0 {
		h.det.Observe(key)
	} else {
		hs := s.HotState()
		sub := subKey(kind, info.Name, cmd.Args(), keys[0])
		if h.unhotHit(s, hs, key, sub, cmd) {
			return cmd.Err()
		}
		if h.det.ObserveHot(key) || h.admitsUnhot(s, key) {
			if h.awaitRefill(ctx, hs, key, sub, cmd) {
				return cmd.Err()
			}
			return h.missedRead(ctx, top, s, hs, key, sub, cmd)
		}
	}
	err := s.Send(ctx, cmd, blocking)
	h.Served(info, cmd.Args(), keys, err)
	return err
}

// metaReads are the read-only commands whose replies say nothing of a
// key's value: the server answering them does not supersede cached replies.
var metaReads = map[string]bool{
	"ttl": true, "pttl": true, "expiretime": true, "pexpiretime": true, "object": true, "memory": true,
}

// Served is told of a read the local cache did not answer, after its
// reply arrived and before it is returned (err is its error): a reply
// about the keys' values (not an error other than WRONGTYPE, which tells
// the key's type; not a metaRead) makes their cached replies unreachable,
// since it may be newer than they are. It is what keeps a cached reply
// from being returned after a newer reply of the key that bypassed the
// cache (see docs/hot-reads.md).
func (h *Path) Served(info command.Info, args []interface{}, keys []int, err error) {
	if h.cache == nil || (err != nil && err != redis.Nil && !isWrongType(err)) || metaReads[info.Name] {
		return
	}
	for _, k := range keys {
		h.cache.Supersede(command.Arg(args[k]))
	}
}

// Ran is told of a command that ran without Process (a split command, a
// multi-key command sent as it is to one shard, a command of a pipeline,
// a transaction or a Watch), once its reply is in (err is its error): a
// command that may write is Written, whatever its error; a read is
// Served. A read's keys are counted toward detection by the caller, when
// it counts the read (Observe). A nil Path does nothing.
func (h *Path) Ran(info command.Info, args []interface{}, keys []int, err error) {
	switch {
	case h == nil:
	case info.MayWrite():
		h.Written(info, args, keys)
	default:
		h.Served(info, args, keys, err)
	}
}

// Written is told about every write that went through a path other than
// Process (split commands, pipelines, transactions, Watch, a one-shard
// ring's commands sent as they are), after it ran. Its keys' cached replies
// and split copies are gone when it returns. A write that names no key but
// may write some drops everything (see writesUnnamedKeys).
func (h *Path) Written(info command.Info, args []interface{}, keys []int) {
	if len(keys) == 0 {
		if writesUnnamedKeys(info) {
			h.InvalidateAll()
		}
		return
	}
	h.Observe(args, keys)
	h.invalidate(args, keys)
}

// writesUnnamedKeys reports whether a command that names no key may still
// write keys: a keyless write (FLUSHDB, SWAPDB), or, as a one-shard ring
// sends them as they are, a script with no declared key or a command the
// table does not know (or cannot parse). Connection and server commands
// that write no key (PING, CONFIG SET, CLIENT SETNAME) do not.
func writesUnnamedKeys(info command.Info) bool {
	if info.Class == command.Keyed || info.Class == command.Unknown {
		return info.MayWrite()
	}
	return info.Flags&command.Write != 0
}

// Observe counts the keys of a command that does not go through Process
// (a read in a pipeline or a split MGET, say), so that the detector sees
// all the traffic. It is cheap: one hash and one uncontended lock per key.
func (h *Path) Observe(args []interface{}, keys []int) {
	for _, k := range keys {
		h.det.Observe(command.Arg(args[k]))
	}
}

// invalidate drops the cached replies and split copies of the given keys.
func (h *Path) invalidate(args []interface{}, keys []int) {
	for _, k := range keys {
		key := command.Arg(args[k])
		if h.cache != nil {
			h.cache.InvalidateKey(key)
		}
		if h.split != nil {
			h.split.written(h, key)
		}
	}
}

// InvalidateAll drops every cached reply and forgets every split copy (a
// keyless write such as FLUSHDB removed them from the servers, or will).
func (h *Path) InvalidateAll() {
	if h.cache != nil {
		h.cache.Clear()
	}
	if h.split != nil {
		h.split.forgetAll()
	}
}

// flight runs fn once for all callers asking with the same key at the same
// time (see flight.Runner.Do), bounded by hotFetchTimeout and by Close.
func (h *Path) flight(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	v, joined, err := h.env.Flights.Do(ctx, &h.flights, key, hotFetchTimeout, fn)
	if joined && ctx.Err() == nil {
		h.stats.coalesced.Add(1)
	}
	return v, err
}

// Close releases the local cache. The shards' tracking state is closed with
// their backends, and the flights by the client's Close, before.
func (h *Path) Close() { h.cache.Close() }

// isSplitCopy reports whether key is the name of a split copy of a hot key.
func isSplitCopy(key string) bool { return strings.HasPrefix(key, SplitCopyPrefix) }

// copyName is the name of this client's split copies of key.
func (h *Path) copyName(key string) string {
	return SplitCopyPrefix + h.instance + ":" + key
}
