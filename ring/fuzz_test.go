package ring_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/redshard/redshard/ring"
)

// FuzzRing builds rings from arbitrary names, weights and VnodesPerWeight:
// New never panics, returns a ring or one of its sentinel errors, and the
// ring agrees with the naive recipe and keeps its invariants.
func FuzzRing(f *testing.F) {
	f.Add("a,b,c", []byte{0, 1, 2}, int16(16), "key", false)
	f.Add("a,a", []byte{1, 1}, int16(0), "{x}y", false)
	f.Add(",x", []byte{}, int16(-1), "", true)
	f.Add("n1,n2,n3,n4", []byte{255, 254, 253, 3}, int16(7), "{}", true)
	f.Add("日本,\x00,{a}", []byte{9, 200, 100}, int16(3), "{a}{b}", false)
	f.Fuzz(func(t *testing.T, names string, weights []byte, vpw int16, key string, coarse bool) {
		var nodes []ring.Node
		if names != "" {
			for i, name := range strings.Split(names, ",") {
				var w byte
				if i < len(weights) {
					w = weights[i]
				}
				nodes = append(nodes, ring.Node{Name: name, Weight: fuzzWeight(w)})
			}
		}
		// Keep rings small unless the case is meant to fail on size.
		v := int(vpw) % 64
		if vpw == math.MaxInt16 {
			v = math.MaxInt
		}
		cfg := &ring.Config{VnodesPerWeight: v}
		if coarse {
			cfg.Hash = coarseHash
		}
		if vpw%2 != 0 {
			cfg.Recipe = ring.Recipe2
		}
		r, err := ring.New(nodes, cfg)
		if err != nil {
			for _, s := range []error{ring.ErrNoNodes, ring.ErrEmptyName, ring.ErrDuplicateName,
				ring.ErrInvalidWeight, ring.ErrInvalidVnodes, ring.ErrInvalidRecipe, ring.ErrTooManyPoints} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("New: unexpected error %v", err)
		}
		if r.Len() != len(nodes) {
			t.Fatalf("Len = %d, want %d", r.Len(), len(nodes))
		}
		nv := newNaive(nodes, r.VnodesPerWeight(), cfg.Hash)
		if cfg.Recipe == ring.Recipe2 {
			nv = newNaive2(nodes, r.VnodesPerWeight(), cfg.Hash)
		}
		if got, want := r.Lookup(key), nv.lookup(key); got != want {
			t.Fatalf("Lookup(%q) = %q, want %q", key, got, want)
		}
		if i, ok := r.Index(r.Lookup(key)); !ok || i != r.LookupIndex(key) {
			t.Fatalf("Index(Lookup) = %d, %v; LookupIndex = %d", i, ok, r.LookupIndex(key))
		}
		for _, n := range []int{-1, 0, 1, 2, len(nodes), len(nodes) + 5} {
			if got, want := r.Replicas(key, n), nv.replicas(key, n); !slices.Equal(got, want) {
				t.Fatalf("Replicas(%q, %d) = %q, want %q", key, n, got, want)
			}
		}
		sum := 0.0
		for _, s := range r.Shares() {
			sum += s
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Fatalf("shares sum to %v", sum)
		}
		// Dropping the first node moves only its keys, and With agrees with New.
		if len(nodes) > 1 {
			rest := nodes[1:]
			w, err := r.With(rest)
			if err != nil {
				t.Fatalf("With: %v", err)
			}
			n, err := ring.New(rest, cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if !equalShares(w.Shares(), n.Shares()) || w.Lookup(key) != n.Lookup(key) {
				t.Fatal("With and New differ")
			}
			for _, m := range ring.Diff(r, n) {
				if m.From != nodes[0].Name {
					t.Fatalf("removing %q moved %+v", nodes[0].Name, m)
				}
			}
		}
	})
}

// fuzzWeight maps a byte to a weight, hitting the special values.
func fuzzWeight(b byte) float64 {
	switch b {
	case 255:
		return math.NaN()
	case 254:
		return math.Inf(1)
	case 253:
		return math.Inf(-1)
	case 252:
		return -1
	case 251:
		return 1e12
	case 250:
		return math.MaxFloat64
	case 249:
		return math.SmallestNonzeroFloat64
	}
	return float64(b) / 16
}
