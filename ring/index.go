package ring

import "slices"

// index maps a bucket to the index in Ring.points of its first point. A
// plain []uint32 would cost 4 bytes a bucket and, for rings of a few hundred
// thousand points and up, one more cache miss per lookup; this one stores a
// uint32 for each group of 2^groupBits buckets and one byte for each bucket,
// the distance from its group's start. At about 1.5 points a bucket a group
// of 64 holds about 100 points, far from 255; groups shrink when a ring is
// crowded enough to need it (a Hash with few distinct values).
type index struct {
	coarse    []uint32 // coarse[g] is the first point of bucket g<<groupBits
	fine      []uint8  // len buckets+1
	groupBits uint
}

const maxGroupBits = 6

// newIndex compresses starts, where starts[b] is the first point of bucket b
// and starts[len(starts)-1] the number of points.
func newIndex(starts []uint32) index {
	for gb := uint(maxGroupBits); ; gb-- {
		if x, ok := compress(starts, gb); ok || gb == 0 {
			return x
		}
	}
}

// compress builds the index with groups of 2^gb buckets; it fails if a
// bucket starts more than 255 points after its group.
func compress(starts []uint32, gb uint) (index, bool) {
	x := index{
		coarse:    make([]uint32, (len(starts)-1)>>gb+1),
		fine:      make([]uint8, len(starts)),
		groupBits: gb,
	}
	for g := range x.coarse {
		x.coarse[g] = starts[g<<gb]
	}
	w := min(workers(len(starts)), len(x.coarse))
	per := (len(x.coarse) + w - 1) / w
	over := make([]uint32, w) // per worker: the largest distance seen
	parallel(w, func(i int) {
		lo, hi := min(i*per<<gb, len(starts)), min((i+1)*per<<gb, len(starts))
		m := uint32(0)
		for b, s := range starts[lo:hi] {
			b += lo
			d := s - x.coarse[b>>gb]
			m = max(m, d)
			x.fine[b] = uint8(d)
		}
		over[i] = m
	})
	return x, slices.Max(over) <= 255
}

// start returns the index of the first point of bucket b; start(buckets())
// is the number of points.
func (x *index) start(b uint32) uint32 {
	return x.coarse[b>>x.groupBits] + uint32(x.fine[b])
}

func (x *index) buckets() int { return len(x.fine) - 1 }
