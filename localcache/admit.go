package localcache

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// admitMin is the estimated number of recent reads of a key from which
// Admit says its replies are worth caching once the cache is full: a key
// read once (the bulk of the distinct keys of a skewed workload, read once
// and never again) is not, a key read again within the sketch's window is.
const admitMin = 2

// sketchRows is the number of rows of the frequency sketch.
const sketchRows = 4

const (
	// roomEvery is how many counted reads (the sketch's increments) Admit
	// lets pass between two looks at the cache's fill (one lock of
	// ristretto's policy each).
	roomEvery = 1024
	// roomShare: the cache has room while more than MaxBytes/roomShare of
	// its budget is free.
	roomShare = 32
)

// sketch is a count-min sketch of 4-bit counters (TinyLFU's frequency
// sketch, Einziger, Friedman and Manes 2017) of the keys a caller asked
// Admit about, with aging: every `period` increments, every counter is
// halved, so the estimate counts the reads of about the last period reads,
// older ones weighing less. It is lock-free for Admit: a counter is a
// nibble of an atomic word, raised with a compare-and-swap, and only the
// halving takes a mutex (with TryLock, so no Admit waits for it).
//
// Its size follows the cache's: period is NumCounters (by default ten
// times the number of 1 KiB entries MaxBytes holds), so a key must be
// read twice within the reads that ten cache-fulls of entries would see to
// be admitted; the rows have NumCounters/2 counters each, rounded up to a
// power of two (4 rows × 4 bits: at most 2×NumCounters bytes in all).
type sketch struct {
	rows   [sketchRows][]atomic.Uint64 // 16 nibbles per word
	mask   uint64                      // counters per row - 1
	period int64
	adds   atomic.Int64 // increments since the last halving
	aging  sync.Mutex
	halved atomic.Uint64 // halvings so far (tests)

	full atomic.Bool // the cache had no room at the last look (see Cache.Admit)
}

func newSketch(numCounters int64) *sketch {
	n := uint64(1024)
	for n < uint64(numCounters/2) {
		n *= 2
	}
	s := &sketch{mask: n - 1, period: max(numCounters, 1024)}
	for i := range s.rows {
		s.rows[i] = make([]atomic.Uint64, n/16)
	}
	return s
}

// index returns the word and the nibble shift of key hash h's counter in
// row i. Each row uses its own 16 bits of a remixed hash.
func (s *sketch) index(h uint64, i int) (word *atomic.Uint64, shift uint) {
	x := h + uint64(i+1)*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	c := x & s.mask
	return &s.rows[i][c/16], uint(c%16) * 4
}

// add counts one read of the key whose hash is h and returns the estimate
// of its recent reads, this one included, and the number of increments
// since the last halving, this one included (0 if the key's counters are
// saturated and nothing was raised). It raises only the counters at the
// minimum (conservative update), which keeps the estimates of rare keys
// low in a sketch shared with frequent ones.
func (s *sketch) add(h uint64) (est int, n int64) {
	var words [sketchRows]*atomic.Uint64
	var shifts [sketchRows]uint
	est = 15
	for i := range words {
		words[i], shifts[i] = s.index(h, i)
		est = min(est, int(words[i].Load()>>shifts[i]&15))
	}
	if est == 15 {
		return est, 0 // saturated: nothing to raise
	}
	for i, w := range words {
		for {
			old := w.Load()
			v := int(old >> shifts[i] & 15)
			if v > est || w.CompareAndSwap(old, old+1<<shifts[i]) {
				break
			}
		}
	}
	if n = s.adds.Add(1); n >= s.period {
		s.age()
	}
	return est + 1, n
}

// estimate returns the sketch's estimate of the recent reads of the key
// whose hash is h, counting nothing.
func (s *sketch) estimate(h uint64) int {
	est := 15
	for i := range sketchRows {
		w, shift := s.index(h, i)
		est = min(est, int(w.Load()>>shift&15))
	}
	return est
}

// age halves every counter, once per period (the goroutine that finds it
// due and gets the lock does it; the others go on).
func (s *sketch) age() {
	if !s.aging.TryLock() {
		return
	}
	defer s.aging.Unlock()
	if s.adds.Load() < s.period {
		return // another goroutine just did it
	}
	s.adds.Store(0)
	for i := range s.rows {
		for j := range s.rows[i] {
			w := &s.rows[i][j]
			for {
				old := w.Load()
				if old == 0 || w.CompareAndSwap(old, old>>1&0x7777777777777777) {
					break
				}
			}
		}
	}
	s.halved.Add(1)
}

// Admit counts one read of key and reports whether its replies are worth
// caching. While the cache has room (more than MaxBytes/32 of its budget
// free, as last seen: Admit looks once every 1024 reads it counts), every
// key is: caching it costs nothing that another entry would need. Once the
// cache is full, only a key read at least once before within about the
// last NumCounters reads counted here (older reads weigh less) is, as
// estimated by a frequency sketch of the keys (TinyLFU's), so that the
// keys read once, the bulk of a skewed workload's tail, cost nothing but
// the count; ristretto's own admission policy then still decides whether a
// filled reply displaces another. A caller asks before sending a read of a
// key it does not know to be hot, and reads through the cache (a tracked
// read that fills it) only when Admit says yes.
//
// Admit is safe for concurrent use and does not allocate; it takes no lock
// but, once every 1024 calls, ristretto's policy lock to read the cache's
// fill. A nil Cache admits nothing. The sketch's memory (at most
// 2×NumCounters bytes: 1 MiB with the defaults of a 64 MiB cache) is
// fixed, allocated by New, and not charged against MaxBytes.
func (c *Cache) Admit(key string) bool {
	if c == nil {
		return false
	}
	est, n := c.admit.add(xxhash.Sum64String(key))
	if est >= admitMin {
		return true
	}
	if n%roomEvery == 0 && n != 0 {
		c.lookAtRoom()
	}
	return !c.admit.full.Load()
}

// ReadAgain reports whether the frequency sketch estimates that key was
// read at least twice within its window (the reads Admit counted, the
// last one included), counting nothing: a key read again, whose reply is
// likely to be read again while cached. A nil Cache says false.
func (c *Cache) ReadAgain(key string) bool {
	if c == nil {
		return false
	}
	return c.admit.estimate(xxhash.Sum64String(key)) >= admitMin
}

// lookAtRoom records whether the cache has room (see Admit).
func (c *Cache) lookAtRoom() {
	g, open := c.guard.enter(rand.Uint32())
	if !open {
		return
	}
	free := c.rc.RemainingCost()
	c.guard.leave(g)
	c.admit.full.Store(free <= c.maxBytes/roomShare)
}
