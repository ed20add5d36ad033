package hot

import (
	"context"
	"encoding/binary"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/replyval"
	"github.com/redshard/redshard/localcache"
)

// cacheable lists the read-only one-key commands whose replies depend only
// on the key's value and the arguments: LocalCache may answer them, and
// Split may answer them from a copy.
var cacheable = map[string]bool{
	"get": true, "getrange": true, "substr": true, "strlen": true, "getbit": true, "bitcount": true,
	"hget": true, "hmget": true, "hgetall": true, "hexists": true, "hlen": true, "hstrlen": true, "hkeys": true, "hvals": true,
	"lrange": true, "llen": true, "lindex": true,
	"smembers": true, "sismember": true, "smismember": true, "scard": true,
	"zrange": true, "zrangebyscore": true, "zrangebylex": true, "zrevrange": true, "zrevrangebyscore": true, "zrevrangebylex": true,
	"zscore": true, "zmscore": true, "zcard": true, "zcount": true, "zlexcount": true, "zrank": true, "zrevrank": true,
	"exists": true, "type": true,
}

// copyable lists the read-only commands that a split copy answers as well
// as the owner, but whose replies must not be cached (they are random).
var copyable = map[string]bool{"srandmember": true, "hrandfield": true, "zrandmember": true}

// replyKind returns the kind of cmd's reply (see replyval.ValueOf), or 0 if the hot
// path cannot copy it.
func replyKind(cmd redis.Cmder) byte {
	_, k := replyval.ValueOf(cmd)
	return k
}

// reply is a command's outcome as the hot path stores and shares it. The
// value is never modified once built: callers get copies.
type reply struct {
	val any
	err error // nil, redis.Nil, or (never cached) another error
}

// replyOf takes the outcome of a command of a supported kind.
func replyOf(cmd redis.Cmder) *reply {
	return &reply{val: replyval.Value(cmd), err: cmd.Err()}
}

// cacheable reports whether r may be stored: a value, or a nil reply (a
// missing key or field, which tracking and invalidation cover as well).
func (r *reply) cacheable() bool { return r.err == nil || r.err == redis.Nil }

// apply stores a copy of r in cmd, which must be of the kind r was taken
// from, and returns cmd's error.
func (r *reply) apply(cmd redis.Cmder) error {
	if r.err != nil {
		cmd.SetErr(r.err)
		return r.err
	}
	replyval.SetValue(cmd, replyval.CloneValue(r.val))
	return nil
}

// sizeOf estimates the memory of a reply value in bytes, for the cache's
// budget.
func sizeOf(v any) int64 {
	const word = 16
	switch v := v.(type) {
	case string:
		return int64(len(v)) + word
	case []string:
		n := int64(word)
		for _, s := range v {
			n += int64(len(s)) + word
		}
		return n
	case []interface{}:
		n := int64(word)
		for _, e := range v {
			n += sizeOf(e)
		}
		return n
	case map[string]string:
		n := int64(word)
		for k, s := range v {
			n += int64(len(k)+len(s)) + 2*word
		}
		return n
	case map[interface{}]interface{}:
		n := int64(word)
		for k, e := range v {
			n += sizeOf(k) + sizeOf(e)
		}
		return n
	case map[string]interface{}:
		n := int64(word)
		for k, e := range v {
			n += int64(len(k)) + word + sizeOf(e)
		}
		return n
	case []bool:
		return int64(len(v)) + word
	case []float64:
		return 8*int64(len(v)) + word
	case []redis.Z:
		n := int64(word)
		for _, z := range v {
			n += 8 + sizeOf(z.Member)
		}
		return n
	}
	return word
}

// subKey names a read of key args[keyPos] in the cache, beside its shard
// and key: the reply kind, the command's name (as the table spells it) and
// every argument after the key, length-prefixed so no two argument lists
// share a name. A read with no argument after its key (GET k, HGETALL k,
// ...) gets a name built once, so that a cache hit allocates nothing.
func subKey(kind byte, name string, args []interface{}, keyPos int) string {
	if keyPos == len(args)-1 {
		if names, ok := plainSubKeys[name]; ok && int(kind) < len(names) {
			return names[kind]
		}
	}
	b := make([]byte, 0, 48)
	b = appendSubKey(b, kind, name)
	for _, a := range args[keyPos+1:] {
		s := command.Arg(a)
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return string(b)
}

func appendSubKey(b []byte, kind byte, name string) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(name)))
	return append(b, name...)
}

