package hotkey

import (
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// hotSet is an immutable set of hot keys, published through an
// atomic.Pointer so that IsHot is one load and one map lookup. Each key
// has a counter of the observations ObserveHot made of it and has not yet
// added to its shard's summary (see ObserveHot); a key that stays hot keeps
// its counter from one set to the next.
type hotSet struct {
	keys map[string]*pending // nil when empty
}

// pending counts observations of a hot key not yet in its summary.
type pending struct {
	n atomic.Int64
	_ [56]byte // one counter per cache line
}

var emptyHotSet = &hotSet{}

func (h *hotSet) has(key string) bool {
	return h.counter(key) != nil
}

func (h *hotSet) counter(key string) *pending {
	if len(h.keys) == 0 {
		return nil
	}
	return h.keys[key]
}

// candidate is a key whose guaranteed decayed count is high enough that it
// may be hot.
type candidate struct {
	key   string
	count float64 // lower bound of the decayed count at refresh time
}

// maybeRefresh refreshes the hot set unless another goroutine is doing it or
// did it since the caller found it due (when d.refreshes was seen).
// It reports whether it did.
func (d *Detector) maybeRefresh(seen uint64) bool {
	if !d.refresh.TryLock() {
		return false
	}
	defer d.refresh.Unlock()
	if d.refreshes.Load() != seen {
		return false
	}
	d.refreshLocked(d.elapsed())
	return true
}

// refreshLocked recomputes the hot set at time t (ns since base) and
// publishes it if it changed. d.refresh must be held.
//
// A key turns hot when the lower bound of its decayed count (count − err)
// reaches both MinRate×tau and MinShare of the total decayed count; a hot
// key stays hot down to Hysteresis times those. Using the lower bound means
// that Space-Saving's overestimate never makes a key hot.
func (d *Detector) refreshLocked(t int64) {
	c := &d.cfg
	low := c.Hysteresis
	cands := d.cands[:0]
	var total float64
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		s.since = 0
		f := s.decay(t, d.tauNs)
		total += s.sum.total * f
		// No key below the lowest (hysteresis) rate floor can be hot.
		floor := low * c.MinRate * d.tauSec / f
		for _, e := range s.sum.heap {
			sl := &s.sum.slots[e.slot]
			if lb := e.count - sl.err; lb >= floor {
				cands = append(cands, candidate{key: sl.key, count: lb * f})
			}
		}
		s.mu.Unlock()
	}

	full := len(cands)
	old := d.hot.Load()
	onRate, onCount := c.MinRate*d.tauSec, c.MinShare*total
	offRate, offCount := low*onRate, low*onCount
	n, kept := 0, 0
	for i := range cands {
		cd := &cands[i]
		was := old.has(cd.key)
		if was {
			if cd.count < offRate || cd.count < offCount {
				continue
			}
			kept++
		} else if cd.count < onRate || cd.count < onCount {
			continue
		}
		cands[n] = *cd
		n++
	}
	cands = cands[:n]

	if n != kept || kept != len(old.keys) {
		next := emptyHotSet
		if n > 0 {
			next = &hotSet{keys: make(map[string]*pending, n)}
			for _, cd := range cands {
				p := old.counter(cd.key)
				if p == nil {
					p = new(pending)
				}
				next.keys[cd.key] = p
			}
		}
		d.hot.Store(next)
		// The counts of keys no longer hot go to their summaries (an
		// ObserveHot that loaded the old set may still add one or two).
		for k, p := range old.keys {
			if next.counter(k) == nil {
				if c := p.n.Swap(0); c > 0 {
					d.observe(k, xxhash.Sum64String(k), c, false)
				}
			}
		}
	}
	clear(cands[:full]) // drop key references until the next refresh
	d.cands = cands[:0]
	d.lastPub.Store(t)
	d.refreshes.Add(1)
}
