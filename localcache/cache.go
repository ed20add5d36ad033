package localcache

import (
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/ristretto/v2"
)

// Cache holds replies of read-only commands on hot keys, read from many
// shards, so that a client can answer them locally.
//
// A Cache is safe for concurrent use by multiple goroutines, including Close
// while other calls run. The zero Cache is not usable: create one with New.
// A nil *Cache is valid and empty: Get misses, Set refuses, and the other
// methods do nothing, so a client with caching turned off can hold a nil
// Cache. A Cache runs ristretto's goroutines until Close.
type Cache struct {
	rc    *ristretto.Cache[uint64, *entry]
	gens  *generations
	admit *sketch // Admit's frequencies
	stats counters
	guard guard

	front front
	shut  atomic.Bool   // set by Close before it closes ristretto
	seq   atomic.Uint64 // last entry.seq

	maxBytes int64
	now      func() time.Time // nil: the process's monotonic clock
	base     time.Time        // origin of expires

	beforeStore func() // test hook between the ticket check and the store
}

// entry is what ristretto stores under the hash of (shard, key, cmd). It
// carries its identity, since distinct triples may share a hash, and the
// stamp of the ticket it was read under.
type entry struct {
	shard   int
	key     string
	cmd     string
	val     any
	stamp   stamp
	expires int64         // ns since Cache.base (see Cache.elapsed)
	cost    int64         // as charged to ristretto
	seq     uint64        // order of the SetWithTicket calls that made entries
	reads   atomic.Uint32 // GetCounted's count
}

// same reports whether e and o are replies of the same (shard, key, cmd).
func (e *entry) same(o *entry) bool { return e.shard == o.shard && e.key == o.key && e.cmd == o.cmd }

// New returns a Cache configured by cfg, which may be nil for all the
// defaults. It returns an error wrapping ErrInvalidConfig if a field is out
// of range. The Cache must be closed with Close to stop its goroutines.
func New(cfg *Config) (*Cache, error) {
	conf, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cache{
		gens:     newGenerations(conf.KeyStripes),
		admit:    newSketch(conf.NumCounters),
		maxBytes: conf.MaxBytes,
		now:      conf.Now,
	}
	c.base = time.Now()
	if c.now != nil {
		c.base = c.now()
	}
	rc, err := ristretto.NewCache(&ristretto.Config[uint64, *entry]{
		NumCounters:        conf.NumCounters,
		MaxCost:            conf.MaxBytes,
		BufferItems:        conf.BufferItems,
		IgnoreInternalCost: true, // the cost we pass already includes EntryOverhead
		OnReject: func(it *ristretto.Item[*entry]) {
			c.stats.rejected.Add(1)
			c.front.forget(it.Key, it.Value)
		},
		OnEvict: func(it *ristretto.Item[*entry]) {
			c.stats.evicted.Add(1)
			c.front.forget(it.Key, it.Value)
		},
	})
	if err != nil { // unreachable with validated config; kept for safety
		return nil, err
	}
	c.rc = rc
	return c, nil
}

