package hot

import (
	"context"
	"github.com/redshard/redshard/internal/parallel"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redshard/redshard/internal/rediserr"

	"github.com/redshard/redshard/internal/command"
)

// Split copies
//
// A hot key's reads are spread at random over its owner and the next
// Copies-1 distinct shards clockwise. Each of those shards holds this
// client's copy of the key, named copyName(key), made from the owner with
// DUMP and RESTORE and expiring after MaxStaleness. Copies are per client (the name carries a random tag), so that
// only this client writes them and its registry knows exactly which exist.
//
// The registry is the source of truth for reads: a copy is read only while
// the registry says it is live. A write through the client bumps the key's
// generation, forgets its copies, and then deletes them, all before it
// returns. A fill records the generation before its DUMP and marks the copy
// live after its RESTORE only if the generation is unchanged; otherwise it
// deletes what it restored. So a fill that read the old value while a write
// landed can never make a stale copy readable, and a read that starts after
// the write returned finds no live copy until a fill made after the write
// completes. Fills of one copy never overlap (one flight per copy), and no
// fill starts while a write is deleting the key's copies (readers wait for
// the delete, one round trip, then fill), so a late delete never removes a
// fresh copy either.

const splitStripes = 64 // a power of two

// splitRegistry knows this client's split copies. It is safe for
// concurrent use.
type splitRegistry struct {
	seq     atomic.Uint64 // source of generations, unique across keys
	entries atomic.Int64  // entries in all stripes: writes skip the lock when 0
	stripes [splitStripes]splitStripe
}

type splitStripe struct {
	mu sync.Mutex
	m  map[string]*splitEntry // guarded by mu, as are the entries' fields
}

// splitEntry is one hot key's copies.
type splitEntry struct {
	gen    uint64
	copies map[Backend]time.Time // live until
	// absentUntil: the last fill found no key on the owner (or one that
	// cannot be copied there): until then, reads go to the owner.
	absentUntil time.Time
	filling     int           // fills in progress
	deleting    int           // writes deleting the copies
	deleted     chan struct{} // closed when deleting drops back to 0
}

func newSplitRegistry() *splitRegistry {
	r := &splitRegistry{}
	for i := range r.stripes {
		r.stripes[i].m = map[string]*splitEntry{}
	}
	return r
}

func (r *splitRegistry) stripe(key string) *splitStripe {
	return &r.stripes[xxhash.Sum64String(key)&(splitStripes-1)]
}

// entry returns key's entry, creating it. Caller holds st.mu.
func (r *splitRegistry) entry(st *splitStripe, key string, now time.Time) *splitEntry {
	if e := st.m[key]; e != nil {
		return e
	}
	if len(st.m) >= 32 {
		r.sweep(st, now)
	}
	e := &splitEntry{gen: r.seq.Add(1), copies: map[Backend]time.Time{}}
	st.m[key] = e
	r.entries.Add(1)
	return e
}

// sweep forgets the entries of keys that have nothing live and nothing in
// progress. Caller holds st.mu.
func (r *splitRegistry) sweep(st *splitStripe, now time.Time) {
	for k, e := range st.m {
		if e.filling > 0 || e.deleting > 0 || now.Before(e.absentUntil) {
			continue
		}
		live := false
		for _, until := range e.copies {
			live = live || now.Before(until)
		}
		if !live {
			delete(st.m, k)
			r.entries.Add(-1)
		}
	}
}

// splitRead answers a read of hot key (at args[kpos]) owned by shard i from
// a copy or from the owner, chosen at random.
func (h *Path) splitRead(ctx context.Context, top Topology, info command.Info, i int, key string, kpos int, cmd redis.Cmder) error {
	owner := top.Shard(i)
	var buf [8]int
	places := top.Replicas(key, buf[:0], h.opt.Copies)
	j := h.choose(top, places)
	if j == i {
		h.charge(owner, 1)
		return owner.Client().Process(ctx, cmd)
	}
	b := top.Shard(j)
	if b.Down() || !h.copyReady(ctx, key, owner, b) {
		h.charge(owner, 1)
		return owner.Client().Process(ctx, cmd)
	}
	clone := cmd.Clone()
	clone.Args()[kpos] = h.copyName(key)
	h.charge(b, 1)
	_ = b.Client().Process(ctx, clone)
	r := replyOf(clone)
	if r.err != nil && r.err != redis.Nil || emptyReply(info.Name, r) {
		// Either the copy is gone (evicted, flushed) or the reply is empty
		// anyway: only the owner can tell which, so it answers.
		if missingReply(info.Name, r) {
			h.split.dropCopy(key, b)
		}
		h.stats.fallbacks.Add(1)
		h.charge(owner, 1)
		return owner.Client().Process(ctx, cmd)
	}
	h.stats.splitReads.Add(1)
	return r.apply(cmd)
}

