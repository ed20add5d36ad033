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
// use; its cost is hashing the key, a read of the bucket index and a read of
// about two points, whatever the ring's size.
func (r *Ring) LookupIndex(key string) int {
	if r == nil || len(r.points) == 0 {
		return -1
	}
	t := HashTag(key)
	var h uint64
	if r.hash == nil {
		h = xxhash.Sum64String(t)
	} else {
		h = r.hash(t)
	}
	e, _ := r.successor(uint32(h >> 32))
	return int(e & r.ownerMask)
}

// OwnerIndexAt returns the index in Nodes() of the node that owns position
// pos on the circle (see Position), or -1 on a nil or zero Ring. It does
// not allocate and is safe for concurrent use.
func (r *Ring) OwnerIndexAt(pos uint32) int {
	if r == nil || len(r.points) == 0 {
		return -1
	}
	e, _ := r.successor(pos)
	return int(e & r.ownerMask)
}

// successor returns the entry of the first point at or after pos, wrapping,
// and its index (len(r.points) for the wrap). The ring must not be empty.
//
// Buckets hold one to two points on average, so the first four entries of
// the bucket are compared without branches: a mispredicted branch would cost
// more than the compares, and would throw away the memory loads of the
// lookups that follow it.
func (r *Ring) successor(pos uint32) (uint32, uint32) {
	b := pos >> r.shift
	lo := r.idx.start(b)
	n := uint64(r.idx.start(b+1) - lo)
	t := uint64((pos & r.offMask) << r.ownerBits)
	p := r.points[lo : lo+pad] // the padding past len makes this safe
	// Entry j counts when j < n and p[j] < t; each test is a sign bit.
	c := ((uint64(p[0])-t)>>63)&((0-n)>>63) +
		((uint64(p[1])-t)>>63)&((1-n)>>63) +
		((uint64(p[2])-t)>>63)&((2-n)>>63) +
		((uint64(p[3])-t)>>63)&((3-n)>>63)
	if c == 4 && n > 4 {
		return r.successorSlow(lo+4, lo+uint32(n), uint32(t))
	}
	return p[c], lo + uint32(c)
}

// successorSlow continues the scan of a crowded bucket at points[i:hi].
func (r *Ring) successorSlow(i, hi, t uint32) (uint32, uint32) {
	for i < hi && r.points[i] < t {
		i++
	}
	return r.points[:i+1][i], i
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
	_, j := r.successor(r.Position(key))
	i := int(j) % len(r.points)
	start := len(dst)
	if n <= 8 {
		// Few replicas: checking dst is cheaper than a set.
		for range len(r.points) {
			o := int(r.points[i] & r.ownerMask)
			if !slices.Contains(dst[start:], o) {
				if dst = append(dst, o); len(dst)-start == n {
					break
				}
			}
			if i++; i == len(r.points) {
				i = 0
			}
		}
		return dst
	}
	var small [64]uint64
	seen := small[:]
	if words := (len(r.nodes) + 63) / 64; words > len(small) {
		seen = make([]uint64, words)
	}
	for range len(r.points) {
		o := r.points[i] & r.ownerMask
		if seen[o/64]&(1<<(o%64)) == 0 {
			seen[o/64] |= 1 << (o % 64)
			if dst = append(dst, int(o)); len(dst)-start == n {
				break
			}
		}
		if i++; i == len(r.points) {
			i = 0
		}
	}
	return dst
}
