package ring_test

import (
	"slices"
	"testing"

	"github.com/redshard/redshard/ring"
)

// The test vectors printed in doc.go. They were computed once and are fixed
// here: if this test fails, placement changed and every client of a fleet
// would disagree with the ones not yet upgraded.

var vectorNodes = []ring.Node{{Name: "alpha", Weight: 1}, {Name: "bravo", Weight: 1}, {Name: "charlie", Weight: 2}, {Name: "delta", Weight: 0.5}}

type vector struct {
	key      string
	position uint32
	owner    string
	replicas [3]string
}

var vectors16 = []vector{
	{"", 0xef46db37, "delta", [3]string{"delta", "charlie", "alpha"}},
	{"a", 0xd24ec4f1, "alpha", [3]string{"alpha", "charlie", "bravo"}},
	{"foo", 0x33bf00a8, "alpha", [3]string{"alpha", "bravo", "delta"}},
	{"bar", 0x48a37c90, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"key:0", 0x5913602a, "delta", [3]string{"delta", "charlie", "alpha"}},
	{"key:1", 0xbd499548, "alpha", [3]string{"alpha", "bravo", "charlie"}},
	{"key:42", 0x37322fc6, "alpha", [3]string{"alpha", "bravo", "delta"}},
	{"user:1000", 0x4836ae42, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{user1}.a", 0x63edb095, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{user1}.b", 0x63edb095, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"user1", 0x63edb095, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{}", 0x2e1472b5, "alpha", [3]string{"alpha", "bravo", "delta"}},
	{"{}x", 0xdeda4be6, "bravo", [3]string{"bravo", "alpha", "charlie"}},
	{"x{}", 0xb839c1c4, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"{a}{b}", 0xd24ec4f1, "alpha", [3]string{"alpha", "charlie", "bravo"}},
	{"{b}", 0x78452aa1, "bravo", [3]string{"bravo", "charlie", "delta"}},
	{"foo{bar}baz", 0x48a37c90, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{", 0xea9ca750, "delta", [3]string{"delta", "charlie", "alpha"}},
	{"}", 0xf38e01c0, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"}{a}", 0xd24ec4f1, "alpha", [3]string{"alpha", "charlie", "bravo"}},
	{"{x", 0x0cd7d4f5, "delta", [3]string{"delta", "charlie", "alpha"}},
	{"x}", 0x9a4610c8, "delta", [3]string{"delta", "alpha", "charlie"}},
	{"hello world", 0x45ab6734, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"日本語", 0x7179a19f, "bravo", [3]string{"bravo", "alpha", "charlie"}},
}

var vectorsDefault = []vector{
	{"", 0xef46db37, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"a", 0xd24ec4f1, "bravo", [3]string{"bravo", "alpha", "charlie"}},
	{"foo", 0x33bf00a8, "alpha", [3]string{"alpha", "bravo", "charlie"}},
	{"bar", 0x48a37c90, "alpha", [3]string{"alpha", "bravo", "charlie"}},
	{"key:0", 0x5913602a, "bravo", [3]string{"bravo", "alpha", "charlie"}},
	{"key:1", 0xbd499548, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"key:42", 0x37322fc6, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"user:1000", 0x4836ae42, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"{user1}.a", 0x63edb095, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{user1}.b", 0x63edb095, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"user1", 0x63edb095, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{}", 0x2e1472b5, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{}x", 0xdeda4be6, "charlie", [3]string{"charlie", "bravo", "delta"}},
	{"x{}", 0xb839c1c4, "alpha", [3]string{"alpha", "delta", "bravo"}},
	{"{a}{b}", 0xd24ec4f1, "bravo", [3]string{"bravo", "alpha", "charlie"}},
	{"{b}", 0x78452aa1, "alpha", [3]string{"alpha", "delta", "bravo"}},
	{"foo{bar}baz", 0x48a37c90, "alpha", [3]string{"alpha", "bravo", "charlie"}},
	{"{", 0xea9ca750, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"}", 0xf38e01c0, "alpha", [3]string{"alpha", "bravo", "charlie"}},
	{"}{a}", 0xd24ec4f1, "bravo", [3]string{"bravo", "alpha", "charlie"}},
	{"{x", 0x0cd7d4f5, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"x}", 0x9a4610c8, "charlie", [3]string{"charlie", "alpha", "delta"}},
	{"hello world", 0x45ab6734, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"日本語", 0x7179a19f, "alpha", [3]string{"alpha", "charlie", "delta"}},
}

// The Recipe2 vectors of doc.go, fixed in the same way.

var vectors2V16 = []vector{
	{"", 0xef46db37, "delta", [3]string{"delta", "charlie", "alpha"}},
	{"a", 0xd24ec4f1, "alpha", [3]string{"alpha", "charlie", "bravo"}},
	{"foo", 0x33bf00a8, "alpha", [3]string{"alpha", "bravo", "delta"}},
	{"bar", 0x48a37c90, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"key:0", 0x5913602a, "bravo", [3]string{"bravo", "delta", "charlie"}},
	{"key:1", 0xbd499548, "bravo", [3]string{"bravo", "alpha", "charlie"}},
	{"key:42", 0x37322fc6, "alpha", [3]string{"alpha", "bravo", "delta"}},
	{"user:1000", 0x4836ae42, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{user1}.a", 0x63edb095, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{user1}.b", 0x63edb095, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"user1", 0x63edb095, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{}", 0x2e1472b5, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{}x", 0xdeda4be6, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"x{}", 0xb839c1c4, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"{a}{b}", 0xd24ec4f1, "alpha", [3]string{"alpha", "charlie", "bravo"}},
	{"{b}", 0x78452aa1, "bravo", [3]string{"bravo", "charlie", "delta"}},
	{"foo{bar}baz", 0x48a37c90, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{", 0xea9ca750, "charlie", [3]string{"charlie", "delta", "alpha"}},
	{"}", 0xf38e01c0, "delta", [3]string{"delta", "charlie", "alpha"}},
	{"}{a}", 0xd24ec4f1, "alpha", [3]string{"alpha", "charlie", "bravo"}},
	{"{x", 0x0cd7d4f5, "charlie", [3]string{"charlie", "delta", "alpha"}},
	{"x}", 0x9a4610c8, "charlie", [3]string{"charlie", "delta", "alpha"}},
	{"hello world", 0x45ab6734, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"日本語", 0x7179a19f, "bravo", [3]string{"bravo", "alpha", "charlie"}},
}

var vectors2Default = []vector{
	{"", 0xef46db37, "alpha", [3]string{"alpha", "bravo", "charlie"}},
	{"a", 0xd24ec4f1, "bravo", [3]string{"bravo", "delta", "alpha"}},
	{"foo", 0x33bf00a8, "bravo", [3]string{"bravo", "delta", "charlie"}},
	{"bar", 0x48a37c90, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"key:0", 0x5913602a, "alpha", [3]string{"alpha", "bravo", "charlie"}},
	{"key:1", 0xbd499548, "charlie", [3]string{"charlie", "bravo", "delta"}},
	{"key:42", 0x37322fc6, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"user:1000", 0x4836ae42, "charlie", [3]string{"charlie", "delta", "bravo"}},
	{"{user1}.a", 0x63edb095, "bravo", [3]string{"bravo", "delta", "charlie"}},
	{"{user1}.b", 0x63edb095, "bravo", [3]string{"bravo", "delta", "charlie"}},
	{"user1", 0x63edb095, "bravo", [3]string{"bravo", "delta", "charlie"}},
	{"{}", 0x2e1472b5, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"{}x", 0xdeda4be6, "bravo", [3]string{"bravo", "delta", "alpha"}},
	{"x{}", 0xb839c1c4, "bravo", [3]string{"bravo", "charlie", "delta"}},
	{"{a}{b}", 0xd24ec4f1, "bravo", [3]string{"bravo", "delta", "alpha"}},
	{"{b}", 0x78452aa1, "delta", [3]string{"delta", "charlie", "alpha"}},
	{"foo{bar}baz", 0x48a37c90, "charlie", [3]string{"charlie", "alpha", "bravo"}},
	{"{", 0xea9ca750, "bravo", [3]string{"bravo", "alpha", "charlie"}},
	{"}", 0xf38e01c0, "bravo", [3]string{"bravo", "alpha", "charlie"}},
	{"}{a}", 0xd24ec4f1, "bravo", [3]string{"bravo", "delta", "alpha"}},
	{"{x", 0x0cd7d4f5, "charlie", [3]string{"charlie", "bravo", "delta"}},
	{"x}", 0x9a4610c8, "bravo", [3]string{"bravo", "alpha", "charlie"}},
	{"hello world", 0x45ab6734, "charlie", [3]string{"charlie", "bravo", "alpha"}},
	{"日本語", 0x7179a19f, "alpha", [3]string{"alpha", "charlie", "bravo"}},
}

func TestVectors(t *testing.T) {
	if ring.DefaultVnodesPerWeight != 8192 || ring.DefaultVnodesPerWeight2 != 1024 {
		t.Fatalf("DefaultVnodesPerWeight = %d, DefaultVnodesPerWeight2 = %d; the vectors are for 8192 and 1024",
			ring.DefaultVnodesPerWeight, ring.DefaultVnodesPerWeight2)
	}
	tests := []struct {
		name    string
		recipe  int
		vpw     int
		vectors []vector
		arcs    map[string]uint64 // positions owned, of 2^32
	}{
		{"V16", 0, 16, vectors16, map[string]uint64{
			"alpha": 964595681, "bravo": 722149089, "charlie": 2001215787, "delta": 607006739}},
		{"default", 0, 0, vectorsDefault, map[string]uint64{
			"alpha": 949807204, "bravo": 961927581, "charlie": 1916644140, "delta": 466588371}},
		// Recipe1 named is the zero Recipe.
		{"recipe1-default", ring.Recipe1, 0, vectorsDefault, map[string]uint64{
			"alpha": 949807204, "bravo": 961927581, "charlie": 1916644140, "delta": 466588371}},
		{"recipe2-V16", ring.Recipe2, 16, vectors2V16, map[string]uint64{
			"alpha": 940722432, "bravo": 963571200, "charlie": 2004186880, "delta": 386486784}},
		{"recipe2-default", ring.Recipe2, 0, vectors2Default, map[string]uint64{
			"alpha": 957819392, "bravo": 936169728, "charlie": 1916798720, "delta": 484179456}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRing(t, vectorNodes, &ring.Config{Recipe: tt.recipe, VnodesPerWeight: tt.vpw})
			nv := newNaive(vectorNodes, tt.vpw, nil)
			if tt.recipe == ring.Recipe2 {
				nv = newNaive2(vectorNodes, tt.vpw, nil)
			}
			for _, v := range tt.vectors {
				if got := r.Position(v.key); got != v.position {
					t.Errorf("Position(%q) = %#08x, want %#08x", v.key, got, v.position)
				}
				if got := r.Lookup(v.key); got != v.owner {
					t.Errorf("Lookup(%q) = %q, want %q", v.key, got, v.owner)
				}
				if got := r.Replicas(v.key, 3); !slices.Equal(got, v.replicas[:]) {
					t.Errorf("Replicas(%q, 3) = %q, want %q", v.key, got, v.replicas)
				}
				if got := nv.replicas(v.key, 3); !slices.Equal(got, v.replicas[:]) {
					t.Errorf("the naive recipe gives Replicas(%q, 3) = %q, want %q", v.key, got, v.replicas)
				}
			}
			shares := r.Shares()
			for name, arc := range tt.arcs {
				if want := float64(arc) / (1 << 32); shares[name] != want {
					t.Errorf("share of %s = %v, want %v", name, shares[name], want)
				}
			}
		})
	}
}