// choose picks the place (a shard index) a split read goes to: the less
// loaded of two picked at random, by the hot-key work this client sent to
// each lately (reads, fills, deletes, writes of hot keys). Picking at
// random alone would leave the owner busiest, as it also takes the
// writes and the DUMPs of the fills.
func (h *Path) choose(top Topology, places []int) int {
	n := len(places)
	if n == 1 {
		return places[0]
	}
	a := rand.IntN(n)
	b := rand.IntN(n - 1)
	if b >= a {
		b++
	}
	pa, pb := places[a], places[b]
	if top.Shard(pb).HotState().load.Load() < top.Shard(pa).HotState().load.Load() {
		return pb
	}
	return pa
}

// loadDecayEvery is the number of charges after which every shard's load
// is halved, so that choose follows the recent work.
const loadDecayEvery = 1 << 15

// charge counts n commands of hot-key work sent to s (see choose).
func (h *Path) charge(s Backend, n int64) { h.chargeState(s.HotState(), n) }

func (h *Path) chargeState(hs *Shard, n int64) {
	hs.load.Add(n)
	if h.charges.Add(n)%loadDecayEvery < n {
		h.env.EachShard(func(x *Shard) {
			x.load.Store(x.load.Load() / 2) // racing charges may be lost: it is a heuristic
		})
	}
}

// copyReady reports whether this client's copy of key on b is live, making
// it first if it is not (once, however many callers ask).
func (h *Path) copyReady(ctx context.Context, key string, owner, b Backend) bool {
	st := h.split.stripe(key)
	for {
		now := time.Now()
		st.mu.Lock()
		e := st.m[key]
		if e == nil {
			st.mu.Unlock()
			break
		}
		if until, ok := e.copies[b]; ok && now.Before(until) {
			st.mu.Unlock()
			return true
		}
		if now.Before(e.absentUntil) {
			st.mu.Unlock()
			return false
		}
		if e.deleting == 0 {
			st.mu.Unlock()
			break
		}
		// A write is deleting the copies: wait for it (one round trip) and
		// fill after it, rather than pile onto the owner meanwhile.
		deleted := e.deleted
		st.mu.Unlock()
		select {
		case <-deleted:
		case <-ctx.Done():
			return false
		}
	}

	fk := "f" + strconv.Itoa(b.HotState().id) + "/" + key
	if _, err := h.flight(ctx, fk, func(fctx context.Context) (any, error) {
		h.fill(fctx, key, owner, b)
		return nil, nil
	}); err != nil {
		return false
	}
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if e := st.m[key]; e != nil {
		until, ok := e.copies[b]
		return ok && now.Before(until)
	}
	return false
}

// fill copies key from its owner to b and marks the copy live, unless a
// write through the client bumped the key's generation meanwhile.
func (h *Path) fill(ctx context.Context, key string, owner, b Backend) {
	r := h.split
	st := r.stripe(key)
	start := time.Now()
	st.mu.Lock()
	e := r.entry(st, key, start)
	if until, ok := e.copies[b]; (ok && start.Before(until)) || e.deleting > 0 {
		st.mu.Unlock()
		return
	}
	gen := e.gen
	e.filling++
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		e.filling--
		st.mu.Unlock()
	}()
	current := func() bool { return st.m[key] == e && e.gen == gen } // caller holds st.mu

	// The copy lives MaxStaleness whatever the key's own TTL: like a cached
	// reply, it may outlive the key's expiry by that much at most. (Asking
	// for the PTTL too would double the owner's share of the fill work.)
	ttl := h.opt.MaxStaleness
	h.charge(owner, 1)
	dump := owner.Client().Dump(ctx, key)
	absent := false
	switch err := dump.Err(); {
	case err == redis.Nil:
		absent = true
	case rediserr.Is(err): // a type the server cannot DUMP (miniredis): the owner serves it
		absent = true
	case err != nil:
		return // unreachable now: the next read tries again
	}
	if absent {
		st.mu.Lock()
		if current() {
			e.absentUntil = start.Add(h.opt.MaxStaleness)
		}
		st.mu.Unlock()
		return
	}
	name := h.copyName(key)
	h.charge(b, 1)
	restore := redis.NewStatusCmd(ctx, "restore", name, ttl.Milliseconds(), dump.Val(), "replace")
	if err := h.env.IndexInternal(ctx, b.Client(), restore, name); err != nil {
		return
	}
	h.stats.fills.Add(1)
	st.mu.Lock()
	ok := current()
	if ok {
		// From the DUMP's start: the copy never outlives MaxStaleness
		// counted from the state it shows.
		e.copies[b] = start.Add(ttl)
	}
	st.mu.Unlock()
	if !ok {
		h.charge(b, 1)
		_ = h.env.DeleteInternal(ctx, b.Client(), name)
	}
}

