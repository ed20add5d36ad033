package redshard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/hot"
)

// Mitigation says how a client takes the reads of a hot key off the shard
// that owns it. See HotKeyOptions.
type Mitigation int

const (
	// LocalCache answers read-only commands on a hot key (see HotKeyOptions
	// for the list) from a cache in the client's memory. A miss is read
	// from the shard once however many goroutines ask at the same moment.
	// On servers that support CLIENT TRACKING (Redis 6 and later) a write
	// made anywhere evicts the cached replies as soon as the server's
	// invalidation message arrives; elsewhere a reply lives MaxStaleness.
	LocalCache Mitigation = iota + 1
	// SplitCopies keeps copies of a hot key on the next distinct shards clockwise
	// on the ring and spreads its reads over them and the owner. Copies are
	// made with DUMP and RESTORE (any data type) and live MaxStaleness.
	SplitCopies
)

// String returns "LocalCache", "SplitCopies", or "Mitigation(n)".
func (m Mitigation) String() string {
	switch m {
	case LocalCache:
		return "LocalCache"
	case SplitCopies:
		return "SplitCopies"
	}
	return fmt.Sprintf("Mitigation(%d)", int(m))
}

// Tracking says whether LocalCache uses server-assisted invalidation
// (CLIENT TRACKING). It has no effect on SplitCopies.
type Tracking int

const (
	// TrackingAuto, the default, uses CLIENT TRACKING on every shard whose
	// server accepts it and MaxStaleness alone on the others. Whether a
	// server accepts it is found out once, at the first hot read on it.
	TrackingAuto Tracking = iota
	// TrackingOff never uses CLIENT TRACKING: a cached reply may lag another
	// process's write by up to MaxStaleness.
	TrackingOff
	// TrackingOn caches replies only from shards that track them: on a
	// shard whose server refuses CLIENT TRACKING, hot reads are coalesced
	// but not cached.
	TrackingOn
)

// String returns "TrackingAuto", "TrackingOff", "TrackingOn", or "Tracking(n)".
func (t Tracking) String() string {
	switch t {
	case TrackingAuto:
		return "TrackingAuto"
	case TrackingOff:
		return "TrackingOff"
	case TrackingOn:
		return "TrackingOn"
	}
	return fmt.Sprintf("Tracking(%d)", int(t))
}

// DefaultMaxStaleness is HotKeyOptions.MaxStaleness when left zero.
const DefaultMaxStaleness = time.Second

// defaultCopies is the default number of shards a split hot key is read
// from (capped by the number of shards).
const defaultCopies = 3

// SplitCopyPrefix starts the name of every split copy of a hot key:
// SplitCopyPrefix + a random tag of the client that made it + ":" + key.
// Copies live on other shards than the key's owner and expire on their own;
// Rebalance leaves them where they are. Do not use keys with this prefix
// for data.
const SplitCopyPrefix = "redshard:copy:"

