package ring

import (
	"math/bits"
	"slices"
)

// With returns the ring New(nodes, cfg) would return for the Config r was
// built with, identical in every respect. It reuses r's points for every node
// whose name and point count are unchanged and hashes only the others, so
// adding or removing one node costs a merge of sorted points instead of a
// sort. A Recipe2 ring keeps the boundaries of its points, not the points,
// so With on one builds the new ring from scratch, as New does. With on a
// nil or zero Ring is New(nodes, nil). Errors are New's.
func (r *Ring) With(nodes []Node) (*Ring, error) {
	if r == nil || len(r.rec) == 0 {
		return New(nodes, nil)
	}
	if r.recipe == Recipe2 {
		return New(nodes, &Config{Recipe: Recipe2, VnodesPerWeight: r.vpw, Hash: r.hash})
	}
	ns, counts, total, err := prepare(nodes, r.vpw)
	if err != nil {
		return nil, err
	}
	nr := &Ring{nodes: ns, hash: r.hash, vpw: r.vpw, recipe: r.recipe}
	starts := nr.layout(total)
	nr.points = make([]uint32, total, total+inlinePoints) // see pack

	// remap[old] is the new index of an old node kept as is, else -1.
	remap := make([]int32, len(r.nodes))
	kept := make([]bool, len(ns))
	dropped := false
	for i, n := range r.nodes {
		remap[i] = -1
		if j, ok := nr.Index(n.Name); ok && counts[j] == pointCount(n.Weight, r.vpw) {
			remap[i] = int32(j)
			kept[j] = true
		} else {
			dropped = true
		}
	}
	fresh := nr.freshPoints(counts, kept)

	// Merge arc by arc, in parallel: the circle is cut into 2^arcBits equal
	// arcs, each a whole number of buckets of both rings.
	w := min(workers(total), 1<<min(32-r.shift, 32-nr.shift))
	arcBits := uint(bits.Len(uint(w)) - 1)
	arcs := make([]mergeArc, 1<<arcBits)
	for k := range arcs {
		a := &arcs[k]
		oldBuckets := uint32(1) << (32 - r.shift - arcBits)
		a.lo, a.hi = uint32(k)*oldBuckets, uint32(k+1)*oldBuckets
		startKey := uint64(k) << (64 - arcBits)
		a.fresh, _ = slices.BinarySearch(fresh, startKey)
		if k > 0 {
			arcs[k-1].freshEnd = a.fresh
		}
		a.bucket = uint32(k) << (32 - nr.shift - arcBits)
	}
	arcs[len(arcs)-1].freshEnd = len(fresh)
	// Where each arc's output starts: the kept points and fresh points before it.
	parallel(len(arcs), func(k int) {
		a := &arcs[k]
		for ob := a.lo; ob < a.hi; ob++ {
			n := r.size(ob)
			if !dropped {
				a.kept += n
				continue
			}
			for j := range n {
				if remap[r.entry(ob, j)&r.ownerMask] >= 0 {
					a.kept++
				}
			}
		}
	})
	out := uint32(0)
	for k := range arcs {
		arcs[k].out = out
		out += arcs[k].kept + uint32(arcs[k].freshEnd-arcs[k].fresh)
	}
	parallel(len(arcs), func(k int) {
		a := &arcs[k]
		end := len(starts)
		if k+1 < len(arcs) {
			end = int(arcs[k+1].bucket)
		}
		r.mergeArc(nr, starts[:end], remap, fresh[a.fresh:a.freshEnd], a)
	})
	nr.pack(nr.points, starts)
	nr.points = nil
	return nr, nil
}

// freshPoints hashes the points of the nodes not kept and returns them as
// sorted keys, position<<32 | node index.
func (nr *Ring) freshPoints(counts []int, kept []bool) []uint64 {
	tmp := &Ring{hash: nr.hash}
	var tmpCounts, tmpIdx []int
	total := 0
	for j, c := range counts {
		if !kept[j] {
			tmp.nodes = append(tmp.nodes, nr.nodes[j])
			tmpIdx = append(tmpIdx, j)
			tmpCounts = append(tmpCounts, c)
			total += c
		}
	}
	pos := make([]uint32, total)
	cs := chunks(pos, tmpCounts, workers(total))
	parallel(len(cs), func(i int) { tmp.generate(cs[i].pos, tmpCounts, cs[i].lo, cs[i].hi) })
	fresh := make([]uint64, 0, total)
	k := 0
	for f, c := range tmpCounts {
		for _, p := range pos[k : k+c] {
			fresh = append(fresh, uint64(p)<<32|uint64(tmpIdx[f]))
		}
		k += c
	}
	slices.Sort(fresh)
	return fresh
}

// mergeArc is one arc of a With merge.
type mergeArc struct {
	lo, hi          uint32 // the arc's buckets in the old ring
	fresh, freshEnd int    // the arc's fresh points
	kept            uint32 // old points kept
	out             uint32 // index of the arc's first point in the new ring
	bucket          uint32 // the arc's first bucket in the new ring
}

// mergeArc writes arc a of nr: r's kept points, renumbered, merged with
// fresh. It sets starts from a.bucket to the end of starts.
func (r *Ring) mergeArc(nr *Ring, starts []uint32, remap []int32, fresh []uint64, a *mergeArc) {
	w := writer{r: nr, starts: starts, n: a.out, b: a.bucket}
	f := 0
	for ob := a.lo; ob < a.hi; ob++ {
		base := ob << r.shift
		for j := range r.size(ob) {
			e := r.entry(ob, j)
			o := remap[e&r.ownerMask]
			if o < 0 {
				continue
			}
			key := uint64(base|e>>r.ownerBits)<<32 | uint64(o)
			for f < len(fresh) && fresh[f] < key {
				w.emit(fresh[f])
				f++
			}
			w.emit(key)
		}
	}
	for _, key := range fresh[f:] {
		w.emit(key)
	}
	for ; int(w.b) < len(starts); w.b++ {
		starts[w.b] = w.n
	}
}

// writer appends points, given in order as position<<32 | node, to a ring.
type writer struct {
	r      *Ring
	starts []uint32
	n      uint32 // next point
	b      uint32 // next bucket whose start is unset
}

func (w *writer) emit(key uint64) {
	p, o := uint32(key>>32), uint32(key)
	for b := p >> w.r.shift; w.b <= b; w.b++ {
		w.starts[w.b] = w.n
	}
	w.r.points[w.n] = (p&w.r.offMask)<<w.r.ownerBits | o
	w.n++
}