// plainSubKeys are the sub-keys of the cacheable reads with no argument
// after the key, by command name and reply kind.
var plainSubKeys = func() map[string][replyval.KindCmd + 1]string {
	m := make(map[string][replyval.KindCmd + 1]string, len(cacheable))
	for name := range cacheable {
		var names [replyval.KindCmd + 1]string
		for k := range names {
			names[k] = string(appendSubKey(nil, byte(k), name))
		}
		m[name] = names
	}
	return m
}()

// getSubKey is the sub-key of GET k with a *redis.StringCmd, which hot MGET
// keys are answered as.
var getSubKey = plainSubKeys["get"][replyval.KindString]

// cachesUnhot reports whether reads of keys the detector does not find hot
// may go through the local cache on shard s. They may when the shard's
// server tracks the keys the cache holds, so that a reply lags another
// process's write only by its invalidation; a shard never asked is probed
// first (not with a nil ctx). On a shard without tracking only hot keys
// are cached, as their reply may lag such a write by MaxStaleness.
//
// Which of those keys go through the cache is then decided per read: a
// read the cache answers is a hit (unhotHit); a miss is read through the
// cache when admitsUnhot says so, else sent as it is.
func (h *Path) cachesUnhot(ctx context.Context, s Backend) bool {
	if h.cache == nil {
		return false
	}
	hs := s.HotState()
	st := InvalidationState(hs.state.Load())
	if st == InvalidationUnprobed && ctx != nil {
		st = hs.tracking(ctx)
	}
	return st == InvalidationTracking
}

// unhotHit answers cmd, a read of key named sub (see subKey), a key that is
// not hot on a shard s where cachesUnhot, from the local cache if it holds
// the reply, and reports whether it did. A hit is not counted by Admit
// (its sketch only decides what a miss caches), and the detector counts
// one hit of a reply in hitStride, at weight hitStride (Cache.GetCounted
// numbers them), so that most hits take no detector lock. On an
// auto-pipelined shard the read is counted by the yield gate, hit or miss.
func (h *Path) unhotHit(s Backend, hs *Shard, key, sub string, cmd redis.Cmder) bool {
	v, n, ok := h.cache.GetCounted(hs.id, key, sub)
	if s.AutoPipelined() {
		h.yield.count(ok)
	}
	if !ok {
		return false
	}
	if n%hitStride == 0 {
		h.det.ObserveN(key, hitStride)
	}
	h.stats.hits.Add(1)
	_ = v.(*reply).apply(cmd)
	return true
}

// admitsUnhot reports whether a miss of key, a key that is not hot, on a
// shard s where cachesUnhot, is read through the cache (a tracked read
// that fills it): on an auto-pipelined shard, while the yield gate finds
// such caching paying, or when it samples the miss (yieldGate); and when
// localcache.Cache.Admit says the key is worth it (any key while the
// cache has room, a key its frequency sketch finds read before once it is
// full).
func (h *Path) admitsUnhot(s Backend, key string) bool {
	return (!s.AutoPipelined() || h.yield.admits()) && h.cache.Admit(key)
}

// hitStride is how many cache hits of a reply of a key that is not hot
// the detector counts at once (unhotHit): the detector sees every such
// key's reads but up to hitStride-1 per cached reply, the ones since the
// reply's last multiple of hitStride when it is replaced or dropped.
const hitStride = 4

// cachedRead answers a supported read of a hot key on shard s from the local
// cache, or reads it from the shard once for every caller asking at the
// same time and caches the reply.
func (h *Path) cachedRead(ctx context.Context, top Topology, s Backend, key, sub string, cmd redis.Cmder) error {
	hs := s.HotState()
	if h.hit(hs, key, sub, cmd) || h.awaitRefill(ctx, hs, key, sub, cmd) {
		return cmd.Err()
	}
	return h.missedRead(ctx, top, s, hs, key, sub, cmd)
}

