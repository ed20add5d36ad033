package ring

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// New builds the ring for nodes. The order of nodes does not matter. cfg may
// be nil for the defaults; New does not retain cfg. Errors wrap ErrNoNodes,
// ErrInvalidRecipe, ErrInvalidVnodes, ErrEmptyName, ErrInvalidWeight, ErrDuplicateName or
// ErrTooManyPoints; New never panics on bad input.
func New(nodes []Node, cfg *Config) (*Ring, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.VnodesPerWeight < 0 {
		return nil, fmt.Errorf("%w: got %d", ErrInvalidVnodes, c.VnodesPerWeight)
	}
	switch c.Recipe {
	case 0, Recipe1:
		c.Recipe = Recipe1
		if c.VnodesPerWeight == 0 {
			c.VnodesPerWeight = DefaultVnodesPerWeight
		}
	case Recipe2:
		if c.VnodesPerWeight == 0 {
			c.VnodesPerWeight = DefaultVnodesPerWeight2
		}
	default:
		return nil, fmt.Errorf("%w: got %d", ErrInvalidRecipe, c.Recipe)
	}
	ns, counts, total, err := prepare(nodes, c.VnodesPerWeight)
	if err != nil {
		return nil, err
	}
	if c.Recipe == Recipe2 && len(ns) > 1<<recipe2Bits {
		return nil, fmt.Errorf("%w: Recipe2 takes at most %d nodes, got %d", ErrTooManyPoints, 1<<recipe2Bits, len(ns))
	}
	r := &Ring{nodes: ns, hash: c.Hash, vpw: c.VnodesPerWeight, recipe: c.Recipe}
	starts := r.layout(total)
	sc := getScratch(total)
	r.points = sc.points[:total]
	points := r.build(counts, starts, sc.pos[:total])
	r.pack(points, starts)
	r.points = nil
	putScratch(sc)
	return r, nil
}

// scratch is the working memory of a build, points to sort and their
// positions, which no ring keeps. Builds of pooledPoints points take it
// from scratchPool, to spare allocating and zeroing 8 bytes a point and
// the garbage collections that would follow.
type scratch struct{ points, pos []uint32 }

var scratchPool sync.Pool

// pooledPoints is the range of ring sizes whose builds reuse scratch: from
// where New works on several cores up to 2^21 points (16 MiB of scratch,
// a Recipe2 ring of 2000 shards), so that the pool does not hold on to
// the 64 MiB of a Recipe1 ring of 1000 shards.
func pooledPoints(total int) bool { return total >= parallelPoints && total <= 1<<21 }

// getScratch returns scratch for total points: each slice has room for
// 1+inlinePoints more (see build and pack).
func getScratch(total int) *scratch {
	n := total + 1 + inlinePoints
	if pooledPoints(total) {
		if sc, _ := scratchPool.Get().(*scratch); sc != nil && cap(sc.points) >= n {
			return sc
		}
	}
	return &scratch{points: make([]uint32, n), pos: make([]uint32, n)}
}

func putScratch(sc *scratch) {
	if pooledPoints(len(sc.points) - 1 - inlinePoints) {
		scratchPool.Put(sc)
	}
}

