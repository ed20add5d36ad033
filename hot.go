package redshard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/command"
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
// without HotKeyOptions.
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
// drops the shard's cached replies. The argument is in docs/hot-reads.md.
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

const (
	// hotFetchTimeout bounds a shared read, fill or copy deletion, which run
	// detached from the contexts of the callers waiting for them.
	hotFetchTimeout = 5 * time.Second
	// hotTopN is how many keys HotKeys and Stats report at most.
	hotTopN = 20
)

// hotPath is the hot-key layer between routing and the shard clients: it
// counts keys, serves hot reads from the local cache or split copies, and
// invalidates both on writes. It is safe for concurrent use.
type hotPath struct {
	c        *client
	opt      HotKeyOptions // resolved
	det      *hotkey.Detector
	cache    *localcache.Cache // nil unless LocalCache
	split    *splitRegistry    // nil unless SplitCopies
	instance string            // random tag naming this client's split copies

	flights singleflight.Group // shared reads and copy fills, run by Client.flights

	nextID  atomic.Int64 // hotShard ids, the cache's shard numbers
	charges atomic.Int64 // hot-key work counted by charge (SplitCopies)

	stats hotCounters
}

// hotCounters are the hot-key layer's event counters.
type hotCounters struct {
	hits, misses  atomic.Int64 // LocalCache reads answered locally / not
	coalesced     atomic.Int64 // callers that shared another caller's flight
	splitReads    atomic.Int64 // reads answered by a split copy
	fallbacks     atomic.Int64 // copy reads that went on to the owner
	fills         atomic.Int64 // copies made
	invalidations atomic.Int64 // keys named by tracking messages
	trackingLost  atomic.Int64 // times a shard's cached replies were dropped with its tracking
}

// newHotPath builds the hot-key layer from resolved options.
func newHotPath(c *client, opt *HotKeyOptions) (*hotPath, error) {
	det, err := hotkey.New(opt.Detector)
	if err != nil {
		return nil, invalid(ErrInvalidHotKeyOptions, "HotKeys.Detector", "%v", err)
	}
	var tag [8]byte
	_, _ = rand.Read(tag[:]) // never fails (crypto/rand)
	h := &hotPath{c: c, opt: *opt, det: det, instance: hex.EncodeToString(tag[:])}
	switch opt.Mitigation {
	case LocalCache:
		if h.cache, err = localcache.New(&localcache.Config{MaxBytes: opt.CacheBytes}); err != nil {
			return nil, invalid(ErrInvalidHotKeyOptions, "HotKeys.CacheBytes", "%v", err)
		}
	case SplitCopies:
		h.split = newSplitRegistry()
	}
	return h, nil
}