// missedRead is cachedRead after the cache missed.
func (h *Path) missedRead(ctx context.Context, top Topology, s Backend, hs *Shard, key, sub string, cmd redis.Cmder) error {
	h.stats.misses.Add(1)
	// The ticket is taken before anything is sent, and the flight's name
	// carries its generations, which every invalidation, write, lost
	// tracking connection and reply returned from the shard bumps: a read
	// that starts after one of those never shares a read sent before it.
	t := h.cache.FillTicket(hs.id, key, sub)
	var buf [128]byte // the name of most misses fits: one allocation, the string
	fk := append(buf[:0], 'r')
	fk = strconv.AppendUint(fk, top.Epoch(), 10)
	fk = append(fk, '/')
	fk = strconv.AppendInt(fk, int64(hs.id), 10)
	fk = append(fk, '/')
	fk = t.AppendStamp(fk)
	fk = append(fk, '/')
	fk = binary.AppendUvarint(fk, uint64(len(key)))
	fk = append(fk, key...)
	fk = append(fk, sub...)
	if InvalidationState(hs.state.Load()) == InvalidationTracking {
		if id := hs.live.Load(); id != 0 {
			return h.directMiss(ctx, s, hs, t, string(fk), id, key, sub, cmd)
		}
	}
	clone := cmd.Clone() // the flight must not touch a command its caller may abandon
	v, err := h.flight(ctx, string(fk), func(fctx context.Context) (any, error) {
		return h.fetch(fctx, s, hs, t, key, sub, clone), nil
	})
	if err != nil {
		cmd.SetErr(err)
		return err
	}
	return v.(*reply).apply(cmd)
}

// hit answers cmd, a read of key named sub (see subKey), from the local
// cache if it holds the reply, and reports whether it did.
func (h *Path) hit(hs *Shard, key, sub string, cmd redis.Cmder) bool {
	r, ok := h.lookup(hs, key, sub)
	if ok {
		_ = r.apply(cmd)
	}
	return ok
}

// lookup returns the cached reply of the read of key named sub, and counts
// a hit.
func (h *Path) lookup(hs *Shard, key, sub string) (*reply, bool) {
	v, ok := h.cache.Get(hs.id, key, sub)
	if !ok {
		return nil, false
	}
	h.stats.hits.Add(1)
	return v.(*reply), true
}

// fetch reads a hot key's reply from its shard for a flight whose ticket
// is t, taken before the read, and caches it when it is safe to. Either
// way, a reply it returns has made every reply of the key cached before it
// unreachable (Fill, Supersede), so that reads never go backwards: see
// docs/hot-reads.md.
func (h *Path) fetch(ctx context.Context, s Backend, hs *Shard, t localcache.Ticket, key, sub string, cmd redis.Cmder) *reply {
	// A flight that ended just before this one started may have cached the
	// reply (it waits until the cache shows it before ending).
	if v, ok := h.cache.Get(hs.id, key, sub); ok {
		return v.(*reply)
	}
	store := true
	life := h.opt.MaxStaleness
	var id int64
	switch hs.tracking(ctx) {
	case InvalidationTracking:
		if id = hs.live.Load(); id == 0 {
			// The invalidation connection is not (yet, or no longer) up:
			// nothing would tell us of a change.
			store = false
			_ = s.Client().Process(ctx, cmd)
		} else if tr := hs.trackedRead(ctx, id, key, cmd); !tr.delivered() {
			// Its batch's connection failed: read it untracked instead,
			// unless the shard is down (resend).
			store = false
			h.resend(ctx, s, cmd)
		} else if !tr.ok {
			store = false
		} else {
			life = h.lifetime(tr.pttl, tr.sent, cmd.Err())
		}
	case InvalidationStalenessOnly:
		store = h.opt.Tracking != TrackingOn
		_ = s.Client().Process(ctx, cmd)
	case InvalidationUnprobed: // the probe could not reach the server
		store = false
		_ = s.Client().Process(ctx, cmd)
	default: // InvalidationOff
		_ = s.Client().Process(ctx, cmd)
	}
	r := replyOf(cmd)
	if !r.cacheable() {
		return r // an error: no value of the key goes back to the caller
	}
	// With tracking, keep the reply only if the connection that receives
	// its invalidation is still the one the read was tracked against.
	if store && life > 0 && (id == 0 || hs.live.Load() == id) {
		size := sizeOf(r.val)
		if h.cache.Fill(t, r, size, life) && !h.cache.VisibleAtOnce(key, sub, size) {
			// Make the entry visible before the flight ends, so a caller
			// that misses from now on finds it rather than reading again.
			h.cache.Wait()
		}
	} else {
		h.cache.Supersede(key)
	}
	return r
}

