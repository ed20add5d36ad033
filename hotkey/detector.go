package hotkey

import (
	"cmp"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Detector finds the keys that take a large part of a stream of key
// observations, as the stream happens.
//
// A Detector is safe for concurrent use by multiple goroutines. Observe and
// IsHot never allocate in the steady state and take no global lock. The zero
// Detector is not usable: create one with New. A nil *Detector is valid and
// inert: Observe and Reset do nothing, IsHot reports false and Top nil, so a
// client with detection turned off can hold a nil Detector.
//
// A Detector starts no goroutine and needs no Close.
type Detector struct {
	cfg        Config
	base       time.Time // origin of the ns clock readings
	tauNs      float64   // decay time constant (Window/2) in ns
	tauSec     float64   // same in seconds
	shift      uint      // a key's shard is hash >> shift
	pubShard   int       // refresh the hot set when a shard saw pubShard observations...
	pubAfterNs int64     // ...or pubAfterNs of clock time passed since the last refresh

	shards []shard

	// Read by every Observe that reads the clock, written by refreshes.
	refreshes atomic.Uint64 // number of refreshes so far
	lastPub   atomic.Int64  // clock reading of the last refresh, ns since base
	hot       atomic.Pointer[hotSet]

	refresh sync.Mutex // serializes refreshes; guards cands
	cands   []candidate
}

// Key is one entry of Top.
type Key struct {
	// Key is the observed key.
	Key string
	// Rate is the estimated rate of the key in observations per second:
	// its decayed count divided by Window/2. It is an upper estimate, at
	// most the error bound described in the package documentation above
	// the true decayed rate (up to the clock granularity described there).
	Rate float64
	// Hot reports whether the key is in the hot set (what IsHot answers).
	Hot bool
}

// New returns a Detector configured by cfg, which may be nil for all the
// defaults. It returns an error wrapping ErrInvalidConfig if a field is out
// of range.
func New(cfg *Config) (*Detector, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	n := shardCount(c.Capacity)
	d := &Detector{
		cfg:        c,
		base:       c.Now(),
		tauNs:      float64(c.Window) / 2,
		tauSec:     c.Window.Seconds() / 2,
		shift:      uint(64 - bits.TrailingZeros(uint(n))),
		pubShard:   max(4*c.Capacity, 1024),
		pubAfterNs: max(int64(c.Window/100), 1),
		shards:     make([]shard, n),
	}
	for i := range d.shards {
		d.shards[i].init(c.Capacity/n, 0)
	}
	d.hot.Store(emptyHotSet)
	return d, nil
}

// elapsed reads the clock as ns since base.
func (d *Detector) elapsed() int64 {
	return int64(d.cfg.Now().Sub(d.base))
}

// Observe counts one occurrence of key. It keeps a reference to key (no
// copy) while the key is tracked, so key must not be backed by memory that
// is reused later (such as unsafe.String over a pooled buffer).
//
// Once per Window/100 of clock time, and whenever one lock stripe has seen
// max(4×Capacity, 1024) observations since the last refresh, an Observe
// call also refreshes the hot set that IsHot reads: that call costs
// O(Capacity) instead of O(1).
func (d *Detector) Observe(key string) {
	if d == nil {
		return
	}
	d.observe(key, xxhash.Sum64String(key), 1, true)
}

// ObserveN counts n occurrences of key at once, as n calls of Observe
// would, all charged at the time of this call. A caller that counts a
// sample of its stream (one occurrence in n, at weight n) uses it. n < 1
// counts nothing.
func (d *Detector) ObserveN(key string, n int) {
	if d == nil || n < 1 {
		return
	}
	d.observe(key, xxhash.Sum64String(key), int64(n), true)
}

// hotBatch is how many observations of a hot key ObserveHot counts on the
// key's own counter before adding them to its shard's summary at once.
const hotBatch = 16

// ObserveHot counts one occurrence of key, as Observe does, and reports
// whether key is hot, as IsHot would after the Observe. For a key that is
// hot it takes no lock: the observation goes to a counter of the key's own,
// and every hotBatch of them are added to the summary together, charged at
// the time of the last one (so up to hotBatch-1 observations of the key
// are late, and Top and the next refresh may not see them yet).
func (d *Detector) ObserveHot(key string) bool {
	if d == nil {
		return false
	}
	if p := d.hot.Load().counter(key); p != nil {
		if p.n.Add(1)%hotBatch == 0 {
			if c := p.n.Swap(0); c > 0 {
				d.observe(key, xxhash.Sum64String(key), c, true)
			}
		}
		return true
	}
	if d.observe(key, xxhash.Sum64String(key), 1, true) {
		return d.IsHot(key)
	}
	return false
}

// observe counts n occurrences of key, whose hash is h, and reports whether
// it refreshed the hot set. With mayRefresh false (a refresh calls it) it
// never refreshes.
func (d *Detector) observe(key string, h uint64, n int64, mayRefresh bool) bool {
	s := &d.shards[h>>d.shift]
	due, seen := false, uint64(0)
	s.mu.Lock()
	if s.tick += int(n); s.tick >= clockEvery {
		s.since += s.tick
		s.tick = 0
		s.advance(d.elapsed(), d.tauNs)
		seen = d.refreshes.Load()
		due = s.since >= d.pubShard || s.last-d.lastPub.Load() >= d.pubAfterNs
	}
	s.sum.add(key, h, float64(n)*s.w)
	s.mu.Unlock()
	if due && mayRefresh {
		return d.maybeRefresh(seen)
	}
	return false
}

// IsHot reports whether key is in the current hot set. It does not read the
// clock: the hot set is refreshed by Observe (see there) and by Top, so with
// no observations at all the answer stays what it last was.
func (d *Detector) IsHot(key string) bool {
	if d == nil {
		return false
	}
	return d.hot.Load().has(key)
}

// Top returns up to n tracked keys, highest estimated rate first (ties by
// key). It refreshes the hot set first, so Hot is up to date. Top locks
// every shard in turn and allocates; it is meant for monitoring, not for
// every command. Top returns nil if n <= 0.
func (d *Detector) Top(n int) []Key {
	if d == nil || n <= 0 {
		return nil
	}
	d.refresh.Lock()
	t := d.elapsed()
	d.refreshLocked(t)
	hot := d.hot.Load()
	var out []Key
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		f := s.decay(t, d.tauNs)
		for _, e := range s.sum.heap {
			k := s.sum.slots[e.slot].key
			out = append(out, Key{Key: k, Rate: e.count * f / d.tauSec, Hot: hot.has(k)})
		}
		s.mu.Unlock()
	}
	d.refresh.Unlock()
	slices.SortFunc(out, func(a, b Key) int {
		if c := cmp.Compare(b.Rate, a.Rate); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	if len(out) > n {
		out = out[:n:n]
	}
	return out
}

// Reset forgets every observation and empties the hot set.
func (d *Detector) Reset() {
	if d == nil {
		return
	}
	d.refresh.Lock()
	defer d.refresh.Unlock()
	t := d.elapsed()
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		s.restart(t)
		s.mu.Unlock()
	}
	d.refreshes.Add(1)
	d.lastPub.Store(t)
	d.hot.Store(emptyHotSet)
}
