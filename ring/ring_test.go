package ring_test

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/redshard/redshard/ring"
)

// numHash makes positions easy to work out by hand: "X#i" sits at X+1000*i
// and any other string at the number it spells (0 if it is not a number).
func numHash(s string) uint64 {
	var pos uint64
	if name, i, ok := strings.Cut(s, "#"); ok {
		x, _ := strconv.ParseUint(name, 10, 32)
		n, _ := strconv.ParseUint(i, 10, 32)
		pos = x + 1000*n
	} else {
		pos, _ = strconv.ParseUint(s, 10, 32)
	}
	return pos << 32
}

// handRing has points 100@100,1100; 200@200,1200; 300@300,1300,2300,3300.
func handRing(t *testing.T) *ring.Ring {
	t.Helper()
	r, err := ring.New([]ring.Node{{Name: "300", Weight: 2}, {Name: "100"}, {Name: "200", Weight: 1}},
		&ring.Config{VnodesPerWeight: 2, Hash: numHash})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLookupByHand(t *testing.T) {
	r := handRing(t)
	tests := []struct {
		key      string
		owner    string
		replicas []string
	}{
		{"0", "100", []string{"100", "200", "300"}},
		{"100", "100", []string{"100", "200", "300"}}, // a point owns its own position
		{"101", "200", []string{"200", "300", "100"}},
		{"250", "300", []string{"300", "100", "200"}},
		{"1150", "200", []string{"200", "300", "100"}},
		{"1300", "300", []string{"300", "100", "200"}},
		{"2000", "300", []string{"300", "100", "200"}}, // 300's points are adjacent
		{"3300", "300", []string{"300", "100", "200"}},
		{"3301", "100", []string{"100", "200", "300"}}, // past the last point: wrap
		{"4294967295", "100", []string{"100", "200", "300"}},
		{"x{1150}y", "200", []string{"200", "300", "100"}}, // hash tag
		{"{}1150", "100", []string{"100", "200", "300"}},   // empty tag: whole key, not a number
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := r.Lookup(tt.key); got != tt.owner {
				t.Errorf("Lookup = %q, want %q", got, tt.owner)
			}
			if got := r.Replicas(tt.key, 3); !slices.Equal(got, tt.replicas) {
				t.Errorf("Replicas(3) = %q, want %q", got, tt.replicas)
			}
			if got := r.Replicas(tt.key, 2); !slices.Equal(got, tt.replicas[:2]) {
				t.Errorf("Replicas(2) = %q, want %q", got, tt.replicas[:2])
			}
			i := r.LookupIndex(tt.key)
			if i < 0 || r.Nodes()[i].Name != tt.owner {
				t.Errorf("LookupIndex = %d, want the index of %q", i, tt.owner)
			}
			if got := r.OwnerIndexAt(r.Position(tt.key)); got != i {
				t.Errorf("OwnerIndexAt(Position) = %d, want %d", got, i)
			}
		})
	}
}