// missTable is a shard's direct misses in progress, by name (the flight
// name missedRead builds: epoch, shard, the ticket's counters, key and
// sub-key), so that callers missing the same reply at the same time share
// one tracked read, as a flight's callers do.
type missTable struct {
	mu sync.Mutex
	m  map[string]*trackedReq
}

// join returns the miss named name in progress (joined true), or
// registers the one mk makes under that name. A caller that joins makes
// nothing.
func (t *missTable) join(name string, mk func() *trackedReq) (cur *trackedReq, joined bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.m[name]; ok {
		return cur, true
	}
	if t.m == nil {
		t.m = make(map[string]*trackedReq)
	}
	r := mk()
	t.m[name] = r
	return r, false
}

// remove ends r's registration under name.
func (t *missTable) remove(name string, r *trackedReq) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[name] == r {
		delete(t.m, name)
	}
}

// missFill is what a direct miss's sender needs to fill the cache with
// its reply (directFill): the miss's shard, its ticket (taken before
// anything was sent), the key and the reply's sub-key. It is part of the
// miss's trackedReq, made with it.
type missFill struct {
	s        Backend
	t        localcache.Ticket
	key, sub string
}

// directMiss is missedRead on a shard whose invalidation connection is
// live (id): the read goes, tracked, in the shard's next batch (see
// Shard.enqueue) instead of a flight of its own, so that the misses of
// many callers share round trips. Callers missing the same reply at the
// same time share one read (missTable, by the flight's name), and the
// caller that registers it queues it (no goroutine and no
// singleflight call of its own), and waits for the batch or for ctx. The
// rules are the flight's: callers share a read only under the same name
// (t's counters: see missedRead); the read is sent detached from their
// contexts, bounded by hotFetchTimeout and ended by Close; its reply goes
// through Fill or Supersede (directFill, run by the batch's sender) before
// any caller returns it.
func (h *Path) directMiss(ctx context.Context, s Backend, hs *Shard, t localcache.Ticket, name string, id int64, key, sub string, cmd redis.Cmder) error {
	var made *directReq
	cur, joined := hs.misses.join(name, func() *trackedReq {
		made = &directReq{fill: missFill{s: s, t: t, key: key, sub: sub}}
		made.req = trackedReq{ctx: ctx, id: id, key: name, done: make(chan struct{})}
		return &made.req
	})
	if directMissHook != nil {
		directMissHook(joined)
	}
	if !joined {
		r := cur
		// A miss that ended just before this one started may have cached
		// the reply (it waits until the cache shows it before ending). Such
		// a reply was just stored or read: the cache's front index holds it
		// if any part of the cache does quickly.
		if v, ok := h.cache.Recent(hs.id, key, sub); ok {
			r.rep = v.(*reply) // for a caller that joined meanwhile
			hs.misses.remove(name, r)
			close(r.done)
			return r.rep.apply(cmd)
		}
		r.cmd = cmd.Clone() // the sender must not touch a command its caller may abandon
		if h.firstReadTTL() || h.det.IsHot(key) || h.cache.ReadAgain(key) {
			// A key read again is worth a long lifetime, so its TTL is
			// read (PTTL, one more command); a first read's reply lives
			// MaxStaleness, which needs no TTL (lifetime), unless
			// MaxStaleness is the tracked lifetime itself (set by the
			// user): then every tracked reply is bounded by its key's TTL.
			r.ttlKey = key
		}
		r.fill = &made.fill
		hs.enqueue(r)
	}
	select {
	case <-cur.done:
	case <-ctx.Done():
		cmd.SetErr(ctx.Err())
		return ctx.Err()
	}
	if joined {
		h.stats.coalesced.Add(1)
	}
	return cur.rep.apply(cmd)
}

// directReq is a direct miss's request and what its fill needs, in one
// allocation.
type directReq struct {
	req  trackedReq
	fill missFill
}