// HotKeyOptions turns on hot-key detection and mitigation (Options.HotKeys).
//
// Every command on one key is counted by a streaming detector (package
// hotkey); a key whose rate and share of this client's traffic pass the
// detector's thresholds is hot. Reads of a hot key are then taken off its
// shard as Mitigation says; other keys and writes go to their shard as
// without HotKeyOptions. With LocalCache, on a shard whose server tracks
// and without Options.AutoPipeline, a single-key read of a key that is not
// hot is cached too once the cache's frequency sketch has seen the key
// read before (localcache.Cache.Admit; see docs/hot-reads.md).
//
// The read-only commands served from the local cache are GET, GETRANGE,
// SUBSTR, STRLEN, GETBIT, BITCOUNT, HGET, HMGET, HGETALL, HEXISTS, HLEN,
// HSTRLEN, HKEYS, HVALS, LRANGE, LLEN, LINDEX, SMEMBERS, SISMEMBER,
// SMISMEMBER, SCARD, ZRANGE, ZRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGE,
// ZREVRANGEBYSCORE, ZREVRANGEBYLEX, ZSCORE, ZMSCORE, ZCARD, ZCOUNT,
// ZLEXCOUNT, ZRANK, ZREVRANK, EXISTS and TYPE on one key, through go-redis's
// typed methods or Do, sent as single commands or, with LocalCache, in a
// pipeline that is not a transaction (Pipelined, Pipeline, AutoPipeline's
// batches); hot keys of an MGET are answered as GETs. A pipelined read is
// answered locally only when no earlier command of the pipeline may have
// written its key (one naming it, or a write naming no key such as FLUSHDB),
// its shard is up and no membership change is being handed off; a miss on
// a key that a later command of the pipeline writes is read before the
// pipeline is sent. Transactions and Watch are never answered locally.
// SplitCopies serves the single commands plus SRANDMEMBER, HRANDFIELD and
// ZRANDMEMBER from its copies. A reply is cached per shard, key and full
// argument list, so HGET of one field never answers HGET of another.
//
// Writes through the client are seen at once (read-your-writes): a write
// or delete of a key, through any command, pipeline, transaction or Watch,
// evicts the key's cached replies and deletes its split copies before it
// returns.
//
// With LocalCache, reads never go backwards: once the client has returned a
// reply of a read of a key (a command and its arguments), a read of the
// same kind that starts afterwards never returns an older one, whichever
// connection, pipeline or AutoPipeliner carried either, and whatever
// connection the server closes. A reply read from a server hides the older
// cached replies of its key before it is returned. Replies of different
// commands on one key may disagree for as long as an invalidation takes to
// arrive. A reading connection that the server closes (CLIENT KILL, its
// idle timeout, client eviction) is noticed within about half a second and
// drops the shard's cached replies. The argument is in docs/hot-reads.md;
// the layer itself is package internal/hot.
type HotKeyOptions struct {
	// Mitigation chooses LocalCache or SplitCopies. Required.
	Mitigation Mitigation

	// MaxStaleness is the most a cached reply or a split copy may lag a
	// write made by another process (or another client): cached replies
	// and copies live at most this long. With LocalCache on servers that
	// track (see Tracking) the lag is normally only the invalidation's
	// delivery time, and MaxStaleness is the backstop. Must not be
	// negative. Default DefaultMaxStaleness (1s).
	MaxStaleness time.Duration

	// Detector configures hot-key detection. Nil means the defaults of
	// package hotkey: a key is hot above 100 commands per second and 1% of
	// this client's keyed commands, over a 10s window.
	Detector *hotkey.Config

	// CacheBytes is the LocalCache memory budget in bytes. Must not be
	// negative. Default localcache.DefaultMaxBytes (64 MiB).
	CacheBytes int64

	// Copies is, for SplitCopies, the number of shards a hot key is read from,
	// its owner included: the owner and the next Copies-1 distinct shards
	// clockwise. Must not be negative nor exceed the number of shards.
	// Default min(3, number of shards).
	Copies int

	// Tracking chooses server-assisted invalidation for LocalCache.
	// Default TrackingAuto.
	Tracking Tracking
}

// The hot-key layer (internal/hot) has its own copies of the public enums
// and constants above; these fail to compile if one differs.
var (
	_ = [1]struct{}{}[LocalCache-Mitigation(hot.LocalCache)]
	_ = [1]struct{}{}[SplitCopies-Mitigation(hot.SplitCopies)]
	_ = [1]struct{}{}[TrackingAuto-Tracking(hot.TrackingAuto)]
	_ = [1]struct{}{}[TrackingOff-Tracking(hot.TrackingOff)]
	_ = [1]struct{}{}[TrackingOn-Tracking(hot.TrackingOn)]
	_ = [1]struct{}{}[InvalidationUnprobed-InvalidationState(hot.InvalidationUnprobed)]
	_ = [1]struct{}{}[InvalidationTracking-InvalidationState(hot.InvalidationTracking)]
	_ = [1]struct{}{}[InvalidationStalenessOnly-InvalidationState(hot.InvalidationStalenessOnly)]
	_ = [1]struct{}{}[InvalidationOff-InvalidationState(hot.InvalidationOff)]
	_ = map[bool]int{false: 0, SplitCopyPrefix == hot.SplitCopyPrefix: 1}
)

