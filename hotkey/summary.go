package hotkey

// summary is a weighted Filtered Space-Saving summary of one shard's
// stream: at most cap(slots) tracked keys, each with an estimated count (an
// upper bound of its true weight) and the error it may carry, plus a small
// array of filter counters for the keys that are not tracked. Counts are in
// forward-decay units (see shard), so they only grow and comparing them
// compares decayed counts.
//
// A summary is not safe for concurrent use; its shard's mutex guards it. It
// never allocates after newSummary.
type summary struct {
	slots  []slot    // tracked keys; len = number tracked, cap = capacity
	heap   []hent    // 4-ary min-heap on count, one entry per slot
	table  []tent    // open addressing with linear probing over slots
	mask   uint64    // len(table) - 1
	filter []float64 // upper bounds of the weight of untracked keys, by hash
	fshift uint      // filter index = mix(hash) >> fshift
	total  float64   // sum of all weights added, tracked or not
}

// slot is one tracked key. Its count lives in its heap entry so that heap
// operations touch one contiguous array.
type slot struct {
	key  string
	hash uint64
	err  float64 // filter counter the key inherited when it became tracked
	hpos int32   // index of the slot's entry in heap
}

type hent struct {
	count float64
	slot  int32
}

// tent is a table entry: the low 32 bits of the key's hash (so probes and
// deletions rarely touch slots) and the slot index + 1 (0 = empty).
type tent struct {
	tag  uint32
	slot int32
}

const heapArity = 4 // shallower than binary; the 4 children share a cache line

func newSummary(capacity int) summary {
	n := 4
	for n < 2*capacity {
		n *= 2
	}
	// Eight filter counters per tracked key: fewer let the filter saturate
	// at the minimum count, so that most untracked keys go through the
	// (costlier) replacement path again.
	f, fbits := 1, uint(0)
	for f < 8*capacity {
		f, fbits = 2*f, fbits+1
	}
	return summary{
		slots:  make([]slot, 0, capacity),
		heap:   make([]hent, 0, capacity),
		table:  make([]tent, n),
		mask:   uint64(n - 1),
		filter: make([]float64, f),
		fshift: 64 - fbits,
	}
}

// add counts weight w for key, whose hash is h.
func (s *summary) add(key string, h uint64, w float64) {
	s.total += w
	if i := s.find(key, h); i >= 0 {
		p := s.slots[i].hpos
		s.heap[p].count += w
		s.down(int(p))
		return
	}
	if len(s.slots) < cap(s.slots) {
		i := int32(len(s.slots))
		s.slots = append(s.slots, slot{key: key, hash: h, hpos: int32(len(s.heap))})
		s.heap = append(s.heap, hent{count: w, slot: i})
		s.insert(i)
		s.up(len(s.heap) - 1)
		return
	}
	// Filtered Space-Saving: an untracked key only adds to its filter
	// counter until that counter plus w reaches the minimum tracked count.
	// Then it takes over the minimum's slot, inheriting the filter counter
	// as its error, and the evicted count moves into its own filter
	// counter, so every filter counter stays an upper bound of each of its
	// untracked keys' weight.
	fi := s.filterIndex(h)
	alpha := s.filter[fi]
	if alpha+w < s.heap[0].count {
		s.filter[fi] = alpha + w
		return
	}
	i := s.heap[0].slot
	sl := &s.slots[i]
	if ei := s.filterIndex(sl.hash); s.filter[ei] < s.heap[0].count {
		s.filter[ei] = s.heap[0].count
	}
	s.remove(i)
	sl.key, sl.hash, sl.err = key, h, alpha
	s.heap[0].count = alpha + w
	s.insert(i)
	s.down(0)
}

func (s *summary) filterIndex(h uint64) uint64 {
	return (h * 0x9e3779b97f4a7c15) >> s.fshift
}

// find returns the slot index of key, or -1.
func (s *summary) find(key string, h uint64) int32 {
	tag := uint32(h)
	for j := h & s.mask; ; j = (j + 1) & s.mask {
		e := s.table[j]
		if e.slot == 0 {
			return -1
		}
		if e.tag == tag {
			if sl := &s.slots[e.slot-1]; sl.hash == h && sl.key == key {
				return e.slot - 1
			}
		}
	}
}

func (s *summary) insert(i int32) {
	h := s.slots[i].hash
	j := h & s.mask
	for s.table[j].slot != 0 {
		j = (j + 1) & s.mask
	}
	s.table[j] = tent{tag: uint32(h), slot: i + 1}
}

// remove deletes slot i from the table with backward-shift deletion, so the
// table never fills with tombstones.
func (s *summary) remove(i int32) {
	j := s.slots[i].hash & s.mask
	for s.table[j].slot != i+1 {
		j = (j + 1) & s.mask
	}
	for k := (j + 1) & s.mask; s.table[k].slot != 0; k = (k + 1) & s.mask {
		home := uint64(s.table[k].tag) & s.mask
		// The entry at k may move into the hole at j unless its home lies
		// cyclically in (j, k].
		if (j < k && j < home && home <= k) || (j > k && (home > j || home <= k)) {
			continue
		}
		s.table[j] = s.table[k]
		j = k
	}
	s.table[j] = tent{}
}

func (s *summary) up(p int) {
	e := s.heap[p]
	for p > 0 {
		q := (p - 1) / heapArity
		if s.heap[q].count <= e.count {
			break
		}
		s.heap[p] = s.heap[q]
		s.slots[s.heap[p].slot].hpos = int32(p)
		p = q
	}
	s.heap[p] = e
	s.slots[e.slot].hpos = int32(p)
}

func (s *summary) down(p int) {
	n := len(s.heap)
	e := s.heap[p]
	for {
		c := heapArity*p + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+heapArity && k < n; k++ {
			if s.heap[k].count < s.heap[m].count {
				m = k
			}
		}
		if e.count <= s.heap[m].count {
			break
		}
		s.heap[p] = s.heap[m]
		s.slots[s.heap[p].slot].hpos = int32(p)
		p = m
	}
	s.heap[p] = e
	s.slots[e.slot].hpos = int32(p)
}

// scale multiplies every count by f (0 < f <= 1). Uniform scaling keeps
// the heap order, so no re-heapify is needed.
func (s *summary) scale(f float64) {
	for i := range s.heap {
		s.heap[i].count *= f
	}
	for i := range s.slots {
		s.slots[i].err *= f
	}
	for i := range s.filter {
		s.filter[i] *= f
	}
	s.total *= f
}

func (s *summary) reset() {
	clear(s.slots[:cap(s.slots)]) // drop key references
	s.slots = s.slots[:0]
	s.heap = s.heap[:0]
	clear(s.table)
	clear(s.filter)
	s.total = 0
}