// directFill is what fetch does after a tracked read, for a direct miss
// r, in its batch's sender: it sets r.rep and reports whether it filled
// the cache with an entry Get does not see at once (the sender then waits
// once, for the whole batch, until the cache shows the entries). A read whose batch failed is sent again
// untracked and stores nothing.
func (h *Path) directFill(ctx context.Context, hs *Shard, r *trackedReq) bool {
	f := r.fill
	if r.closed {
		r.rep = &reply{err: redis.ErrClosed}
		return false
	}
	store := r.ok
	if r.failed {
		store = false
		h.resend(ctx, f.s, r.cmd)
	}
	r.rep = replyOf(r.cmd)
	if !r.rep.cacheable() {
		return false // an error: no value of the key goes back to the caller
	}
	if store && hs.live.Load() == r.id {
		if life := h.lifetime(r.pttl, r.sent, r.rep.err); life > 0 {
			size := sizeOf(r.rep.val)
			return h.cache.Fill(f.t, r.rep, size, life) && !h.cache.VisibleAtOnce(f.key, f.sub, size)
		}
	}
	h.cache.Supersede(f.key)
	return false
}

// resend sends cmd, a read whose tracked batch failed other than by the
// server's reply, again untracked on the shard's client, unless the shard
// is down: then the batch failed because markDown severed its connection,
// and cmd keeps the shard's ErrShardDown (failFast's, on the reader's
// client), as a command cut off on the shard's own client does. Sent
// again, it would wait for the frozen server once more.
func (h *Path) resend(ctx context.Context, s Backend, cmd redis.Cmder) {
	if s.Down() && cmd.Err() != nil {
		return
	}
	cmd.SetErr(nil)
	_ = s.Client().Process(ctx, cmd)
}

// lifetime is how long the reply of a tracked read that the server
// accepted, followed by pttl (nil: none was sent) in a pipeline handed to
// its connection at sent, may stay cached (0 or less: it must not be): the
// tracked lifetime (Config.TrackedLifetime), bounded by what remained of
// its key's TTL when PTTL read it, in the same batch right after the read.
//
// Tracking invalidates the key when it is written, and when the server
// deletes it on expiry, but a key past its TTL is deleted only when the
// server gets to it (its active expiry cycle, or a command touching it),
// which can lag: without the bound a cached reply could outlive the key.
// The TTL is read after the read, not atomically with it, and that is
// safe: anything that changes the key or its TTL after the read (a write,
// EXPIRE, PERSIST, DEL, its deletion on expiry) invalidates the tracked
// key, and a fill whose ticket predates that invalidation stores nothing,
// or is hidden by it (docs/hot-reads.md, "Lifetime of a tracked reply").
//
// PTTL replies in milliseconds, measured by the server after the batch
// was sent and truncated to the millisecond: the TTL is counted from
// sent, less one millisecond, so the entry never outlives the key.
// PTTL -1 (no TTL) leaves the tracked lifetime. PTTL -2 (the key is gone)
// caches nothing, unless the read itself found no key (errNil is
// redis.Nil): then the absence is cached for the tracked lifetime, as
// creating the key invalidates it. A read sent without PTTL (the first
// read of a key that is not hot, when MaxStaleness is shorter than the
// tracked lifetime: see Path.firstReadTTL) and a PTTL the server refused
// (an ACL without it, say) leave MaxStaleness, the bound of a reply whose
// key's TTL is not known.
func (h *Path) lifetime(pttl *redis.Cmd, sent time.Time, errNil error) time.Duration {
	long := h.opt.TrackedLifetime
	if pttl == nil {
		return min(long, h.opt.MaxStaleness)
	}
	ms, err := pttl.Int64()
	switch {
	case err != nil:
		return min(long, h.opt.MaxStaleness)
	case ms == -1:
		return long
	case ms == -2:
		if errNil == redis.Nil {
			return long
		}
		return 0
	case ms < 0:
		return 0
	}
	left := time.Duration(ms-1)*time.Millisecond - time.Since(sent)
	return min(left, long)
}

// directMissHook, when set (tests), runs in directMiss once the miss has
// registered (joined false) or joined another (true).
var directMissHook func(joined bool)
