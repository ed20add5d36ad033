package ring

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// sameLayout fails unless a and b are the same ring, bit for bit.
func sameLayout(t *testing.T, a, b *Ring) {
	t.Helper()
	switch {
	case !slices.Equal(a.nodes, b.nodes), a.vpw != b.vpw:
		t.Fatal("nodes differ")
	case a.shift != b.shift, a.offMask != b.offMask, a.ownerBits != b.ownerBits, a.ownerMask != b.ownerMask:
		t.Fatal("layouts differ")
	case a.n != b.n, !slices.Equal(a.rest[:cap(a.rest)], b.rest[:cap(b.rest)]):
		t.Fatal("points differ")
	case !slices.Equal(a.rec, b.rec):
		t.Fatal("records differ")
	}
}

// With builds exactly New's ring, including across changes of layout (the
// bucket count doubles or halves, node indexes need another bit).
func TestWithIdenticalToNew(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	grow := func(n int) []Node {
		nodes := make([]Node, n)
		for i := range nodes {
			nodes[i] = Node{Name: "n" + strconv.Itoa(i), Weight: float64(1 + i%3)}
		}
		return nodes
	}
	cases := [][2]int{{1, 2}, {2, 1}, {3, 4}, {4, 5}, {8, 9}, {9, 8}, {16, 17}, {60, 70}, {127, 128}, {128, 129}, {200, 150}}
	for _, c := range cases {
		for _, v := range []int{1, 3, 64} {
			cfg := &Config{VnodesPerWeight: v}
			old, err := New(grow(c[0]), cfg)
			if err != nil {
				t.Fatal(err)
			}
			nodes := grow(c[1])
			if len(nodes) > 2 {
				nodes[rng.IntN(len(nodes))].Weight = rng.Float64() * 3 // and a re-weight
			}
			got, err := old.With(nodes)
			if err != nil {
				t.Fatal(err)
			}
			want, err := New(nodes, cfg)
			if err != nil {
				t.Fatal(err)
			}
			sameLayout(t, got, want)
		}
	}
	// Big enough to merge on several goroutines.
	old, _ := New(grow(40), nil)
	for _, n := range []int{41, 39} {
		got, err := old.With(grow(n))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := New(grow(n), nil)
		sameLayout(t, got, want)
	}
}

// A Hash with few values crowds every point into one bucket, past what the
// branch-free compares of a lookup cover.
func TestCrowdedIndex(t *testing.T) {
	crowd := func(string) uint64 { return 42 << 32 }
	r, err := New([]Node{{Name: "a", Weight: 1}, {Name: "b", Weight: 2}}, &Config{VnodesPerWeight: 200, Hash: crowd})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(r.rest); got != 597 {
		t.Errorf("len(rest) = %d, want 597 for 600 points at one position", got)
	}
	if r.OwnerIndexAt(42) != 0 || r.OwnerIndexAt(43) != 0 || r.OwnerIndexAt(0) != 0 {
		t.Error("a owns every position")
	}
	if got := r.ReplicaIndexes("k", nil, 2); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("ReplicaIndexes = %v", got)
	}
}

// Under Recipe2 a bucket stays at least 256 positions wide however many
// points a ring has, which boundaries relies on; Recipe1's grow narrower.
func TestRecipe2BucketsWide(t *testing.T) {
	for _, total := range []int{1, 1000, 1 << 20, 1 << 25, MaxPoints} {
		for _, ob := range []uint{0, 10, recipe2Bits} {
			if b := bucketBits(total, ob, Recipe2); b > recipe2Bits || b < ob {
				t.Errorf("Recipe2, %d points, %d owner bits: %d bucket bits", total, ob, b)
			}
		}
	}
	if b := bucketBits(MaxPoints, 0, Recipe1); b != 25 {
		t.Errorf("Recipe1, MaxPoints: %d bucket bits, want 25", b)
	}
}

// Under Recipe2, points all at one position give two arcs: the first
// point's, up to the end of the position's block of 256 and from halfway
// round the circle, and the last point's, in between.
func TestCrowdedRecipe2(t *testing.T) {
	crowd := func(string) uint64 { return 42 << 32 }
	r, err := New([]Node{{Name: "a", Weight: 1}, {Name: "b", Weight: 2}}, &Config{Recipe: Recipe2, VnodesPerWeight: 200, Hash: crowd})
	if err != nil {
		t.Fatal(err)
	}
	for pos, want := range map[uint32]int{0: 0, 42: 0, 0xff: 0, 0x100: 1, 0x800000ff: 1, 0x80000100: 0, 1<<32 - 1: 0} {
		if got := r.OwnerIndexAt(pos); got != want {
			t.Errorf("OwnerIndexAt(%#x) = %d, want %d", pos, got, want)
		}
	}
	if s := r.Shares(); s["b"] != float64(0x80000000)/(1<<32) {
		t.Errorf("Shares = %v, want b at exactly one half", s)
	}
}