// refHash combines the key hash, the shard and the sub-key into ristretto's
// key. It is a private cache index, never used to route anything.
func refHash(kh uint64, shard int, cmd string) uint64 {
	x := kh ^ bits.RotateLeft64(xxhash.Sum64String(cmd), 29) ^ uint64(shard)*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Get returns the reply cached for cmd (an opaque sub-key chosen by the
// caller, such as "get" or "hget\x00field") on key as read from shard. It
// misses if there is none, if it expired, or if the key, the shard or the
// whole cache was invalidated after the reply's Ticket was taken. The
// returned value is shared: do not modify it.
func (c *Cache) Get(shard int, key, cmd string) (val any, ok bool) {
	e := c.get(shard, key, cmd)
	if e == nil {
		return nil, false
	}
	return e.val, true
}

// GetCounted is Get that also returns how many times the reply has been
// returned by GetCounted, this time included (its reads, from 1), so that
// a caller can count a fraction of its reads elsewhere (one in n, at
// weight n) and still count every key's reads exactly, give or take n-1
// per cached reply. It costs an atomic add on the entry, which Get spares.
func (c *Cache) GetCounted(shard int, key, cmd string) (val any, reads uint32, ok bool) {
	e := c.get(shard, key, cmd)
	if e == nil {
		return nil, 0, false
	}
	return e.val, e.reads.Add(1), true
}

// get is Get's lookup: the entry, or nil for a miss.
func (c *Cache) get(shard int, key, cmd string) *entry {
	if c == nil {
		return nil
	}
	kh := xxhash.Sum64String(key)
	h := refHash(kh, shard, cmd)
	r := rand.Uint32()
	st := c.stats.stripe(r)
	// The front index first: no lock, no write but the counter.
	if e := c.inFront(kh, h, shard, key, cmd); e != nil {
		st.hits.Add(1)
		return e
	}
	g, open := c.guard.enter(r)
	if !open {
		st.misses.Add(1)
		return nil
	}
	e, found := c.rc.Get(h)
	c.guard.leave(g)
	switch {
	case !found || e.shard != shard || e.key != key || e.cmd != cmd:
	case e.stamp != c.gens.current(kh, h, shard):
		st.invalidated.Add(1)
	case c.elapsed() >= e.expires:
		st.expired.Add(1)
	default:
		st.hits.Add(1)
		if e.cost <= c.maxBytes/frontShare {
			c.front.promote(h, e)
		}
		return e
	}
	st.misses.Add(1)
	return nil
}

// Recent is Get for a reply stored (or found by a Get) lately: it looks
// in the front index only, where such a reply is unless it is larger than
// VisibleAtOnce allows or a later one displaced it, and never in ristretto.
// A caller that has just missed uses it to see whether a concurrent fill
// has stored the reply meanwhile, without a second full lookup. What it
// returns passes Get's checks; a hit is counted as Get counts one, and a
// miss is not counted (the caller's Get counted it).
func (c *Cache) Recent(shard int, key, cmd string) (val any, ok bool) {
	if c == nil {
		return nil, false
	}
	kh := xxhash.Sum64String(key)
	if e := c.inFront(kh, refHash(kh, shard, cmd), shard, key, cmd); e != nil {
		c.stats.stripe(rand.Uint32()).hits.Add(1)
		return e.val, true
	}
	return nil, false
}

// inFront returns the entry of (shard, key with hash kh, cmd), whose
// ristretto hash is h, if the front index holds it and Get may return it:
// not invalidated since its ticket, not expired, the cache open.
func (c *Cache) inFront(kh, h uint64, shard int, key, cmd string) *entry {
	e := c.front.slot(h).Load()
	if e != nil && !c.shut.Load() && e.shard == shard && e.key == key && e.cmd == cmd &&
		e.stamp == c.gens.current(kh, h, shard) && c.elapsed() < e.expires {
		return e
	}
	return nil
}

// elapsed reads the clock of entry expiry, in ns since base: the injected
// one, or the process's monotonic clock.
func (c *Cache) elapsed() int64 {
	if c.now != nil {
		return int64(c.now().Sub(c.base))
	}
	return int64(time.Since(c.base))
}

// Ticket returns the current invalidation state of key on shard, for
// SetWithTicket. Take it before sending the read to the shard.
func (c *Cache) Ticket(shard int, key string) Ticket {
	if c == nil {
		return Ticket{}
	}
	kh := xxhash.Sum64String(key)
	st := c.gens.current(kh, 0, shard)
	st.fill = 0 // SetWithTicket reads the fill counter when it stores
	return Ticket{cache: c, shard: shard, key: key, kh: kh, stamp: st}
}

// FillTicket returns the current invalidation state of the reply of cmd
// on key from shard, for Fill. Take it before sending the read to the
// shard.
func (c *Cache) FillTicket(shard int, key, cmd string) Ticket {
	if c == nil {
		return Ticket{}
	}
	kh := xxhash.Sum64String(key)
	h := refHash(kh, shard, cmd)
	return Ticket{cache: c, shard: shard, key: key, kh: kh, cmd: cmd, h: h, fill: true,
		stamp: c.gens.current(kh, h, shard)}
}

// Set caches val, the reply of cmd on key read from shard, as
// SetWithTicket(c.Ticket(shard, key), ...) would: it is only correct for a
// value known to be current now. For a reply read from a shard, take a
// Ticket before the read and use SetWithTicket, or a write that lands
// between the read and Set can leave the old reply cached.
func (c *Cache) Set(shard int, key, cmd string, val any, size int64, ttl time.Duration) bool {
	return c.SetWithTicket(c.Ticket(shard, key), cmd, val, size, ttl)
}

// SetWithTicket caches val, the reply of cmd on the ticket's key and shard,
// for ttl. size is the reply's size in bytes; the entry is charged
// size + len(key) + len(cmd) + EntryOverhead against MaxBytes.
//
// It returns false, and caches nothing, if the key, the shard or the cache
// was invalidated since the ticket was taken, if the ticket is the zero
// Ticket or from another Cache, if size < 0 or ttl <= 0 (nothing is cached
// forever), if the entry is larger than MaxBytes, if ristretto's set buffer
// is full, or if the cache is closed.
//
// It returns true when ristretto accepted the entry into its set buffer.
// Ristretto applies it asynchronously: a small reply (VisibleAtOnce) and a
// reply replacing a cached one for the same (shard, key, cmd) are visible
// at once, a larger new one only once ristretto's goroutine applies it
// (Wait waits for that), and its admission policy may still refuse it
// then, or evict it any time later. So true
// means "probably cached soon", never "cached". Whatever the timing, an
// invalidation that happens after the ticket was taken hides the entry
// from every later Get, even if ristretto applies it after the
// invalidation.
func (c *Cache) SetWithTicket(t Ticket, cmd string, val any, size int64, ttl time.Duration) bool {
	if c == nil {
		return false
	}
	r := rand.Uint32()
	st := c.stats.stripe(r)
	cost := size + int64(len(t.key)) + int64(len(cmd)) + EntryOverhead
	if t.cache != c || size < 0 || ttl <= 0 || cost > c.maxBytes {
		st.dropped.Add(1)
		return false
	}
	h := refHash(t.kh, t.shard, cmd)
	now := c.gens.current(t.kh, h, t.shard)
	switch {
	case t.fill && (t.cmd != cmd || t.stamp != now),
		!t.fill && (t.stamp.key != now.key || t.stamp.shard != now.shard || t.stamp.all != now.all):
		st.outdated.Add(1)
		return false
	}
	t.stamp.fill = now.fill
	return c.store(t, h, cmd, val, cost, ttl, r, st)
}

// Fill is how a reply read from a server under t, a FillTicket, is cached
// when it is also returned to a caller: it moves the fill counter of t's
// (shard, key, sub-key) on, so that every reply of that sub-key cached
// before, or read under a ticket taken before, becomes unreachable, and
// caches val in their place.
//
// If an invalidation of the key, the shard or the cache, a Supersede of
// the key, or another Fill of the sub-key (or of one sharing its stripe)
// happened since t was taken, Fill caches nothing (the reply may be older
// than one already cached or returned) and returns false, but it still
// moves the fill counter on: the reply about to be returned may be newer
// than the cached one. Otherwise it returns what SetWithTicket would: true
// when ristretto accepted the entry into its set buffer.
//
// Fill is what keeps a client's reads from going backwards: see the
// package documentation, "Monotonic reads".
func (c *Cache) Fill(t Ticket, val any, size int64, ttl time.Duration) bool {
	return c.FillAbsorbing(t, 0, val, size, ttl)
}

// FillAbsorbing is Fill for a reply read under t that the caller knows to
// be newer than the events behind absorbed bumps of t's key counter (its
// stripe's; see KeyStripe) made since t was taken: the invalidation
// messages of writes the server executed before it executed this read,
// and InvalidateKey calls made for writes that this read followed. Those
// bumps do not refuse the reply; any other one does, as
// in Fill. So the check is that the key counter moved by exactly absorbed
// since t (counting a bump the caller did not make as absorbed would let
// an older reply outlive a newer one: only count bumps made after t was
// taken), and the entry is stored under the counter as it is then, so
// that every later bump hides it. FillAbsorbing(t, 0, ...) is Fill.
func (c *Cache) FillAbsorbing(t Ticket, absorbed uint64, val any, size int64, ttl time.Duration) bool {
	return c.fill(t, absorbed, val, size, ttl, true)
}

// Refill is FillAbsorbing for a reply that is returned to no caller, such
// as the re-read that follows a write in its round trip to refill the
// key's cached reply: when it is refused because the counters moved, it
// moves nothing itself, so that it does not hide a newer entry stored
// meanwhile (another refill's). Fill's bump on refusal is there only for
// the reply its caller is about to return, which a refill does not have.
func (c *Cache) Refill(t Ticket, absorbed uint64, val any, size int64, ttl time.Duration) bool {
	return c.fill(t, absorbed, val, size, ttl, false)
}

// fill is FillAbsorbing, and Refill when returned is false: then a reply
// the counters already refuse moves no counter, and only one refused
// after its compare-and-swap (something moved them in between) leaves
// the fill counter moved, which hides more, never less.
func (c *Cache) fill(t Ticket, absorbed uint64, val any, size int64, ttl time.Duration, returned bool) bool {
	if c == nil {
		return false
	}
	r := rand.Uint32()
	st := c.stats.stripe(r)
	if t.cache != c || !t.fill {
		st.dropped.Add(1)
		return false
	}
	ctr := c.gens.fill(t.h)
	if !returned {
		want := t.stamp
		want.key += absorbed
		if want != c.gens.current(t.kh, t.h, t.shard) {
			st.outdated.Add(1)
			return false
		}
	}
	if !ctr.CompareAndSwap(t.stamp.fill, t.stamp.fill+1) {
		if returned {
			ctr.Add(1)
		}
		st.outdated.Add(1)
		return false
	}
	t.stamp.fill++
	t.stamp.key += absorbed
	cost := size + int64(len(t.key)) + int64(len(t.cmd)) + EntryOverhead
	if size < 0 || ttl <= 0 || cost > c.maxBytes {
		st.dropped.Add(1)
		return false
	}
	if t.stamp != c.gens.current(t.kh, t.h, t.shard) {
		// The key, the shard or the cache was invalidated (or, since the
		// swap, the sub-key filled again): hide what may be cached (the
		// swap has, for a refill).
		if returned {
			ctr.Add(1)
		}
		st.outdated.Add(1)
		return false
	}
	return c.store(t, t.h, t.cmd, val, cost, ttl, r, st)
}

// KeyStripe returns the number of key's invalidation stripe: two keys
// with the same number share a key counter, so that InvalidateKey or
// Supersede of one bumps the counter of the other (see
// Config.KeyStripes). A caller counting bumps for FillAbsorbing counts
// those of every key of the stripe.
func (c *Cache) KeyStripe(key string) uint64 {
	if c == nil {
		return 0
	}
	return c.gens.keyIndex(xxhash.Sum64String(key))
}

// Holds reports whether Get would return a reply of cmd on key from shard
// now, without counting a hit or a miss in Stats (ristretto counts an
// access when the front index does not hold it). A caller uses it to decide whether a reply is worth
// refreshing; like any answer about a concurrent cache, it may be out of
// date when it returns.
func (c *Cache) Holds(shard int, key, cmd string) bool {
	if c == nil || c.shut.Load() {
		return false
	}
	kh := xxhash.Sum64String(key)
	h := refHash(kh, shard, cmd)
	e := c.front.slot(h).Load()
	if e == nil || !(e.shard == shard && e.key == key && e.cmd == cmd) {
		g, open := c.guard.enter(rand.Uint32())
		if !open {
			return false
		}
		var found bool
		e, found = c.rc.Get(h)
		c.guard.leave(g)
		if !found || e == nil || !(e.shard == shard && e.key == key && e.cmd == cmd) {
			return false
		}
	}
	return e.stamp == c.gens.current(kh, h, shard) && c.elapsed() < e.expires
}

// Supersede makes every cached reply of key unreachable, as InvalidateKey
// does, because a reply of key newer than they may be was read from a
// server outside the cache and is about to be returned (a read the cache
// did not answer). Call it after the reply arrived and before returning it.
// It is not counted as an invalidation.
func (c *Cache) Supersede(key string) {
	if c == nil {
		return
	}
	c.gens.keys[c.gens.keyIndex(xxhash.Sum64String(key))].Add(1)
}

// store hands e to ristretto once its ticket has been checked.
func (c *Cache) store(t Ticket, h uint64, cmd string, val any, cost int64, ttl time.Duration, r uint32, st *counterStripe) bool {
	e := &entry{shard: t.shard, key: t.key, cmd: cmd, val: val, stamp: t.stamp, cost: cost,
		expires: c.elapsed() + int64(ttl), seq: c.seq.Add(1)}
	if c.beforeStore != nil {
		c.beforeStore()
	}
	g, open := c.guard.enter(r)
	if !open {
		st.dropped.Add(1)
		return false
	}
	// A small entry goes to the front index first, so that Get finds it
	// as soon as this returns, before ristretto's goroutine applies it (a
	// caller that fills after a miss needs no Wait: VisibleAtOnce); a
	// rejection or eviction by ristretto, which can only follow the Set,
	// clears the slot again. A large one only empties the slot of an
	// older reply of its triple, which ristretto replaces at once.
	small := cost <= c.maxBytes/frontShare
	if small {
		c.front.promote(h, e)
	}
	ok := c.rc.SetWithTTL(h, e, cost, ttl)
	c.guard.leave(g)
	if !ok {
		c.front.forget(h, e)
		st.dropped.Add(1)
		return false
	}
	if !small {
		c.front.replace(h, e, false)
	}
	st.sets.Add(1)
	return true
}

// VisibleAtOnce reports whether a reply of size bytes, of cmd on key,
// that SetWithTicket or Fill accepted is seen by Get as soon as the call
// returns: a small entry is (unless a later store of another reply
// sharing its front slot displaced it first, when Get finds it once
// ristretto applied it); a larger one only once ristretto's goroutine has
// applied it, which Wait waits for.
func (c *Cache) VisibleAtOnce(key, cmd string, size int64) bool {
	if c == nil {
		return false
	}
	return size+int64(len(key))+int64(len(cmd))+EntryOverhead <= c.maxBytes/frontShare
}

// InvalidateKey makes every cached reply of key unreachable, for all
// sub-keys and all shards, including replies whose Set is still buffered
// or in flight. When it returns, no Get returns a reply read under a
// Ticket taken before the call. It also drops the replies of the keys that
// share key's generation stripe (see Config.KeyStripes). Memory is
// reclaimed later, by TTL, eviction or overwrite. It works, and costs one
// atomic add, on a closed Cache too.
func (c *Cache) InvalidateKey(key string) {
	if c == nil {
		return
	}
	c.gens.keys[c.gens.keyIndex(xxhash.Sum64String(key))].Add(1)
	c.stats.keyInvalidations.Add(1)
}

// InvalidateShard makes every reply read from shard unreachable, as
// InvalidateKey does for a key. Call it when the shard's invalidation
// messages may have been lost, such as when its tracking connection drops.
// Shards that are equal modulo ShardStripes share a generation.
func (c *Cache) InvalidateShard(shard int) {
	if c == nil {
		return
	}
	c.gens.shards[shardIndex(shard)].Add(1)
	c.stats.shardInvalidations.Add(1)
}

// Clear makes every cached reply unreachable, as InvalidateKey does for a
// key, and then empties ristretto to free the memory at once.
func (c *Cache) Clear() {
	if c == nil {
		return
	}
	c.gens.all.Add(1)
	c.stats.clears.Add(1)
	c.front.clear()
	g, open := c.guard.enter(rand.Uint32())
	if !open {
		return
	}
	defer c.guard.leave(g)
	c.rc.Clear()
}

// Stats returns a snapshot of the cache's counters.
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	s := c.stats.snapshot()
	s.MaxBytes = c.maxBytes
	if g, open := c.guard.enter(rand.Uint32()); open {
		s.Bytes = c.maxBytes - c.rc.RemainingCost()
		c.guard.leave(g)
	}
	return s
}

// Wait blocks until every Set accepted before the call has been applied (or
// refused by the admission policy). A client needs it only to make a large
// entry visible (see VisibleAtOnce); it costs a round trip through
// ristretto's goroutine.
func (c *Cache) Wait() {
	if c == nil {
		return
	}
	g, open := c.guard.enter(rand.Uint32())
	if !open {
		return
	}
	defer c.guard.leave(g)
	c.rc.Wait()
}

// Close stops ristretto's goroutines and drops every entry. It waits for
// calls in progress, and it is idempotent. After Close, Get misses, Set
// returns false, and Wait and Clear do nothing.
func (c *Cache) Close() {
	if c == nil {
		return
	}
	c.shut.Store(true)
	c.guard.close(c.rc.Close)
	c.front.clear()
}
