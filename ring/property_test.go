package ring_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redshard/redshard/ring"
)

var nameSchemes = []string{"shard-%d", "10.0.0.%d:6379", "cache-%03d.prod", "n%d", "%d"}

// randomNodes returns n nodes with distinct names and assorted weights,
// including 0 (which means 1) and weights small enough to round to 1 point.
func randomNodes(rng *rand.Rand, n int) []ring.Node {
	scheme := nameSchemes[rng.IntN(len(nameSchemes))]
	perm := rng.Perm(4 * n)
	nodes := make([]ring.Node, n)
	for i := range nodes {
		var w float64
		switch rng.IntN(4) {
		case 0:
			w = 0
		case 1:
			w = float64(1 + rng.IntN(4))
		case 2:
			w = rng.Float64() * 3
		case 3:
			w = rng.Float64() * 0.05
		}
		nodes[i] = ring.Node{Name: fmt.Sprintf(scheme, perm[i]), Weight: w}
	}
	return nodes
}

// coarseHash puts everything on 16 positions, so that ties abound.
func coarseHash(s string) uint64 {
	return (fnv(s) % 16) << 60
}

func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

func mustRing(t testing.TB, nodes []ring.Node, cfg *ring.Config) *ring.Ring {
	t.Helper()
	r, err := ring.New(nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	hashes := []struct {
		name string
		fn   func(string) uint64
	}{{"xxhash", nil}, {"coarse", coarseHash}, {"fnv", fnv}}
	for it := range 150 {
		h := hashes[it%len(hashes)]
		nodes := randomNodes(rng, 1+rng.IntN(12))
		v := 1 + rng.IntN(48)
		t.Run(fmt.Sprintf("%d-%s-%dnodes-V%d", it, h.name, len(nodes), v), func(t *testing.T) {
			r := mustRing(t, nodes, &ring.Config{VnodesPerWeight: v, Hash: h.fn})
			checkNaive(t, r, newNaive(nodes, v, h.fn), rng, 200)
		})
		t.Run(fmt.Sprintf("%d-recipe2-%s-%dnodes-V%d", it, h.name, len(nodes), v), func(t *testing.T) {
			r := mustRing(t, nodes, &ring.Config{Recipe: ring.Recipe2, VnodesPerWeight: v, Hash: h.fn})
			checkNaive(t, r, newNaive2(nodes, v, h.fn), rng, 200)
		})
	}
	// The default V, on a ring small enough for the naive scan.
	nodes := randomNodes(rng, 4)
	r := mustRing(t, nodes, nil)
	checkNaive(t, r, newNaive(nodes, 0, nil), rng, 100)
	r = mustRing(t, nodes, &ring.Config{Recipe: ring.Recipe2})
	checkNaive(t, r, newNaive2(nodes, 0, nil), rng, 100)
}

func checkNaive(t *testing.T, r *ring.Ring, nv *naive, rng *rand.Rand, keys int) {
	t.Helper()
	names := make([]string, r.Len())
	for i, n := range r.Nodes() {
		names[i] = n.Name
	}
	if !slices.Equal(names, nv.names) {
		t.Fatalf("Nodes = %q, want %q", names, nv.names)
	}
	for k := range keys {
		key := "k" + strconv.Itoa(rng.IntN(1e9))
		if k%5 == 0 {
			key = "{t" + strconv.Itoa(k) + "}" + key
		}
		if got, want := r.Lookup(key), nv.lookup(key); got != want {
			t.Fatalf("Lookup(%q) = %q, want %q", key, got, want)
		}
		for _, n := range []int{1, 2, 3, r.Len(), r.Len() + 1} {
			want := nv.replicas(key, n)
			if got := r.Replicas(key, n); !slices.Equal(got, want) {
				t.Fatalf("Replicas(%q, %d) = %q, want %q", key, n, got, want)
			}
			idx := r.ReplicaIndexes(key, []int{-7}, n)
			if idx[0] != -7 || len(idx) != len(want)+1 {
				t.Fatalf("ReplicaIndexes(%q, dst, %d) = %v: did not append", key, n, idx)
			}
			for i, j := range idx[1:] {
				if names[j] != want[i] {
					t.Fatalf("ReplicaIndexes(%q, %d) = %v, want %q", key, n, idx[1:], want)
				}
			}
		}
	}
	// Positions at, just before and just after every point and, under
	// Recipe2, every boundary (or, on big rings, of a sample: the naive
	// lookup is a linear scan).
	sample := make([]int, len(nv.pts))
	for i := range sample {
		sample[i] = i
	}
	if len(sample) > 2000 {
		sample = sample[:300]
		for i := range sample {
			sample[i] = rng.IntN(len(nv.pts))
		}
	}
	var ends []uint32
	for _, j := range sample {
		ends = append(ends, nv.pts[j].pos)
		if nv.bnd != nil {
			ends = append(ends, uint32(nv.bnd[j]))
		}
	}
	for _, end := range ends {
		for _, pos := range []uint32{end - 1, end, end + 1} {
			if got, want := r.OwnerIndexAt(pos), nv.ownerPoint(pos); names[got] != nv.pts[want].name {
				t.Fatalf("OwnerIndexAt(%d) = %q, want %q", pos, names[got], nv.pts[want].name)
			}
		}
	}
	if got, want := r.Shares(), nv.shares(); !equalShares(got, want) {
		t.Fatalf("Shares = %v, want %v", got, want)
	}
}

func equalShares(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// sameRing fails unless a and b place everything identically.
func sameRing(t *testing.T, a, b *ring.Ring) {
	t.Helper()
	if !slices.Equal(a.Nodes(), b.Nodes()) || a.VnodesPerWeight() != b.VnodesPerWeight() {
		t.Fatalf("nodes differ: %v vs %v", a.Nodes(), b.Nodes())
	}
	if d := ring.Diff(a, b); d != nil {
		t.Fatalf("Diff = %+v, want nil", d)
	}
	if !equalShares(a.Shares(), b.Shares()) {
		t.Fatal("Shares differ")
	}
	for k := range 500 {
		key := "key:" + strconv.Itoa(k)
		if x, y := a.Replicas(key, a.Len()), b.Replicas(key, b.Len()); !slices.Equal(x, y) {
			t.Fatalf("Replicas(%q) = %q vs %q", key, x, y)
		}
	}
}

func TestDeterministicRegardlessOfOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for it := range 20 {
		nodes := randomNodes(rng, 1+rng.IntN(20))
		cfg := &ring.Config{VnodesPerWeight: 1 + rng.IntN(200), Recipe: ring.Recipe1 + it%2}
		if it%4 == 0 {
			cfg.Hash = coarseHash
		}
		a := mustRing(t, nodes, cfg)
		shuffled := slices.Clone(nodes)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		sameRing(t, a, mustRing(t, shuffled, cfg))
	}
}

// TestWithEqualsNew: With gives the ring New gives, for growing, shrinking,
// re-weighting and renaming, across layout changes.
func TestWithEqualsNew(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for it := range 40 {
		cfg := &ring.Config{VnodesPerWeight: 1 + rng.IntN(300)}
		if it%5 == 0 {
			cfg.Hash = coarseHash
		}
		if it%3 == 0 {
			cfg.Recipe = ring.Recipe2
		}
		before := randomNodes(rng, 1+rng.IntN(40))
		after := mutate(rng, before)
		old := mustRing(t, before, cfg)
		got, err := old.With(after)
		if err != nil {
			t.Fatal(err)
		}
		sameRing(t, got, mustRing(t, after, cfg))
	}
}

// mutate adds, removes or re-weights a few nodes.
func mutate(rng *rand.Rand, nodes []ring.Node) []ring.Node {
	out := slices.Clone(nodes)
	for range 1 + rng.IntN(3) {
		switch rng.IntN(3) {
		case 0:
			out = append(out, ring.Node{Name: "new-" + strconv.Itoa(rng.IntN(1e6)), Weight: rng.Float64() * 4})
		case 1:
			if len(out) > 1 {
				i := rng.IntN(len(out))
				out = slices.Delete(out, i, i+1)
			}
		case 2:
			out[rng.IntN(len(out))].Weight = rng.Float64() * 4
		}
	}
	slices.SortFunc(out, func(a, b ring.Node) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b ring.Node) bool { return a.Name == b.Name })
}