func TestSharesByHand(t *testing.T) {
	r := handRing(t)
	want := map[string]uint64{
		"100": 1<<32 - 3300 + 100 + 800, // (3300, 2^32) ∪ [0, 100] and (300, 1100]
		"200": 100 + 100,                // (100, 200] and (1100, 1200]
		"300": 100 + 100 + 1000 + 1000,  // (200, 300], (1200, 1300], (1300, 2300], (2300, 3300]
	}
	got := r.Shares()
	for name, arc := range want {
		if w := float64(arc) / (1 << 32); got[name] != w {
			t.Errorf("share of %s = %v, want %v", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("Shares has %d nodes, want %d", len(got), len(want))
	}
}

// Equal positions are ordered by node name: "0100" and "100" both spell
// 100, so "0100" owns position 100 and "100"'s point there owns nothing.
func TestTiesByHand(t *testing.T) {
	r, err := ring.New([]ring.Node{{Name: "100"}, {Name: "0100"}, {Name: "500"}},
		&ring.Config{VnodesPerWeight: 1, Hash: numHash})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Lookup("50"); got != "0100" {
		t.Errorf("Lookup(50) = %q, want 0100", got)
	}
	if got := r.Replicas("50", 3); !slices.Equal(got, []string{"0100", "100", "500"}) {
		t.Errorf("Replicas(50, 3) = %q", got)
	}
	sh := r.Shares()
	if sh["100"] != 0 || sh["0100"] != float64(1<<32-400)/(1<<32) || sh["500"] != 400.0/(1<<32) {
		t.Errorf("Shares = %v", sh)
	}
	// Every point at one position: the first by name owns the whole circle.
	one, err := ring.New([]ring.Node{{Name: "b"}, {Name: "a"}}, &ring.Config{Hash: func(string) uint64 { return 7 << 32 }})
	if err != nil {
		t.Fatal(err)
	}
	if sh := one.Shares(); sh["a"] != 1 || sh["b"] != 0 {
		t.Errorf("Shares with one position = %v", sh)
	}
	if got := one.Replicas("k", 5); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Replicas with one position = %q", got)
	}
}

func TestDiffByHand(t *testing.T) {
	from := handRing(t)
	// Adding 150 (points 150@150, 1150) takes (100, 150] from 200 and (1100, 1150] from 200.
	to, err := ring.New([]ring.Node{{Name: "100"}, {Name: "150", Weight: 0.5}, {Name: "200"}, {Name: "300", Weight: 2}},
		&ring.Config{VnodesPerWeight: 4, Hash: numHash})
	if err != nil {
		t.Fatal(err)
	}
	from4, _ := ring.New(from.Nodes(), &ring.Config{VnodesPerWeight: 4, Hash: numHash})
	got := ring.Diff(from4, to)
	want := []ring.Move{
		{Start: 100, End: 150, From: "200", To: "150", Fraction: 50.0 / (1 << 32)},
		{Start: 1100, End: 1150, From: "200", To: "150", Fraction: 50.0 / (1 << 32)},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Diff = %+v, want %+v", got, want)
	}
	if sum := ring.Summarize(got); len(sum) != 1 || sum[[2]string{"200", "150"}] != 100.0/(1<<32) {
		t.Errorf("Summarize = %v", sum)
	}
	if d := ring.Diff(from, from); d != nil {
		t.Errorf("Diff(r, r) = %+v, want nil", d)
	}

	// Renaming the only node moves the whole circle: Start == End.
	a, _ := ring.New([]ring.Node{{Name: "100"}}, &ring.Config{VnodesPerWeight: 1, Hash: numHash})
	b, _ := ring.New([]ring.Node{{Name: "0100"}}, &ring.Config{VnodesPerWeight: 1, Hash: numHash})
	if got, want := ring.Diff(a, b), []ring.Move{{Start: 100, End: 100, From: "100", To: "0100", Fraction: 1}}; !slices.Equal(got, want) {
		t.Errorf("Diff of renamed single node = %+v, want %+v", got, want)
	}

	// A move across the wrap point is one arc with End < Start.
	c, _ := ring.New([]ring.Node{{Name: "100"}, {Name: "500"}}, &ring.Config{VnodesPerWeight: 1, Hash: numHash})
	d, _ := ring.New([]ring.Node{{Name: "100"}, {Name: "500"}, {Name: "50"}}, &ring.Config{VnodesPerWeight: 1, Hash: numHash})
	want = []ring.Move{{Start: 500, End: 50, From: "100", To: "50", Fraction: float64(1<<32-500+50) / (1 << 32)}}
	if got := ring.Diff(c, d); !slices.Equal(got, want) {
		t.Errorf("Diff across the wrap = %+v, want %+v", got, want)
	}
	if got := ring.Diff(d, c); len(got) != 1 || got[0].Start != 500 || got[0].End != 50 || got[0].From != "50" {
		t.Errorf("reverse Diff across the wrap = %+v", got)
	}
}

func TestMoveContains(t *testing.T) {
	tests := []struct {
		m    ring.Move
		pos  uint32
		want bool
	}{
		{ring.Move{Start: 10, End: 20}, 10, false},
		{ring.Move{Start: 10, End: 20}, 11, true},
		{ring.Move{Start: 10, End: 20}, 20, true},
		{ring.Move{Start: 10, End: 20}, 21, false},
		{ring.Move{Start: 20, End: 10}, 0, true},
		{ring.Move{Start: 20, End: 10}, math.MaxUint32, true},
		{ring.Move{Start: 20, End: 10}, 15, false},
		{ring.Move{Start: 20, End: 10}, 20, false},
		{ring.Move{Start: 5, End: 5, Fraction: 1}, 5, true},
		{ring.Move{Start: 5, End: 5, Fraction: 1}, 123456, true},
		{ring.Move{}, 0, false},
		{ring.Move{}, 1, false},
	}
	for _, tt := range tests {
		if got := tt.m.Contains(tt.pos); got != tt.want {
			t.Errorf("(%d, %d].Contains(%d) = %v, want %v", tt.m.Start, tt.m.End, tt.pos, got, tt.want)
		}
	}
}

func TestHashTag(t *testing.T) {
	tests := []struct{ key, want string }{
		{"", ""},
		{"plain", "plain"},
		{"{user1}.a", "user1"},
		{"x{user1}y", "user1"},
		{"{}", "{}"},
		{"{}x", "{}x"},
		{"x{}", "x{}"},
		{"{}{a}", "{}{a}"}, // the first '{' is followed at once by '}': whole key
		{"{a}{b}", "a"},
		{"{a{b}", "a{b"},
		{"{", "{"},
		{"}{a}", "a"},
		{"{x", "{x"},
		{"x}", "x}"},
	}
	for _, tt := range tests {
		if got := ring.HashTag(tt.key); got != tt.want {
			t.Errorf("HashTag(%q) = %q, want %q", tt.key, got, tt.want)
		}
		if got := naiveTag(tt.key); got != tt.want {
			t.Errorf("naiveTag(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		nodes []ring.Node
		cfg   *ring.Config
		want  error
	}{
		{"nil list", nil, nil, ring.ErrNoNodes},
		{"empty list", []ring.Node{}, nil, ring.ErrNoNodes},
		{"empty name", []ring.Node{{Name: "a"}, {Name: ""}}, nil, ring.ErrEmptyName},
		{"duplicate name", []ring.Node{{Name: "a"}, {Name: "b"}, {Name: "a", Weight: 2}}, nil, ring.ErrDuplicateName},
		{"negative weight", []ring.Node{{Name: "a", Weight: -1}}, nil, ring.ErrInvalidWeight},
		{"NaN weight", []ring.Node{{Name: "a", Weight: math.NaN()}}, nil, ring.ErrInvalidWeight},
		{"+Inf weight", []ring.Node{{Name: "a", Weight: math.Inf(1)}}, nil, ring.ErrInvalidWeight},
		{"-Inf weight", []ring.Node{{Name: "a", Weight: math.Inf(-1)}}, nil, ring.ErrInvalidWeight},
		{"negative vnodes", []ring.Node{{Name: "a"}}, &ring.Config{VnodesPerWeight: -1}, ring.ErrInvalidVnodes},
		{"unknown recipe", []ring.Node{{Name: "a"}}, &ring.Config{Recipe: 3}, ring.ErrInvalidRecipe},
		{"negative recipe", []ring.Node{{Name: "a"}}, &ring.Config{Recipe: -1}, ring.ErrInvalidRecipe},
		{"absurd weight", []ring.Node{{Name: "a", Weight: 1e12}}, nil, ring.ErrTooManyPoints},
		{"largest weight", []ring.Node{{Name: "a", Weight: math.MaxFloat64}}, nil, ring.ErrTooManyPoints},
		{"absurd vnodes", []ring.Node{{Name: "a"}}, &ring.Config{VnodesPerWeight: math.MaxInt}, ring.ErrTooManyPoints},
		{"too many in sum", []ring.Node{{Name: "a", Weight: 5000}, {Name: "b", Weight: 5000}}, nil, ring.ErrTooManyPoints},
	}
	sentinels := []error{ring.ErrNoNodes, ring.ErrEmptyName, ring.ErrDuplicateName, ring.ErrInvalidWeight, ring.ErrInvalidVnodes, ring.ErrInvalidRecipe, ring.ErrTooManyPoints}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ring.New(tt.nodes, tt.cfg)
			if r != nil || !errors.Is(err, tt.want) {
				t.Fatalf("New = %v, %v; want nil, %v", r, err, tt.want)
			}
			for _, s := range sentinels {
				if s != tt.want && errors.Is(err, s) {
					t.Errorf("error %v also matches %v", err, s)
				}
			}
			if !strings.HasPrefix(err.Error(), "ring: ") {
				t.Errorf("error %q lacks the ring: prefix", err)
			}
			// With reports the same errors.
			base, _ := ring.New([]ring.Node{{Name: "z"}}, nil)
			if tt.cfg == nil {
				if _, err := base.With(tt.nodes); !errors.Is(err, tt.want) {
					t.Errorf("With: %v, want %v", err, tt.want)
				}
			}
		})
	}
	// The context names the node.
	_, err := ring.New([]ring.Node{{Name: "cache-b", Weight: -2}}, nil)
	if !strings.Contains(err.Error(), `"cache-b"`) {
		t.Errorf("error %q does not name the node", err)
	}
}

