package ring

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// slowLayout builds the ring New builds for nodes and cfg the plain way:
// every point hashed by the Config's Hash, a stable sort by position of
// the points in node order, the boundaries of Recipe2 in 64 bits, a count
// of the entries of each bucket; only pack, the final encoding, is New's.
func slowLayout(t *testing.T, nodes []Node, cfg *Config) *Ring {
	t.Helper()
	c := *cfg
	if c.VnodesPerWeight == 0 {
		c.VnodesPerWeight = DefaultVnodesPerWeight
		if c.Recipe == Recipe2 {
			c.VnodesPerWeight = DefaultVnodesPerWeight2
		}
	}
	hash := c.Hash
	if hash == nil {
		hash = xxhash.Sum64String
	}
	ns, counts, total, err := prepare(nodes, c.VnodesPerWeight)
	if err != nil {
		t.Fatal(err)
	}
	type point struct {
		pos   uint32
		owner uint32
	}
	pts := make([]point, 0, total)
	for i, n := range ns {
		for k := range counts[i] {
			pts = append(pts, point{uint32(hash(n.Name+"#"+strconv.Itoa(k)) >> 32), uint32(i)})
		}
	}
	slices.SortStableFunc(pts, func(a, b point) int { return cmp.Compare(a.pos, b.pos) })
	if c.Recipe == Recipe2 {
		bnd := make([]point, len(pts))
		for j, p := range pts {
			gap := uint64(1<<32) + uint64(pts[(j+1)%len(pts)].pos) - uint64(p.pos)
			if j+1 < len(pts) {
				gap = uint64(pts[j+1].pos) - uint64(p.pos)
			}
			bnd[j] = point{uint32((uint64(p.pos)+gap/2)%(1<<32)) | 0xff, p.owner}
		}
		if last := bnd[len(bnd)-1]; last.pos < pts[len(pts)-1].pos { // wrapped
			copy(bnd[1:], bnd)
			bnd[0] = last
		}
		pts = bnd
	}
	r := &Ring{nodes: ns, hash: c.Hash, vpw: c.VnodesPerWeight, recipe: c.Recipe}
	if r.recipe == 0 {
		r.recipe = Recipe1
	}
	starts := r.layout(total)
	r.points = make([]uint32, total, total+inlinePoints)
	for j, p := range pts {
		r.points[j] = (p.pos&r.offMask)<<r.ownerBits | p.owner
		starts[p.pos>>r.shift+1]++
	}
	for b := 1; b < len(starts); b++ {
		starts[b] += starts[b-1]
	}
	r.pack(r.points, starts)
	r.points = nil
	return r
}

// New, whose steps are split over the cores from parallelPoints points on,
// builds the plain way's ring bit for bit, on as many cores as GOMAXPROCS
// gives and for hashes that crowd points together (equal positions, empty
// buckets, boundaries on bucket edges).
func TestNewIdenticalToSlowLayout(t *testing.T) {
	coarse := func(s string) uint64 { return xxhash.Sum64String(s) &^ (1<<52 - 1) } // 12 bits
	fine := func(s string) uint64 { return xxhash.Sum64String(s) &^ (1<<42 - 1) }   // 22 bits
	nodes := func(n int) []Node {
		ns := make([]Node, n)
		for i := range ns {
			ns[i] = Node{Name: "shard-" + strconv.Itoa(i), Weight: float64(1 + i%3)}
		}
		return ns
	}
	cases := []struct {
		nodes int
		cfg   Config
	}{
		{3, Config{Recipe: Recipe2}},
		{60, Config{Recipe: Recipe2}},
		{60, Config{}},
		{300, Config{Recipe: Recipe2, VnodesPerWeight: 160}},
		{40, Config{Recipe: Recipe2, VnodesPerWeight: 1000, Hash: coarse}},
		{40, Config{Recipe: Recipe2, VnodesPerWeight: 1000, Hash: fine}},
		{40, Config{VnodesPerWeight: 1000, Hash: fine}},
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 3, 5} {
		runtime.GOMAXPROCS(procs)
		for _, c := range cases {
			t.Run(fmt.Sprintf("procs%d-%dnodes-recipe%d-V%d-hash%t", procs, c.nodes, c.cfg.Recipe, c.cfg.VnodesPerWeight, c.cfg.Hash != nil), func(t *testing.T) {
				got, err := New(nodes(c.nodes), &c.cfg)
				if err != nil {
					t.Fatal(err)
				}
				sameLayout(t, got, slowLayout(t, nodes(c.nodes), &c.cfg))
			})
		}
	}
}
