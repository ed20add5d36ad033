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
// ErrBadVnodes, ErrEmptyName, ErrBadWeight, ErrDuplicateName or
// ErrTooManyPoints; New never panics on bad input.
func New(nodes []Node, cfg *Config) (*Ring, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.VnodesPerWeight < 0 {
		return nil, fmt.Errorf("%w: got %d", ErrBadVnodes, c.VnodesPerWeight)
	}
	if c.VnodesPerWeight == 0 {
		c.VnodesPerWeight = DefaultVnodesPerWeight
	}
	ns, counts, total, err := prepare(nodes, c.VnodesPerWeight)
	if err != nil {
		return nil, err
	}
	r := &Ring{nodes: ns, hash: c.Hash, vpw: c.VnodesPerWeight}
	starts := r.layout(total)

	phase("prep")
	r.build(counts, starts)
	r.idx = newIndex(starts)
	phase("index")
	return r, nil
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
			return nil, nil, 0, fmt.Errorf("%w: node %q has weight %v", ErrBadWeight, n.Name, n.Weight)
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

// pad is how many entries past the last point successor may read; the first
// of them repeats the first point, so that running off the end wraps.
const pad = 5

// layout chooses the bucket and packing parameters for total points: one to
// two points per bucket, and enough bucket bits that a bucket offset and a
// node index fit together in 32 bits. It allocates r.points and returns a
// zeroed slice for the first point of each bucket, and the point count.
func (r *Ring) layout(total int) []uint32 {
	r.ownerBits = uint(bits.Len(uint(len(r.nodes) - 1)))
	r.ownerMask = uint32(1)<<r.ownerBits - 1
	b := max(uint(bits.Len(uint(total)))-1, r.ownerBits)
	r.shift = 32 - b
	r.offMask = uint32(uint64(1)<<r.shift - 1)
	r.points = make([]uint32, total, total+pad)
	return make([]uint32, 1<<b+1)
}

// seal writes the wrap entry after the last point.
func (r *Ring) seal() {
	r.points[:len(r.points)+1][len(r.points)] = r.points[0]
}

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
// nodes with the given point counts, sorting in three steps that each stay
// in cache: hash every point, counting them per partition (the top bits of
// the position); scatter them into their partitions; sort each partition
// into its buckets, an insertion sort keeping each bucket (about two points)
// in order. One counting sort over all the buckets would do, but at millions
// of points its scattered writes miss the cache.
func (r *Ring) build(counts []int, starts []uint32) {
	b := 32 - r.shift
	ob := r.ownerBits
	// Partition entries keep the position less its partition bits and the
	// node index in 32 bits, so there are at least 2^ownerBits partitions.
	p1 := min(b, max(ob, 10))
	pshift := 32 - p1

	pos := make([]uint32, len(r.points))
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
	phase("hash")
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

	phase("scatter")
	w := min(workers(len(pos)), 1<<p1)
	per := (1<<p1 + w - 1) / w
	parallel(w, func(i int) {
		r.sortParts(parts, starts, i*per, min((i+1)*per, 1<<p1), b-p1)
	})
	phase("sort")
	starts[len(starts)-1] = sum
	r.seal()
}

var phase = func(string) {}

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
// A partition holds thousands of entries, sorted by an LSD radix sort: two
// passes on the offset and node, a stable last pass on the bucket; every
// step is a counting loop without data-dependent branches (an insertion sort
// into buckets of about two mispredicts too often). Small partitions take an
// insertion sort.
func (r *Ring) sortParts(parts, starts []uint32, lo, hi int, sub uint) {
	low := r.shift + r.ownerBits // entry >> low is the bucket in the partition
	final := uint32(uint64(1)<<low - 1)
	b0 := low / 2
	b1 := low - b0
	m0, m1 := uint32(uint64(1)<<b0-1), uint32(uint64(1)<<b1-1)
	var h0, h1, scratch []uint32
	for part := lo; part < hi; part++ {
		first, end := parts[part], parts[part+1]
		src := r.points[first:end]
		bk := starts[part<<sub : (part+1)<<sub]
		small := len(src) < 64
		if small {
			insertionSort(src)
			for _, e := range src {
				bk[e>>low]++
			}
		} else {
			if h0 == nil {
				h0, h1 = make([]uint32, 1<<b0), make([]uint32, 1<<b1)
			}
			clear(h0)
			clear(h1)
			for _, e := range src {
				h0[e&m0]++
				h1[(e>>b0)&m1]++
				bk[e>>low]++
			}
			exclusiveSum(h0, 0)
			exclusiveSum(h1, 0)
			scratch = append(scratch[:0], src...)
			for _, e := range src {
				d := e & m0
				scratch[h0[d]] = e
				h0[d]++
			}
			for _, e := range scratch {
				d := (e >> b0) & m1
				src[h1[d]] = e
				h1[d]++
			}
			copy(scratch, src)
		}
		exclusiveSum(bk, first)
		if small {
			for i := range src {
				src[i] &= final
			}
			continue
		}
		// Stable by bucket, with bk as the cursors; then restore bk.
		for _, e := range scratch {
			s := e >> low
			r.points[bk[s]] = e & final
			bk[s]++
		}
		prev := first
		for i := range bk {
			bk[i], prev = prev, bk[i]
		}
	}
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