// process runs a command routed to shard i (class Keyed or Channel, or a
// one-key Split command; owner up). Every key is counted; a write's keys
// are invalidated after it ran, before process returns; a supported read
// of a hot key goes to the local cache or a split copy.
func (h *hotPath) process(ctx context.Context, top *topology, info command.Info, cmd redis.Cmder, keys []int, i int) error {
	s := top.shards[i]
	blocking := info.Flags&command.Blocking != 0
	// Split-class commands (EXISTS, DEL, ...) come here only with one key.
	if len(keys) == 0 || (info.Class != command.Keyed && (info.Class != command.Split || len(keys) != 1)) {
		return s.send(ctx, cmd, blocking)
	}
	args := cmd.Args()
	// Neither Write nor ReadOnly (EVAL, FCALL, ...) may write: treat as a write.
	if info.Flags&command.ReadOnly == 0 {
		h.observe(args, keys)
		err := s.send(ctx, cmd, blocking)
		if h.split != nil && h.det.IsHot(command.Arg(args[keys[0]])) {
			h.charge(s, 1)
		}
		h.invalidate(args, keys)
		return err
	}
	key := command.Arg(args[keys[0]])
	// One call counts the key and says whether it is hot: for a hot key,
	// an atomic add on its own counter, no lock.
	hot := h.det.ObserveHot(key)
	for _, k := range keys[1:] {
		h.det.Observe(command.Arg(args[k]))
	}
	if len(keys) != 1 || !hot {
		err := s.send(ctx, cmd, blocking)
		h.served(info, args, keys, err)
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
	err := s.send(ctx, cmd, blocking)
	h.served(info, args, keys, err)
	return err
}

// metaReads are the read-only commands whose replies say nothing of a
// key's value: the server answering them does not supersede cached replies.
var metaReads = map[string]bool{
	"ttl": true, "pttl": true, "expiretime": true, "pexpiretime": true, "object": true, "memory": true,
}

// served is told of a read the local cache did not answer, after its
// reply arrived and before it is returned (err is its error): a reply
// about the keys' values (not an error, not a metaRead) makes their cached
// replies unreachable, since it may be newer than they are. It is what
// keeps a cached reply from being returned after a newer reply of the key
// that bypassed the cache (see docs/hot-reads.md).
func (h *hotPath) served(info command.Info, args []interface{}, keys []int, err error) {
	if h.cache == nil || (err != nil && err != redis.Nil) || metaReads[info.Name] {
		return
	}
	for _, k := range keys {
		h.cache.Supersede(command.Arg(args[k]))
	}
}

// written is told about every write that went through a path other than
// process (split commands, pipelines, transactions, Watch, a one-shard
// ring's commands sent as they are), after it ran. Its keys' cached replies
// and split copies are gone when it returns. A write that names no key but
// may write some drops everything (see writesUnnamedKeys).
func (h *hotPath) written(_ *topology, info command.Info, args []interface{}, keys []int) {
	if len(keys) == 0 {
		if writesUnnamedKeys(info) {
			h.invalidateAll()
		}
		return
	}
	h.observe(args, keys)
	h.invalidate(args, keys)
}

// writesUnnamedKeys reports whether a command that names no key may still
// write keys: a keyless write (FLUSHDB, SWAPDB), or, as a one-shard ring
// sends them as they are, a script with no declared key or a command the
// table does not know (or cannot parse). Connection and server commands
// that write no key (PING, CONFIG SET, CLIENT SETNAME) do not.
func writesUnnamedKeys(info command.Info) bool {
	if info.Class == command.Keyed || info.Class == command.Unknown {
		return mayWrite(info)
	}
	return info.Flags&command.Write != 0
}

// observe counts the keys of a command that does not go through process
// (a read in a pipeline or a split MGET, say), so that the detector sees
// all the traffic. It is cheap: one hash and one uncontended lock per key.
func (h *hotPath) observe(args []interface{}, keys []int) {
	for _, k := range keys {
		h.det.Observe(command.Arg(args[k]))
	}
}

// invalidate drops the cached replies and split copies of the given keys.
func (h *hotPath) invalidate(args []interface{}, keys []int) {
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

// invalidateAll drops every cached reply and forgets every split copy (a
// keyless write such as FLUSHDB removed them from the servers, or will).
func (h *hotPath) invalidateAll() {
	if h.cache != nil {
		h.cache.Clear()
	}
	if h.split != nil {
		h.split.forgetAll()
	}
}

// flight runs fn once for all callers asking with the same key at the same
// time (see flights.do), bounded by hotFetchTimeout and by Close.
func (h *hotPath) flight(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	v, joined, err := h.c.flights.do(ctx, &h.flights, key, hotFetchTimeout, fn)
	if joined && ctx.Err() == nil {
		h.stats.coalesced.Add(1)
	}
	return v, err
}

// close releases the local cache. The shards' tracking state is closed with
// their backends, and the flights by Client.Close, before.
func (h *hotPath) close() { h.cache.Close() }

// isSplitCopy reports whether key is the name of a split copy of a hot key.
func isSplitCopy(key string) bool { return strings.HasPrefix(key, SplitCopyPrefix) }

// copyName is the name of this client's split copies of key.
func (h *hotPath) copyName(key string) string {
	return SplitCopyPrefix + h.instance + ":" + key
}
