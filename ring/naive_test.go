package ring_test

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/redshard/redshard/ring"
)

// naive re-implements the placement recipe of doc.go the slow, obvious way:
// one sorted slice of every point and a linear scan. It shares no code with
// the package, so agreement checks the package against the written recipe.
type naive struct {
	hash  func(string) uint64
	pts   []naivePoint
	names []string
	// Under Recipe2, bnd[j] is where point j's arc ends: the arc is
	// (bnd[j-1], bnd[j]], with bnd[-1] the last one, taken modulo 2^32.
	bnd []uint64
}

type naivePoint struct {
	pos  uint32
	name string
	idx  int
}

func newNaive(nodes []ring.Node, v int, hash func(string) uint64) *naive {
	if hash == nil {
		hash = xxhash.Sum64String
	}
	if v == 0 {
		v = ring.DefaultVnodesPerWeight
	}
	n := &naive{hash: hash}
	for _, nd := range nodes {
		w := nd.Weight
		if w == 0 {
			w = 1
		}
		p := int(math.Max(1, math.Round(w*float64(v))))
		for i := 0; i < p; i++ {
			pos := uint32(hash(nd.Name+"#"+strconv.Itoa(i)) >> 32)
			n.pts = append(n.pts, naivePoint{pos, nd.Name, i})
		}
		n.names = append(n.names, nd.Name)
	}
	slices.SortFunc(n.pts, func(a, b naivePoint) int {
		return cmp.Or(cmp.Compare(a.pos, b.pos), strings.Compare(a.name, b.name), cmp.Compare(a.idx, b.idx))
	})
	slices.Sort(n.names)
	return n
}

// newNaive2 is newNaive under Recipe2: each key belongs to its nearest
// point, a key halfway between two points to the one before it, by way of
// the boundaries of the recipe, computed in 64 bits, then rounded up to
// the end of their block of 256 positions.
func newNaive2(nodes []ring.Node, v int, hash func(string) uint64) *naive {
	if v == 0 {
		v = ring.DefaultVnodesPerWeight2
	}
	n := newNaive(nodes, v, hash)
	for j, p := range n.pts {
		gap := uint64(1) << 32 // to the next point, clockwise
		if j+1 < len(n.pts) {
			gap = uint64(n.pts[j+1].pos) - uint64(p.pos)
		} else {
			gap = 1<<32 + uint64(n.pts[0].pos) - uint64(p.pos)
		}
		n.bnd = append(n.bnd, (uint64(p.pos)+gap/2)%(1<<32)|0xff)
	}
	return n
}

// arc returns the start and the length of point j's arc under Recipe2.
func (n *naive) arc(j int) (start uint32, length uint64) {
	prev := n.bnd[(j+len(n.bnd)-1)%len(n.bnd)]
	if len(n.bnd) == 1 {
		return uint32(prev), 1 << 32
	}
	return uint32(prev), (n.bnd[j] + 1<<32 - prev) % (1 << 32)
}

func naiveTag(key string) string {
	s := strings.Index(key, "{")
	if s < 0 {
		return key
	}
	e := strings.Index(key[s+1:], "}")
	if e < 0 {
		return key
	}
	e += s + 1
	if e <= s+1 {
		return key
	}
	return key[s+1 : e]
}

func (n *naive) position(key string) uint32 { return uint32(n.hash(naiveTag(key)) >> 32) }

// ownerPoint returns the index of the point that owns position k.
func (n *naive) ownerPoint(k uint32) int {
	if n.bnd != nil {
		for j := range n.pts {
			start, length := n.arc(j)
			if d := uint64(k - start); d != 0 && d <= length || length == 1<<32 {
				return j
			}
		}
		panic("no arc holds the position")
	}
	for i, p := range n.pts {
		if p.pos >= k {
			return i
		}
	}
	return 0
}

func (n *naive) lookup(key string) string { return n.pts[n.ownerPoint(n.position(key))].name }

func (n *naive) replicas(key string, cnt int) []string {
	if cnt <= 0 {
		return nil
	}
	var out []string
	start := n.ownerPoint(n.position(key))
	for j := 0; j < len(n.pts) && len(out) < cnt; j++ {
		name := n.pts[(start+j)%len(n.pts)].name
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func (n *naive) shares() map[string]float64 {
	arcs := map[string]uint64{}
	for j, p := range n.pts {
		if n.bnd != nil {
			_, length := n.arc(j)
			arcs[p.name] += length
			continue
		}
		if j == 0 {
			last := n.pts[len(n.pts)-1].pos
			arcs[p.name] += (1<<32 - uint64(last) - 1) + uint64(p.pos) + 1
		} else {
			arcs[p.name] += uint64(p.pos - n.pts[j-1].pos)
		}
	}
	out := map[string]float64{}
	for _, name := range n.names {
		out[name] = float64(arcs[name]) / (1 << 32)
	}
	return out
}