// prepare validates nodes and returns them sorted by name and normalised,
// with each node's point count and their sum.
func prepare(nodes []Node, vpw int) ([]Node, []int, int, error) {
	if len(nodes) == 0 {
		return nil, nil, 0, ErrNoNodes
	}
	ns := make([]Node, len(nodes))
	for i, n := range nodes {
		switch {
		case n.Name == "":
			return nil, nil, 0, fmt.Errorf("%w: node %d", ErrEmptyName, i)
		case n.Weight < 0 || math.IsNaN(n.Weight) || math.IsInf(n.Weight, 0):
			return nil, nil, 0, fmt.Errorf("%w: node %q has weight %v", ErrInvalidWeight, n.Name, n.Weight)
		case n.Weight == 0:
			n.Weight = 1
		}
		ns[i] = n
	}
	slices.SortFunc(ns, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	counts := make([]int, len(ns))
	total := 0
	for i, n := range ns {
		if i > 0 && ns[i-1].Name == n.Name {
			return nil, nil, 0, fmt.Errorf("%w: %q", ErrDuplicateName, n.Name)
		}
		p := pointCount(n.Weight, vpw)
		if p > MaxPoints-total {
			return nil, nil, 0, fmt.Errorf("%w: node %q with weight %v and VnodesPerWeight %d takes the total past %d",
				ErrTooManyPoints, n.Name, n.Weight, vpw, MaxPoints)
		}
		counts[i] = p
		total += p
	}
	return ns, counts, total, nil
}

// pointCount is max(1, round(w*vpw)), or MaxPoints+1 when that is larger
// than MaxPoints, so the caller's sum cannot overflow.
func pointCount(w float64, vpw int) int {
	p := math.Round(w * float64(vpw))
	switch {
	case p < 1:
		return 1
	case p > MaxPoints:
		return MaxPoints + 1
	}
	return int(p)
}

// pad is how many entries past the end of Ring.rest successor may read.
const pad = 4

// layout chooses the bucket and packing parameters for total points: two to
// four points per bucket, and enough bucket bits that a bucket offset and a
// node index fit together in 32 bits. It returns a zeroed slice for the
// first point of each bucket. r.points, which pack turns into the final
// layout, is for the caller to set: total entries with room for
// inlinePoints more.
func (r *Ring) layout(total int) []uint32 {
	r.ownerBits = uint(bits.Len(uint(len(r.nodes) - 1)))
	r.ownerMask = uint32(1)<<r.ownerBits - 1
	b := bucketBits(total, r.ownerBits, r.recipe)
	r.shift = 32 - b
	r.offMask = uint32(uint64(1)<<r.shift - 1)
	return make([]uint32, 1<<b+1)
}

// bucketBits returns the number of bucket bits for total points and
// ownerBits of node index: two to four points a bucket, at least
// ownerBits, and under Recipe2 at most recipe2Bits, so that a bucket is at
// least 256 positions wide and a boundary, rounded up to the end of its
// block of 256, stays in the bucket of the point after it (see
// boundaries). New refuses Recipe2 rings whose nodes need more than
// recipe2Bits.
func bucketBits(total int, ownerBits uint, recipe int) uint {
	b := uint(max(bits.Len(uint(total))-2, int(ownerBits)))
	if recipe == Recipe2 {
		b = max(min(b, recipe2Bits), ownerBits)
	}
	return b
}

// recipe2Bits is the most bucket bits of a Recipe2 ring, and of its node
// indexes.
const recipe2Bits = 24

// parallelPoints is the ring size from which New works on several cores.
const parallelPoints = 1 << 16

// workers returns how many goroutines to split work on n points over.
func workers(n int) int {
	if n < parallelPoints {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// parallel runs f(0), ..., f(n-1), on n goroutines when n > 1, and waits.
func parallel(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// chunk is a run of nodes whose points one goroutine hashes and scatters.
type chunk struct {
	lo, hi int      // nodes
	pos    []uint32 // their positions, node after node
	hist   []uint32 // points per partition, then the write cursor of each
}

// chunks splits the nodes into up to w runs of about equal point counts,
// backed by pos.
func chunks(pos []uint32, counts []int, w int) []chunk {
	w = max(1, min(w, len(counts)))
	per := (len(pos) + w - 1) / w
	var cs []chunk
	first, start, acc := 0, 0, 0
	for i, c := range counts {
		acc += c
		if acc-start >= per || i == len(counts)-1 {
			cs = append(cs, chunk{lo: first, hi: i + 1, pos: pos[start:acc]})
			first, start = i+1, acc
		}
	}
	return cs
}

// build fills r.points and starts, the first point of each bucket, for
// nodes with the given point counts, in three steps, each split over the
// cores: hash every point, counting them per partition (the top bits of the
// position); scatter them into their partitions; sort each partition into
// its buckets (sortParts). One counting sort over all the buckets would do,
// but at millions of points its scattered writes miss the cache, where a
// partition of a few thousand points is sorted within it.
//
// Under Recipe2 the last step sorts on the whole position and turns each
// point into its boundary (sortBoundaries), and starts become the starts
// of the boundaries' buckets. build returns the entries pack takes, in order: r.points, or
// under Recipe2 the boundaries', which have room for inlinePoints more.
// pos is scratch for the points' positions, len(r.points) long with room
// for 1+inlinePoints more.
func (r *Ring) build(counts []int, starts, pos []uint32) []uint32 {
	b := 32 - r.shift
	ob := r.ownerBits
	// Partitions of about 4096 points keep the last sort in cache. Their
	// entries keep the position less its partition bits and the node index
	// in 32 bits, so there are at least 2^ownerBits partitions.
	p1 := min(b, max(ob, uint(max(bits.Len(uint(len(r.points))), 12))-12))
	pshift := 32 - p1

	cs := chunks(pos, counts, workers(len(pos)))
	parallel(len(cs), func(i int) {
		c := &cs[i]
		r.generate(c.pos, counts, c.lo, c.hi)
		c.hist = make([]uint32, 1<<p1)
		for _, x := range c.pos {
			c.hist[x>>pshift]++
		}
	})
	// Partition p starts at parts[p]; within it, chunk after chunk.
	parts := make([]uint32, 1<<p1+1)
	sum := uint32(0)
	for p := range 1 << p1 {
		parts[p] = sum
		for i := range cs {
			n := cs[i].hist[p]
			cs[i].hist[p] = sum
			sum += n
		}
	}
	parts[1<<p1] = sum
	lowMask := uint32(uint64(1)<<pshift - 1)
	parallel(len(cs), func(i int) {
		c := &cs[i]
		k := 0
		for n := c.lo; n < c.hi; n++ {
			for _, x := range c.pos[k : k+counts[n]] {
				p := x >> pshift
				r.points[c.hist[p]] = (x&lowMask)<<ob | uint32(n)
				c.hist[p]++
			}
			k += counts[n]
		}
	})

	w := min(workers(len(pos)), 1<<p1)
	per := (1<<p1 + w - 1) / w
	if r.recipe == Recipe2 {
		out := pos[:len(pos)+1]
		runs := make([]boundaryRun, w)
		parallel(w, func(i int) {
			runs[i] = r.sortBoundaries(parts, starts, out, i*per, min((i+1)*per, 1<<p1), pshift)
		})
		return r.boundaries(runs, starts, out)
	}
	parallel(w, func(i int) {
		r.sortParts(parts, starts, i*per, min((i+1)*per, 1<<p1), b-p1)
	})
	starts[len(starts)-1] = sum
	return r.points
}

// generate writes the positions of nodes [lo, hi) into pos.
func (r *Ring) generate(pos []uint32, counts []int, lo, hi int) {
	var buf []byte
	k := 0
	for n := lo; n < hi; n++ {
		buf = append(append(buf[:0], r.nodes[n].Name...), '#', '0')
		digits := len(buf) - 1
		for range counts[n] {
			var h uint64
			if r.hash == nil {
				h = xxhash.Sum64(buf)
			} else {
				h = r.hash(string(buf))
			}
			pos[k] = uint32(h >> 32)
			k++
			buf = increment(buf, digits)
		}
	}
}

// increment adds one to the decimal number in buf[digits:].
func increment(buf []byte, digits int) []byte {
	for i := len(buf) - 1; i >= digits; i-- {
		if buf[i] != '9' {
			buf[i]++
			return buf
		}
		buf[i] = '0'
	}
	// All nines: 99 -> 100.
	buf[digits] = '1'
	return append(buf, '0')
}

// sortParts sorts partitions [lo, hi) of r.points, bounded by parts and each
// made of 2^sub buckets, into their final encoding, and sets their starts.
// An entry of a partition is (bucket, offset, node) from high bits to low,
// so sorting entries as integers sorts by position and breaks ties by node.
// The scatter left each partition in node order, so a stable sort on the
// position alone gives the same order: an LSD radix sort, one pass per
// digit of the offset (usually one), then a last pass on the bucket, which
// writes the final entries. Each pass is a counting loop without
// data-dependent branches (an insertion sort into buckets of about two
// points mispredicts too often). Small partitions take an insertion sort.
func (r *Ring) sortParts(parts, starts []uint32, lo, hi int, sub uint) {
	ob := r.ownerBits
	low := r.shift + ob // entry >> low is the bucket in the partition
	final := uint32(uint64(1)<<low - 1)
	// Digits of the offset, of at most 11 bits, so that counts stay in L1.
	nd := (r.shift + 10) / 11
	dw := uint(0)
	if nd > 0 {
		dw = (r.shift + nd - 1) / nd
	}
	dmask := uint32(uint64(1)<<dw - 1)
	hist := make([]uint32, nd<<dw)
	var bufs [2][]uint32
	for part := lo; part < hi; part++ {
		first, end := parts[part], parts[part+1]
		src := r.points[first:end]
		bk := starts[part<<sub : (part+1)<<sub]
		if len(src) < 64 {
			insertionSort(src)
			for i, e := range src {
				bk[e>>low]++
				src[i] = e & final
			}
			exclusiveSum(bk, first)
			continue
		}
		clear(hist)
		switch nd { // the usual cases without the inner loop
		case 1:
			for _, e := range src {
				bk[e>>low]++
				hist[e>>ob&dmask]++
			}
		case 2:
			h0, h1 := hist[:1<<dw], hist[1<<dw:2<<dw]
			for _, e := range src {
				bk[e>>low]++
				h0[e>>ob&dmask]++
				h1[e>>(ob+dw)&dmask]++
			}
		default:
			for _, e := range src {
				bk[e>>low]++
				for d := range nd {
					hist[d<<dw+uint(e>>(ob+d*dw)&dmask)]++
				}
			}
		}
		in := src
		for d := range nd {
			h := hist[d<<dw : (d+1)<<dw]
			exclusiveSum(h, 0)
			if cap(bufs[d%2]) < len(src) {
				bufs[d%2] = make([]uint32, 2*len(src))
			}
			out := bufs[d%2][:len(src)]
			shift := ob + d*dw
			for _, e := range in {
				k := e >> shift & dmask
				out[h[k]] = e
				h[k]++
			}
			in = out
		}
		// Stable by bucket into place, with bk as the cursors; then
		// restore bk to the starts.
		exclusiveSum(bk, first)
		for _, e := range in {
			k := e >> low
			r.points[bk[k]] = e & final
			bk[k]++
		}
		prev := first
		for i := range bk {
			bk[i], prev = prev, bk[i]
		}
	}
}

// boundaryRun is what sortBoundaries leaves to its caller: the last of
// its points, whose boundary depends on the next point, and the position
// of its first.
type boundaryRun struct {
	n                uint32 // points
	first, last      uint32 // positions
	lastOwner, lastJ uint32 // the last point's owner and index
}

// sortBoundaries sorts partitions [lo, hi) of r.points, an LSD radix sort
// on the pshift bits of position in their entries (stable, so that ties
// keep the node order of the scatter), and, while they are in the cache,
// turns each point but the last into its boundary under Recipe2: point
// j's boundary is p_j + floor(g_j/2), where g_j is the distance to the
// next point clockwise, rounded up to the last position of its block of
// 256, so the arcs between boundaries are the keys nearest each point,
// and only the top 24 bits of a key's position matter. It writes point
// j's boundary at out[j+1] and counts it in counts[k+1], k its bucket. A
// boundary lies between its point and the next, so in the buckets of
// partitions [lo, hi): concurrent calls on others write other counts.
func (r *Ring) sortBoundaries(parts, counts, out []uint32, lo, hi int, pshift uint) boundaryRun {
	ob, shift, om, offMask := r.ownerBits, r.shift, r.ownerMask, r.offMask
	// An LSD radix sort on the pshift bits of position in the entries, in
	// digits of at most 11 bits, so that counts stay in L1.
	nd := (pshift + 10) / 11
	dw := (pshift + nd - 1) / nd
	dmask := uint32(uint64(1)<<dw - 1)
	hist := make([]uint32, nd<<dw)
	var bufs [2][]uint32
	var run boundaryRun
	var prevPos, prevOwner uint32
	for part := lo; part < hi; part++ {
		first, end := parts[part], parts[part+1]
		in := r.points[first:end]
		if len(in) < 64 {
			insertionSort(in)
		} else {
			clear(hist)
			switch nd {
			case 2: // the usual case at a million points
				h0, h1 := hist[:1<<dw], hist[1<<dw:2<<dw]
				for _, e := range in {
					h0[e>>ob&dmask]++
					h1[e>>(ob+dw)&dmask]++
				}
			case 3:
				h0, h1, h2 := hist[:1<<dw], hist[1<<dw:2<<dw], hist[2<<dw:3<<dw]
				for _, e := range in {
					h0[e>>ob&dmask]++
					h1[e>>(ob+dw)&dmask]++
					h2[e>>(ob+2*dw)&dmask]++
				}
			default:
				for _, e := range in {
					for d := range nd {
						hist[d<<dw+uint(e>>(ob+d*dw)&dmask)]++
					}
				}
			}
			for d := range nd {
				h, sh := hist[d<<dw:(d+1)<<dw], ob+d*dw
				exclusiveSum(h, 0)
				if cap(bufs[d%2]) < len(in) {
					bufs[d%2] = make([]uint32, 2*len(in))
				}
				o := bufs[d%2][:len(in)]
				for _, e := range in {
					k := e >> sh & dmask
					o[h[k]] = e
					h[k]++
				}
				in = o
			}
		}
		if len(in) == 0 {
			continue
		}
		base := uint32(part) << pshift
		j := first
		if run.n == 0 {
			run.first = base | in[0]>>ob
			prevPos, prevOwner = run.first, in[0]&om
			in = in[1:]
			j++
		}
		for _, e := range in {
			p := base | e>>ob
			bnd := (prevPos + (p-prevPos)/2) | 0xff
			out[j] = (bnd&offMask)<<ob | prevOwner
			counts[bnd>>shift+1]++
			prevPos, prevOwner = p, e&om
			j++
		}
		run.n += end - first
		run.lastJ = j - 1
	}
	run.last, run.lastOwner = prevPos, prevOwner
	return run
}

// boundaries finishes the boundaries runs of sortBoundaries left: those of
// the last point of each run, the last of all wrapping past 2^32 to the
// first point. They are in the points' order, except that the last
// point's moves to the front when it wraps (it is then below the first
// point's position, so below every other boundary); that gives the
// entries, out[0:n] or out[1:n+1], and the counts of their buckets, in
// starts, the starts.
func (r *Ring) boundaries(runs []boundaryRun, starts, out []uint32) []uint32 {
	ob, shift := r.ownerBits, r.shift
	n := uint32(len(out) - 1)
	var prev *boundaryRun
	var first uint32 // the first point's position
	for i := range runs {
		switch {
		case runs[i].n == 0:
			continue
		case prev == nil:
			first = runs[i].first
		default:
			bnd := (prev.last + (runs[i].first-prev.last)/2) | 0xff
			out[prev.lastJ+1] = (bnd&r.offMask)<<ob | prev.lastOwner
			starts[bnd>>shift+1]++
		}
		prev = &runs[i]
	}
	wrapEnd := uint64(prev.last) + (1<<32+uint64(first)-uint64(prev.last))/2
	bnd := uint32(wrapEnd) | 0xff
	e := (bnd&r.offMask)<<ob | prev.lastOwner
	starts[bnd>>shift+1]++
	for b := 1; b < len(starts); b++ {
		starts[b] += starts[b-1]
	}
	if wrapEnd >= 1<<32 {
		out[0] = e
		return out[:n]
	}
	out[n] = e
	return out[1:]
}

// exclusiveSum replaces each count with base plus the sum of those before.
func exclusiveSum(s []uint32, base uint32) {
	for i, c := range s {
		s[i] = base
		base += c
	}
}

func insertionSort(s []uint32) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