// written forgets key's copies and deletes them; it returns when they are
// deleted (or the deletes failed: the copies are unreadable either way and
// expire on their own).
func (r *splitRegistry) written(h *Path, key string) {
	if r.entries.Load() == 0 {
		return
	}
	st := r.stripe(key)
	st.mu.Lock()
	e := st.m[key]
	if e == nil {
		st.mu.Unlock()
		return
	}
	e.gen = r.seq.Add(1)
	e.absentUntil = time.Time{}
	var dels []Backend
	for b := range e.copies {
		dels = append(dels, b)
	}
	clear(e.copies)
	if len(dels) == 0 {
		st.mu.Unlock()
		return
	}
	if e.deleting == 0 {
		e.deleted = make(chan struct{})
	}
	e.deleting++
	st.mu.Unlock()

	ctx, cancel := context.WithTimeout(h.env.Flights.Context(), hotFetchTimeout)
	name := h.copyName(key)
	parallel.Run(len(dels), func(i int) {
		h.chargeState(dels[i].HotState(), 1)
		_ = h.env.DeleteInternal(ctx, dels[i].Client(), name)
	})
	cancel()
	st.mu.Lock()
	if e.deleting--; e.deleting == 0 {
		close(e.deleted)
	}
	st.mu.Unlock()
}

// dropCopy forgets key's copy on b, found missing by a read.
func (r *splitRegistry) dropCopy(key string, b Backend) {
	st := r.stripe(key)
	st.mu.Lock()
	if e := st.m[key]; e != nil {
		delete(e.copies, b)
	}
	st.mu.Unlock()
}

// forgetAll forgets every copy (after FLUSHDB or FLUSHALL through the
// client) and makes every fill in progress discard its copy.
func (r *splitRegistry) forgetAll() {
	for i := range r.stripes {
		st := &r.stripes[i]
		st.mu.Lock()
		for _, e := range st.m {
			e.gen = r.seq.Add(1)
			e.absentUntil = time.Time{}
			clear(e.copies)
		}
		st.mu.Unlock()
	}
}

// emptyReply reports whether a reply read from a copy is one that a missing
// key would also give (a nil, zero, false, "none" or empty reply): only
// the owner can then tell whether the key is really empty there.
func emptyReply(name string, r *reply) bool {
	if r.err == redis.Nil {
		return true
	}
	switch v := r.val.(type) {
	case nil:
		return true
	case string:
		return v == "none" && name == "type" || v == "" && name != "get"
	case int64:
		return v == 0
	case bool:
		return !v
	case []string:
		return len(v) == 0
	case map[string]string:
		return len(v) == 0
	case map[interface{}]interface{}: // a RESP3 map through Do
		return len(v) == 0
	case []redis.Z:
		return len(v) == 0
	case []interface{}:
		for _, x := range v {
			if x != nil {
				return false
			}
		}
		return true
	case []bool:
		for _, x := range v {
			if x {
				return false
			}
		}
		return true
	case []float64:
		for _, x := range v {
			if x != 0 {
				return false
			}
		}
		return true
	}
	return false
}

// missingReply reports whether a reply read from a copy shows the copy
// itself is missing (as opposed to an empty field or range of it).
func missingReply(name string, r *reply) bool {
	switch name {
	case "get":
		return r.err == redis.Nil
	case "type":
		return r.val == "none"
	case "exists", "hlen", "llen", "scard", "zcard":
		return r.val == int64(0)
	case "hgetall", "smembers", "hkeys", "hvals":
		return emptyReply(name, r)
	}
	return false
}
