package ring

// bucket is the record of a bucket: its first points, inline, and where
// the others are in Ring.rest.
type bucket struct {
	// The entries of the bucket's first inlinePoints points, in order; the
	// slots of a bucket with fewer than three points hold the
	// owner of the next point on the circle with the largest offset, so that
	// a lookup may compare against every slot.
	e [inlinePoints]uint32
	// The index in Ring.rest of the bucket's next point, or where it would
	// be, and above restBits the number of points in e.
	rest uint32
}

const (
	inlinePoints = 3
	restBits     = 30 // MaxPoints < 1<<restBits
	restMask     = 1<<restBits - 1
)

// pack turns the entries of a ring in circle order, with starts[b] the
// index of the first point of bucket b and starts[len(starts)-1] the number
// of points, into r.rec and r.rest, the layout lookups read (see Ring).
// points must have room for inlinePoints more entries; it is not retained.
func (r *Ring) pack(points, starts []uint32) {
	nb := len(starts) - 1
	n := len(points)
	r.rec = make([]bucket, nb+1)
	w := min(workers(n), nb)
	per := (nb + w - 1) / w
	// base[i]: the points inline in the buckets before worker i's first.
	base := make([]uint32, w+1)
	parallel(w, func(i int) {
		c := uint32(0)
		for b := min(i*per, nb); b < min((i+1)*per, nb); b++ {
			c += min(starts[b+1]-starts[b], inlinePoints)
		}
		base[i+1] = c
	})
	for i := range w {
		base[i+1] += base[i]
	}
	inline := base[w]
	r.rest = make([]uint32, uint32(n)-inline, uint32(n)-inline+pad)
	filler := r.offMask << r.ownerBits // an empty slot, less its owner
	padded := points[:len(points)+inlinePoints]
	parallel(w, func(i int) {
		lo, hi := min(i*per, nb), min((i+1)*per, nb)
		rs := starts[lo] - base[i] // the next entry of rest
		for b := lo; b < hi; b++ {
			s, e := starts[b], starts[b+1]
			next := points[0]
			if int(e) < n {
				next = points[e]
			}
			f := filler | next&r.ownerMask
			// Without branches on the bucket's size, which is random.
			c := e - s
			in := padded[s : s+inlinePoints]
			v0, v1, v2 := in[0], in[1], in[2]
			if c < 1 {
				v0 = f
			}
			if c < 2 {
				v1 = f
			}
			if c < 3 {
				v2 = f
			}
			r.rec[b] = bucket{e: [inlinePoints]uint32{v0, v1, v2}, rest: min(c, inlinePoints)<<restBits | rs}
			if c > inlinePoints {
				for _, p := range points[s+inlinePoints : e] {
					r.rest[rs] = p
					rs++
				}
			}
		}
	})
	r.rec[nb] = bucket{e: [inlinePoints]uint32{points[0]}, rest: uint32(len(r.rest))}
	// The padding repeats the wrap entry; successorRest may read it but
	// never uses it.
	for j := len(r.rest); j < cap(r.rest); j++ {
		r.rest[:j+1][j] = points[0]
	}
	r.n = uint32(n)
}

// restStart returns the index in r.rest of bucket b's first point past
// its record, or where it would be.
func (r *Ring) restStart(b uint32) uint32 { return r.rec[b].rest & restMask }

// size returns the number of points in bucket b.
func (r *Ring) size(b uint32) uint32 {
	return r.rec[b].rest>>restBits + r.restStart(b+1) - r.restStart(b)
}

// entry returns the entry of point j of bucket b, for j < size(b).
func (r *Ring) entry(b, j uint32) uint32 {
	if j < inlinePoints {
		return r.rec[b].e[j]
	}
	return r.rest[r.restStart(b)+j-inlinePoints]
}

func (r *Ring) buckets() uint32 { return uint32(len(r.rec) - 1) }