// newHotPath builds the hot-key layer from resolved options: the root's
// side of its seam (hot.Env, and the hotTopology and hotBackend views).
func newHotPath(c *client, opt *HotKeyOptions) (*hot.Path, error) {
	env := hot.Env{
		Flights: c.flights,
		EachShard: func(fn func(*hot.Shard)) {
			for _, s := range c.top.Load().sources() {
				if x := s.hot.Load(); x != nil {
					fn(x)
				}
			}
		},
		IndexInternal:  indexInternal,
		DeleteInternal: deleteInternal,
		Route: func(ctx context.Context, t hot.Topology, rest redis.Cmder) error {
			// On top, which the caller counts in flight: entering again
			// could route it on a newer ring whose first move waits for
			// this very command.
			top := (*topology)(t.(*hotTopology))
			info, keys, err := command.Lookup(rest.Args(), nil)
			if err == nil {
				err = c.routeOther(ctx, top, rest, info, keys, nil, false)
			}
			return err
		},
	}
	h, err := hot.New(env, &hot.Config{
		Mitigation:   hot.Mitigation(opt.Mitigation),
		MaxStaleness: opt.MaxStaleness,
		Detector:     opt.Detector,
		CacheBytes:   opt.CacheBytes,
		Copies:       opt.Copies,
		Tracking:     hot.Tracking(opt.Tracking),
	})
	if ce := (*hot.ConfigError)(nil); errors.As(err, &ce) {
		return nil, invalid(ErrInvalidHotKeyOptions, "HotKeys."+ce.Field, "%v", ce.Err)
	}
	return h, err
}

// hotTopology is a topology as the hot-key layer sees it (hot.Topology).
// A conversion, (*hotTopology)(top), costs nothing.
type hotTopology topology

func (t *hotTopology) Epoch() uint64        { return t.epoch }
func (t *hotTopology) Guarded() bool        { return t.guarded }
func (t *hotTopology) Owner(key string) int { return t.ring.LookupIndex(key) }

func (t *hotTopology) Replicas(key string, buf []int, n int) []int {
	return t.ring.ReplicaIndexes(key, buf, n)
}

// Shard returns the backend of shard i: one value per server, whichever
// topology it is in.
func (t *hotTopology) Shard(i int) hot.Backend { return (*hotBackend)(t.shards[i].backend) }

// hotBackend is a backend as the hot-key layer sees it (hot.Backend).
type hotBackend backend

func (b *hotBackend) Client() *redis.Client { return b.client }
func (b *hotBackend) Down() bool            { return b.down.Load() }
func (b *hotBackend) HotState() *hot.Shard  { return (*backend)(b).hotState() }

func (b *hotBackend) Send(ctx context.Context, cmd redis.Cmder, blocking bool) error {
	return (*backend)(b).send(ctx, cmd, blocking)
}

func (b *hotBackend) HeartbeatClient() *redis.Client { return (*backend)(b).heartbeatClient() }
func (b *hotBackend) AutoPipelined() bool            { return b.ap != nil }

// Dial makes the tracked reads' client (connReader) or the invalidation
// subscriber's (connTracking) of the shard.
func (b *hotBackend) Dial(subscriber bool, onConnect func(context.Context, *redis.Conn) error) *redis.Client {
	kind := connReader
	if subscriber {
		kind = connTracking
	}
	return b.c.dial(b.shard, kind, onConnect)
}