// TestMinimalMovement: adding, removing or re-weighting one node moves keys
// only to or from that node, checked exactly with Diff and on keys.
func TestMinimalMovement(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for it := range 30 {
		nodes := randomNodes(rng, 2+rng.IntN(15))
		cfg := &ring.Config{VnodesPerWeight: 1 + rng.IntN(500), Recipe: ring.Recipe2 - it%2}
		i := rng.IntN(len(nodes))
		changed := slices.Clone(nodes)
		var name string
		switch it % 3 {
		case 0: // add
			name = "added"
			changed = append(changed, ring.Node{Name: name, Weight: rng.Float64() * 3})
		case 1: // remove
			name = nodes[i].Name
			changed = slices.Delete(changed, i, i+1)
		case 2: // re-weight
			name = nodes[i].Name
			changed[i].Weight = rng.Float64() * 3
		}
		a, b := mustRing(t, nodes, cfg), mustRing(t, changed, cfg)
		for _, m := range ring.Diff(a, b) {
			if m.From != name && m.To != name {
				t.Fatalf("case %d: %+v moves between two unchanged nodes (changed %q)", it, m, name)
			}
		}
		for k := range 2000 {
			key := "key:" + strconv.Itoa(k)
			if x, y := a.Lookup(key), b.Lookup(key); x != y && x != name && y != name {
				t.Fatalf("case %d: %q moved from %q to %q (changed %q)", it, key, x, y, name)
			}
		}
	}
}

func TestSharesSumToOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 50 {
		cfg := &ring.Config{VnodesPerWeight: 1 + rng.IntN(1000)}
		r := mustRing(t, randomNodes(rng, 1+rng.IntN(50)), cfg)
		sum := 0.0
		for _, s := range r.Shares() {
			if s < 0 || s > 1 {
				t.Fatalf("share %v out of [0, 1]", s)
			}
			sum += s
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Fatalf("shares sum to %v", sum)
		}
	}
}

// TestSharesMatchKeys: the share of the circle is the share of keys, within
// sampling error (5 standard deviations of a binomial count).
func TestSharesMatchKeys(t *testing.T) {
	const keys = 200_000
	rng := rand.New(rand.NewPCG(11, 12))
	for it := range 4 {
		r := mustRing(t, randomNodes(rng, 2+rng.IntN(8)), &ring.Config{VnodesPerWeight: 64, Recipe: ring.Recipe1 + it%2})
		counts := make([]int, r.Len())
		for k := range keys {
			counts[r.LookupIndex("key:"+strconv.Itoa(k))]++
		}
		shares := r.Shares()
		for i, n := range r.Nodes() {
			p := shares[n.Name]
			sd := math.Sqrt(keys * p * (1 - p))
			if d := math.Abs(float64(counts[i]) - keys*p); d > 5*sd+1 {
				t.Errorf("%s: %d keys, share %.4f expects %.0f ± %.0f", n.Name, counts[i], p, keys*p, sd)
			}
		}
	}
}

func TestReplicasProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for range 30 {
		cfg := &ring.Config{VnodesPerWeight: 1 + rng.IntN(100)}
		r := mustRing(t, randomNodes(rng, 1+rng.IntN(100)), cfg)
		for k := range 200 {
			key := "key:" + strconv.Itoa(k)
			n := rng.IntN(r.Len()+3) - 1
			got := r.Replicas(key, n)
			switch {
			case n <= 0:
				if got != nil {
					t.Fatalf("Replicas(%q, %d) = %q, want nil", key, n, got)
				}
				continue
			case len(got) != min(n, r.Len()):
				t.Fatalf("Replicas(%q, %d) has %d names on a %d-node ring", key, n, len(got), r.Len())
			case got[0] != r.Lookup(key):
				t.Fatalf("Replicas(%q, %d)[0] = %q, owner is %q", key, n, got[0], r.Lookup(key))
			}
			seen := map[string]bool{}
			for _, name := range got {
				if _, ok := r.Index(name); !ok || seen[name] {
					t.Fatalf("Replicas(%q, %d) = %q: unknown or repeated name", key, n, got)
				}
				seen[name] = true
			}
			// A longer list extends a shorter one.
			if more := r.Replicas(key, n+1); !slices.Equal(more[:len(got)], got) {
				t.Fatalf("Replicas(%q, %d) = %q is no prefix of Replicas(%d) = %q", key, n, got, n+1, more)
			}
		}
	}
}

func TestReplicaIndexesDoesNotAllocate(t *testing.T) {
	r := mustRing(t, shardNodes(100), nil)
	dst := make([]int, 0, 100)
	for _, n := range []int{1, 3, 8, 9, 100} {
		allocs := testing.AllocsPerRun(100, func() {
			dst = r.ReplicaIndexes("key:1", dst[:0], n)
		})
		if allocs != 0 {
			t.Errorf("ReplicaIndexes(n=%d) allocates %v times", n, allocs)
		}
	}
	for name, f := range map[string]func(){
		"LookupIndex":  func() { r.LookupIndex("{user}:42") },
		"Lookup":       func() { r.Lookup("key:42") },
		"OwnerIndexAt": func() { r.OwnerIndexAt(12345) },
	} {
		if allocs := testing.AllocsPerRun(100, f); allocs != 0 {
			t.Errorf("%s allocates %v times", name, allocs)
		}
	}
}

