package localcache

import "sync/atomic"

// Stats is a snapshot of a Cache's counters. Counters start at zero when the
// Cache is created and only grow; Clear does not reset them.
type Stats struct {
	// Hits is the number of Gets that returned a value.
	Hits uint64
	// Misses is the number of Gets that returned none, including
	// Invalidated and Expired ones.
	Misses uint64
	// Invalidated is the number of Gets that found an entry made
	// unreachable by InvalidateKey, InvalidateShard or Clear.
	Invalidated uint64
	// Expired is the number of Gets that found an entry past its TTL on
	// the injected clock (Config.Now); entries past their TTL on the real
	// clock are plain misses.
	Expired uint64

	// Sets is the number of Sets handed to ristretto. Each may still be
	// refused later by its admission policy (see Rejected).
	Sets uint64
	// Dropped is the number of Sets not cached at once: the ticket, size
	// or TTL was invalid, the entry was larger than MaxBytes, ristretto's
	// set buffer was full, or the cache was closed.
	Dropped uint64
	// Outdated is the number of Sets refused because the key or shard was
	// invalidated after their Ticket was taken.
	Outdated uint64
	// Rejected is the number of Sets that returned true but that
	// ristretto did not store in the end: refused by its admission policy,
	// or a second new entry for the same (shard, key, cmd) buffered before
	// the first was applied (ristretto keeps the first).
	Rejected uint64
	// Evicted is the number of entries ristretto removed: evicted for
	// room, expired on the real clock, or dropped by Clear.
	Evicted uint64

	// KeyInvalidations, ShardInvalidations and Clears count the calls of
	// InvalidateKey, InvalidateShard and Clear.
	KeyInvalidations, ShardInvalidations, Clears uint64

	// Bytes is the budget in use: the charged size of the entries
	// ristretto holds, including unreachable (invalidated) ones that
	// still await their TTL, eviction or overwrite.
	Bytes int64
	// MaxBytes is the configured budget.
	MaxBytes int64
}

const statStripes = 16 // a power of two

// counterStripe holds the counters bumped on every Get and Set. They are
// striped (a random stripe per call) so that concurrent callers rarely
// share a cache line.
type counterStripe struct {
	hits, misses, invalidated, expired atomic.Uint64
	sets, dropped, outdated            atomic.Uint64
	_                                  [128 - 7*8]byte
}

type counters struct {
	stripes                                      [statStripes]counterStripe
	rejected, evicted                            atomic.Uint64
	keyInvalidations, shardInvalidations, clears atomic.Uint64
}

func (c *counters) stripe(r uint32) *counterStripe {
	return &c.stripes[(r>>8)&(statStripes-1)]
}

func (c *counters) snapshot() Stats {
	var s Stats
	for i := range c.stripes {
		st := &c.stripes[i]
		s.Hits += st.hits.Load()
		s.Misses += st.misses.Load()
		s.Invalidated += st.invalidated.Load()
		s.Expired += st.expired.Load()
		s.Sets += st.sets.Load()
		s.Dropped += st.dropped.Load()
		s.Outdated += st.outdated.Load()
	}
	s.Rejected = c.rejected.Load()
	s.Evicted = c.evicted.Load()
	s.KeyInvalidations = c.keyInvalidations.Load()
	s.ShardInvalidations = c.shardInvalidations.Load()
	s.Clears = c.clears.Load()
	return s
}
