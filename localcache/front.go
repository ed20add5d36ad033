package localcache

import "sync/atomic"

const (
	// frontSlots is the number of slots of the front index (a power of
	// two): 32 KiB of pointers.
	frontSlots = 4096
	// frontShare bounds the cost of an entry the front index may hold to
	// MaxBytes/frontShare, so that the entries it keeps reachable after
	// ristretto dropped them (see front) stay within a quarter of MaxBytes.
	frontShare = 4 * frontSlots
)

// front is a direct-mapped index, by ristretto key, of entries that a Get
// found in ristretto, or that a store just handed to it. A Get looks here first: a hit takes no lock, writes
// no shared memory and leaves ristretto alone, so that the replies of a
// hot key, read by every goroutine at once, do not contend on one of
// ristretto's map stripes and its access buffers.
//
// Every entry returned from it passes the checks a ristretto hit passes
// (identity, generation stamp, expiry), so the index changes nothing of
// what Get may return, only how fast. ristretto's evictions and
// rejections clear a slot holding the entry; an entry placed in a slot
// just as ristretto drops it stays reachable (not valid beyond its expiry)
// until the slot is reused or cleared by Clear or Close. Hits answered here
// are not counted by ristretto's admission policy.
type front struct {
	slots [frontSlots]atomic.Pointer[entry]
}

func (f *front) slot(h uint64) *atomic.Pointer[entry] { return &f.slots[h&(frontSlots-1)] }

// promote puts e, just found in ristretto or about to be handed to it, in
// its slot, unless the slot holds a later entry of the same triple (one
// that replaced e): the index never goes back to an older reply.
func (f *front) promote(h uint64, e *entry) {
	sl := f.slot(h)
	for {
		cur := sl.Load()
		if cur != nil && cur.same(e) && cur.seq >= e.seq || sl.CompareAndSwap(cur, e) {
			return
		}
	}
}

// replace puts e, just accepted by ristretto, in its slot if the slot holds
// an earlier entry of the same triple, which ristretto replaced; if e may
// not be held (keep false), it empties the slot instead.
func (f *front) replace(h uint64, e *entry, keep bool) {
	sl := f.slot(h)
	next := e
	if !keep {
		next = nil
	}
	for {
		cur := sl.Load()
		if cur == nil || !cur.same(e) || cur.seq >= e.seq || sl.CompareAndSwap(cur, next) {
			return
		}
	}
}

// forget clears the slot of h if it holds e.
func (f *front) forget(h uint64, e *entry) { f.slot(h).CompareAndSwap(e, nil) }

func (f *front) clear() {
	for i := range f.slots {
		f.slots[i].Store(nil)
	}
}