func TestHashTagColocation(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	r := mustRing(t, randomNodes(rng, 30), &ring.Config{VnodesPerWeight: 100})
	for u := range 1000 {
		tag := "user" + strconv.Itoa(u)
		owner := r.Lookup(tag)
		for _, key := range []string{"{" + tag + "}.a", "{" + tag + "}.b", "x{" + tag + "}y", "{" + tag + "}{other}"} {
			if got := r.Lookup(key); got != owner {
				t.Fatalf("Lookup(%q) = %q, Lookup(%q) = %q", key, got, tag, owner)
			}
			if got, want := r.Replicas(key, 3), r.Replicas(tag, 3); !slices.Equal(got, want) {
				t.Fatalf("Replicas(%q) = %q, want %q", key, got, want)
			}
		}
	}
}

// TestDiffAgreesWithLookups: a position's owner differs between two rings
// exactly when it lies in a Move with those owners.
func TestDiffAgreesWithLookups(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for it := range 40 {
		cfg := &ring.Config{VnodesPerWeight: 1 + rng.IntN(60), Recipe: ring.Recipe1 + it%2}
		if it%4 == 0 {
			cfg.Hash = coarseHash
		}
		nodes := randomNodes(rng, 1+rng.IntN(10))
		other := mutate(rng, nodes)
		if it%5 == 0 {
			other = randomNodes(rng, 1+rng.IntN(10)) // unrelated
		}
		cfgB := *cfg
		if it%3 == 0 {
			cfgB.Recipe = ring.Recipe1 + ring.Recipe2 - cfg.Recipe // from one recipe to the other
		}
		a, b := mustRing(t, nodes, cfg), mustRing(t, other, &cfgB)
		moves := ring.Diff(a, b)
		checkMoves(t, moves)

		// Probe the boundaries of every arc, and random positions.
		probes := []uint32{0, math.MaxUint32}
		for _, m := range moves {
			probes = append(probes, m.Start-1, m.Start, m.Start+1, m.End-1, m.End, m.End+1)
		}
		for range 3000 {
			probes = append(probes, rng.Uint32())
		}
		an, bn := a.Nodes(), b.Nodes()
		for _, pos := range probes {
			from, to := an[a.OwnerIndexAt(pos)].Name, bn[b.OwnerIndexAt(pos)].Name
			var in []ring.Move
			for _, m := range moves {
				if m.Contains(pos) {
					in = append(in, m)
				}
			}
			switch {
			case len(in) > 1:
				t.Fatalf("position %d in several moves: %+v", pos, in)
			case from == to && len(in) == 1:
				t.Fatalf("position %d stays on %q but lies in %+v", pos, from, in[0])
			case from != to && (len(in) == 0 || in[0].From != from || in[0].To != to):
				t.Fatalf("position %d moves %q -> %q, moves say %+v", pos, from, to, in)
			}
		}

		// Net flow per node is its change of share.
		flow := map[string]float64{}
		for pair, f := range ring.Summarize(moves) {
			flow[pair[0]] -= f
			flow[pair[1]] += f
		}
		sa, sb := a.Shares(), b.Shares()
		for _, n := range append(an, bn...) {
			if d := sb[n.Name] - sa[n.Name] - flow[n.Name]; math.Abs(d) > 1e-9 {
				t.Fatalf("%s: share %v -> %v but net flow %v", n.Name, sa[n.Name], sb[n.Name], flow[n.Name])
			}
		}
	}
}

// checkMoves checks the form of a Diff: circle order, no empty, overlapping
// or uncoalesced arcs, fractions that match the arcs.
func checkMoves(t *testing.T, moves []ring.Move) {
	t.Helper()
	total := 0.0
	for i, m := range moves {
		width := uint64(m.End - m.Start)
		if width == 0 {
			width = 1 << 32
		}
		if m.Fraction != float64(width)/(1<<32) {
			t.Fatalf("move %d %+v: Fraction does not match its arc", i, m)
		}
		if m.From == m.To {
			t.Fatalf("move %d %+v: From == To", i, m)
		}
		if i > 0 {
			p := moves[i-1]
			if p.End >= m.End {
				t.Fatalf("moves %d and %d out of circle order: %+v %+v", i-1, i, p, m)
			}
			if m.Start < p.End && m.Start < m.End {
				t.Fatalf("moves %d and %d overlap: %+v %+v", i-1, i, p, m)
			}
			if p.End == m.Start && p.From == m.From && p.To == m.To {
				t.Fatalf("moves %d and %d should be one: %+v %+v", i-1, i, p, m)
			}
		}
		total += m.Fraction
	}
	if n := len(moves) - 1; n > 0 && moves[n].End == moves[0].Start &&
		moves[n].From == moves[0].From && moves[n].To == moves[0].To {
		t.Fatalf("last and first moves should be one across the wrap: %+v %+v", moves[n], moves[0])
	}
	if total > 1+1e-12 {
		t.Fatalf("moves cover %v of the circle", total)
	}
}
