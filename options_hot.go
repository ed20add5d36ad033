package redshard

import (
	"fmt"
	"time"

	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/localcache"
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

// DefaultMaxStaleness is HotKeyOptions.MaxStaleness when left zero: how
// long a split copy, or a cached reply from a shard without tracking,
// lives at most.
const DefaultMaxStaleness = time.Second

// DefaultTrackedLifetime is how long a LocalCache reply read with CLIENT
// TRACKING lives at most when HotKeyOptions.MaxStaleness is left zero, and
// only until its key's TTL ends, which the same round trip reads (PTTL):
// the server's invalidation, not this lifetime, is what keeps it fresh.
// It applies to the reads of a key read again or hot; a key's first read
// is sent without PTTL, and its reply lives DefaultMaxStaleness (with
// MaxStaleness set, every tracked read sends PTTL).
const DefaultTrackedLifetime = time.Minute

// defaultCopies is the default number of shards a split hot key is read
// from (capped by the number of shards).
const defaultCopies = 3

// HotKeyOptions turns on hot-key detection and mitigation (Options.HotKeys).
//
// Every command on one key is counted by a streaming detector (package
// hotkey); a key whose rate and share of this client's traffic pass the
// detector's thresholds is hot. Reads of a hot key are then taken off its
// shard as Mitigation says; other keys and writes go to their shard as
// without HotKeyOptions. With LocalCache, on a shard whose server tracks,
// a single-key read of a key that is not hot is cached too while the
// cache has room, and once it is full when the cache's frequency sketch
// has seen the key read before (localcache.Cache.Admit; see
// docs/hot-reads.md). With Options.AutoPipeline, where such a miss costs
// more than the AutoPipeliner's plain read, only while at least half of
// such reads are hits; while fewer are, one miss in 64 is cached. The cached
// replies of such keys are counted by the detector four hits at a time
// (up to three hits of each cached reply go uncounted), so that a hit
// rarely takes the detector's lock.
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
	// negative, nor below 1ms.
	//
	// Left zero, it is DefaultMaxStaleness (1s) for split copies and for
	// replies cached without tracking (a shard that refuses it,
	// TrackingOff, a read made while the shard's invalidation connection
	// is down, the first read of a key), and DefaultTrackedLifetime (1
	// minute) for a reply read with tracking of a key read again or hot,
	// or refreshed after a write, which also lives no longer than its
	// key's remaining TTL (read with PTTL in the same round trip). Set, it
	// bounds every reply and copy alike, tracked replies still no longer
	// than their key's TTL: every tracked read, a key's first included,
	// then sends PTTL.
	MaxStaleness time.Duration

	// Detector configures hot-key detection. Nil means the defaults of
	// package hotkey: a key is hot above 100 commands per second and 1% of
	// this client's keyed commands, over a 10s window.
	Detector *hotkey.Config

	// CacheBytes is the LocalCache memory budget in bytes: the cached
	// replies, their keys and their bookkeeping stay within it. The
	// cache's counters take a fixed 1/16 of it more (its invalidation
	// stripes, see localcache.Config.KeyStripes) and its admission sketch
	// about 1/64. Must not be negative. Default localcache.DefaultMaxBytes
	// (64 MiB).
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

// hotConfig is HotKeyOptions resolved: the defaults filled in, and what
// follows from the fields as the caller set them.
type hotConfig struct {
	HotKeyOptions

	// trackedLifetime is the longest a tracked reply lives:
	// DefaultTrackedLifetime if MaxStaleness was left zero, else
	// MaxStaleness.
	trackedLifetime time.Duration
}

// resolve validates o against a client of n shards and returns a copy with
// the defaults filled in.
func (o *HotKeyOptions) resolve(n int) (hotConfig, error) {
	r := hotConfig{HotKeyOptions: *o}
	k := ErrInvalidHotKeyOptions
	switch {
	case r.Mitigation != LocalCache && r.Mitigation != SplitCopies:
		return r, invalid(k, "HotKeys.Mitigation", "%v: choose LocalCache or SplitCopies", r.Mitigation)
	case r.MaxStaleness < 0:
		return r, invalid(k, "HotKeys.MaxStaleness", "%v is negative", r.MaxStaleness)
	case r.MaxStaleness > 0 && r.MaxStaleness < time.Millisecond:
		return r, invalid(k, "HotKeys.MaxStaleness", "%v is below 1ms (copies expire in milliseconds)", r.MaxStaleness)
	case r.CacheBytes < 0:
		return r, invalid(k, "HotKeys.CacheBytes", "%d is negative", r.CacheBytes)
	case r.CacheBytes > maxCacheBytes():
		return r, invalid(k, "HotKeys.CacheBytes", "%d is more than this machine's memory (%d bytes)", r.CacheBytes, maxCacheBytes())
	case r.Copies < 0 || r.Copies > n:
		return r, invalid(k, "HotKeys.Copies", "%d is outside [0, %d shards]", r.Copies, n)
	case r.Tracking < TrackingAuto || r.Tracking > TrackingOn:
		return r, invalid(k, "HotKeys.Tracking", "%v", r.Tracking)
	}
	r.trackedLifetime = r.MaxStaleness
	if r.MaxStaleness == 0 {
		r.MaxStaleness = DefaultMaxStaleness
		r.trackedLifetime = DefaultTrackedLifetime
	}
	if r.CacheBytes == 0 {
		r.CacheBytes = localcache.DefaultMaxBytes
	}
	if r.Copies == 0 {
		r.Copies = min(defaultCopies, n)
	}
	if r.Detector != nil {
		d := *r.Detector
		r.Detector = &d
		if _, err := hotkey.New(&d); err != nil {
			return r, invalid(k, "HotKeys.Detector", "%v", err)
		}
	}
	return r, nil
}

// maxCacheBytes is the largest LocalCache budget accepted: the machine's
// memory where it is known, else 1 TiB.
func maxCacheBytes() int64 {
	if m := physicalMemory(); m > 0 {
		return m
	}
	return 1 << 40
}
