package ring

import (
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Lookup returns the name of the node that owns key, or "" on a nil or zero
// Ring. It honours hash tags (see HashTag), does not allocate and is safe
// for concurrent use.
func (r *Ring) Lookup(key string) string {
	return r.name(r.LookupIndex(key))
}

// LookupIndex returns the index in Nodes() of the node that owns key, or -1
// on a nil or zero Ring. It does not allocate and is safe for concurrent
// use; its cost is hashing the key and a read of a 16-byte bucket record
// and the next (usually in the same cache line), plus, for 6 to 29% of keys
// depending on how full the buckets are (18% at 100 equal nodes), a read of
// the bucket's other points, whatever the ring's size.
func (r *Ring) LookupIndex(key string) int {
	if r == nil || len(r.rec) == 0 {
		return -1
	}
	t := HashTag(key)
	var h uint64
	if r.hash == nil {
		h = xxhash.Sum64String(t)
	} else {
		h = r.hash(t)
	}
	// successor, by hand (keep the two in step): the compiler does not
	// inline it, and the call costs about a nanosecond of a lookup's 13 to 20.
	pos := uint32(h >> 32)
	b := pos >> r.shift
	u := (pos & r.offMask) << r.ownerBits
	x, y := &r.rec[b], &r.rec[b+1]
	e0, e1, e2, next := x.e[0], x.e[1], x.e[2], y.e[0]
	lo, hi := x.rest&restMask, y.rest&restMask
	if (uint64(e2)-uint64(u))>>63&((uint64(lo)-uint64(hi))>>63) != 0 {
		next = r.successorRest(lo, hi, u, next) // > e2, so kept below
	}
	if u <= e2 {
		next = e2
	}
	if u <= e1 {
		next = e1
	}
	if u <= e0 {
		next = e0
	}
	return int(next & r.ownerMask)
}

// OwnerIndexAt returns the index in Nodes() of the node that owns position
// pos on the circle (see Position), or -1 on a nil or zero Ring. It does
// not allocate and is safe for concurrent use.
func (r *Ring) OwnerIndexAt(pos uint32) int {
	if r == nil || len(r.rec) == 0 {
		return -1
	}
	return int(r.successor(pos) & r.ownerMask)
}

// successor returns the entry of the first point at or after pos, wrapping;
// only its owner bits are meaningful when the point is in a later bucket.
// The ring must not be empty.
//
// Bucket b's record has its first three points, the empty slots of a
// bucket with fewer holding the next point's owner at the largest offset,
// and the next record starts with the first point at or after bucket b+1.
// So the first slot that is >= the key's offset, else the next record's
// first, is the answer, unless the bucket has more points than its record
// and the key lies past the third: only then is rest read. The choice
// among the slots is made without branches (conditional moves): a
// mispredicted branch would cost more than the compares, and would throw
// away the memory loads of the lookups that follow it.
func (r *Ring) successor(pos uint32) uint32 {
	b := pos >> r.shift
	t := (pos & r.offMask) << r.ownerBits
	x, y := &r.rec[b], &r.rec[b+1]
	e0, e1, e2, next := x.e[0], x.e[1], x.e[2], y.e[0]
	lo, hi := x.rest&restMask, y.rest&restMask
	// t > e2 and lo < hi, each a sign bit.
	if (uint64(e2)-uint64(t))>>63&((uint64(lo)-uint64(hi))>>63) != 0 {
		return r.successorRest(lo, hi, t, next)
	}
	if t <= e2 {
		next = e2
	}
	if t <= e1 {
		next = e1
	}
	if t <= e0 {
		next = e0
	}
	return next
}

// successorRest returns the first of rest[lo:hi] that is >= t, or next if
// there is none. The first four are compared without branches.
func (r *Ring) successorRest(lo, hi, t, next uint32) uint32 {
	n := uint64(hi - lo)
	u := uint64(t)
	p := r.rest[lo : lo+pad] // the padding past len makes this safe
	// Entry j counts when j < n and p[j] < t; each test is a sign bit.
	c := ((uint64(p[0])-u)>>63)&((0-n)>>63) +
		((uint64(p[1])-u)>>63)&((1-n)>>63) +
		((uint64(p[2])-u)>>63)&((2-n)>>63) +
		((uint64(p[3])-u)>>63)&((3-n)>>63)
	if c == 4 && n > 4 {
		for i := lo + 4; i < hi; i++ {
			if r.rest[i] >= t {
				return r.rest[i]
			}
		}
		return next
	}
	if c == n {
		return next
	}
	return p[c]
}

// Replicas returns up to n distinct node names for key: its owner, then the
// next distinct nodes met walking clockwise from the owner's point. n larger
// than Len() gives every node once; n <= 0 or a nil or zero Ring gives nil.
// It is safe for concurrent use.
func (r *Ring) Replicas(key string, n int) []string {
	if n <= 0 || r.Len() == 0 {
		return nil
	}
	var buf [8]int
	idx := r.ReplicaIndexes(key, buf[:0], n)
	names := make([]string, len(idx))
	for i, j := range idx {
		names[i] = r.nodes[j].Name
	}
	return names
}

// ReplicaIndexes is Replicas with node indexes: it appends to dst the indexes
// in Nodes() of up to n distinct nodes for key, owner first, and returns the
// extended slice (dst itself when n <= 0 or the ring is nil or zero). It
// does not allocate when dst has room and Len() <= 4096, and is safe for
// concurrent use. Asking for every node of a ring whose weights differ a lot
// may walk the whole circle.
func (r *Ring) ReplicaIndexes(key string, dst []int, n int) []int {
	if n <= 0 || r.Len() == 0 {
		return dst
	}
	n = min(n, len(r.nodes))
	c := r.seek(r.Position(key))
	start := len(dst)
	if n <= 8 {
		// Few replicas: checking dst is cheaper than a set.
		for range r.n {
			if o := c.owner(); !slices.Contains(dst[start:], o) {
				if dst = append(dst, o); len(dst)-start == n {
					break
				}
			}
			if c.next(); c.done() {
				c = r.cursor()
			}
		}
		return dst
	}
	var small [64]uint64
	seen := small[:]
	if words := (len(r.nodes) + 63) / 64; words > len(small) {
		seen = make([]uint64, words)
	}
	for range r.n {
		o := c.owner()
		if seen[o/64]&(1<<(o%64)) == 0 {
			seen[o/64] |= 1 << (o % 64)
			if dst = append(dst, o); len(dst)-start == n {
				break
			}
		}
		if c.next(); c.done() {
			c = r.cursor()
		}
	}
	return dst
}