func TestAccessors(t *testing.T) {
	r, err := ring.New([]ring.Node{{Name: "b", Weight: 2}, {Name: "a"}, {Name: "B", Weight: 0.5}}, &ring.Config{VnodesPerWeight: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []ring.Node{{Name: "B", Weight: 0.5}, {Name: "a", Weight: 1}, {Name: "b", Weight: 2}}
	if got := r.Nodes(); !slices.Equal(got, want) {
		t.Errorf("Nodes = %v, want %v", got, want)
	}
	r.Nodes()[0].Name = "changed"
	if r.Nodes()[0].Name != "B" {
		t.Error("Nodes does not return a copy")
	}
	if r.Len() != 3 || r.VnodesPerWeight() != 10 {
		t.Errorf("Len, VnodesPerWeight = %d, %d", r.Len(), r.VnodesPerWeight())
	}
	for i, n := range want {
		if j, ok := r.Index(n.Name); !ok || j != i {
			t.Errorf("Index(%q) = %d, %v; want %d, true", n.Name, j, ok, i)
		}
	}
	if j, ok := r.Index("c"); ok || j != -1 {
		t.Errorf("Index(c) = %d, %v", j, ok)
	}
	d, _ := ring.New([]ring.Node{{Name: "x"}}, nil)
	if d.VnodesPerWeight() != ring.DefaultVnodesPerWeight || d.Recipe() != ring.Recipe1 {
		t.Errorf("default VnodesPerWeight, Recipe = %d, %d", d.VnodesPerWeight(), d.Recipe())
	}
	d2, _ := ring.New([]ring.Node{{Name: "x"}}, &ring.Config{Recipe: ring.Recipe2})
	if d2.VnodesPerWeight() != ring.DefaultVnodesPerWeight2 || d2.Recipe() != ring.Recipe2 {
		t.Errorf("Recipe2: default VnodesPerWeight, Recipe = %d, %d", d2.VnodesPerWeight(), d2.Recipe())
	}
	if w, _ := d2.With([]ring.Node{{Name: "x"}, {Name: "y"}}); w.Recipe() != ring.Recipe2 || w.VnodesPerWeight() != ring.DefaultVnodesPerWeight2 {
		t.Errorf("With on a Recipe2 ring: Recipe, VnodesPerWeight = %d, %d", w.Recipe(), w.VnodesPerWeight())
	}
}

// A nil or zero Ring is empty and never panics.
func TestEmptyRing(t *testing.T) {
	for name, r := range map[string]*ring.Ring{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			if r.Lookup("k") != "" || r.LookupIndex("k") != -1 || r.OwnerIndexAt(5) != -1 {
				t.Error("lookups on an empty ring found an owner")
			}
			if r.Replicas("k", 3) != nil || r.ReplicaIndexes("k", nil, 3) != nil {
				t.Error("replicas on an empty ring")
			}
			if r.Len() != 0 || r.Nodes() != nil || len(r.Shares()) != 0 {
				t.Error("an empty ring has nodes")
			}
			if _, ok := r.Index("k"); ok {
				t.Error("Index found a node")
			}
			if r.Position("k") != uint32(xxhash.Sum64String("k")>>32) {
				t.Error("Position of an empty ring is not the default hash")
			}
			if ring.Diff(r, r) != nil {
				t.Error("Diff of empty rings")
			}
			full, _ := ring.New([]ring.Node{{Name: "a"}}, &ring.Config{VnodesPerWeight: 3})
			if d := ring.Diff(r, full); len(d) != 1 || d[0].From != "" || d[0].To != "a" || d[0].Fraction != 1 {
				t.Errorf("Diff(empty, full) = %+v", d)
			}
			if d := ring.Diff(full, r); len(d) != 1 || d[0].From != "a" || d[0].To != "" || d[0].Fraction != 1 {
				t.Errorf("Diff(full, empty) = %+v", d)
			}
			w, err := r.With([]ring.Node{{Name: "a"}})
			if err != nil || w.Lookup("k") != "a" || w.VnodesPerWeight() != ring.DefaultVnodesPerWeight {
				t.Errorf("With on an empty ring = %v, %v", w, err)
			}
		})
	}
}
