package ring_test

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/redshard/redshard/ring"
)

// The balance goals, on a million distinct keys and the default Config.
// They are deterministic for given names; each runs on a second naming
// scheme too, so that passing is not luck of the names.

const balanceKeys = 1_000_000

var millionKeys = sync.OnceValue(func() []string {
	keys := make([]string, balanceKeys)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	return keys
})

func namedNodes(scheme string, weights ...float64) []ring.Node {
	nodes := make([]ring.Node, len(weights))
	for i, w := range weights {
		nodes[i] = ring.Node{Name: fmt.Sprintf(scheme, i), Weight: w}
	}
	return nodes
}

func ones(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

// owners returns the owner index of every key.
func owners(r *ring.Ring) []int {
	out := make([]int, balanceKeys)
	for i, k := range millionKeys() {
		out[i] = r.LookupIndex(k)
	}
	return out
}

func counts(r *ring.Ring, own []int) []int {
	c := make([]int, r.Len())
	for _, o := range own {
		c[o]++
	}
	return c
}

func TestBalanceEqualWeights(t *testing.T) {
	tests := []struct {
		shards int
		scheme string
		limit  float64
	}{
		{10, "shard-%d", 1.03},
		{10, "10.0.0.%d:6379", 1.03},
		{10, "cache-%03d.prod", 1.03},
		{100, "shard-%d", 1.10},
		{100, "10.0.0.%d:6379", 1.10},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%s", tt.shards, tt.scheme), func(t *testing.T) {
			r := mustRing(t, namedNodes(tt.scheme, ones(tt.shards)...), nil)
			c := counts(r, owners(r))
			mean := float64(balanceKeys) / float64(tt.shards)
			hot := float64(slices.Max(c)) / mean
			exact := 0.0
			for _, s := range r.Shares() {
				exact = max(exact, s*float64(tt.shards))
			}
			t.Logf("%d shards %q: hottest/mean %.4f by keys, %.4f by Shares (goal <= %.2f)",
				tt.shards, tt.scheme, hot, exact, tt.limit)
			if hot > tt.limit {
				t.Errorf("hottest shard / mean = %.4f, goal <= %.2f", hot, tt.limit)
			}
		})
	}
}

func TestBalanceWeighted(t *testing.T) {
	weights := []float64{1, 1, 2, 4}
	for _, scheme := range []string{"shard-%d", "10.0.0.%d:6379"} {
		t.Run(scheme, func(t *testing.T) {
			r := mustRing(t, namedNodes(scheme, weights...), nil)
			c := counts(r, owners(r))
			shares := r.Shares()
			worstKeys, worstShare := 0.0, 0.0
			for i, n := range r.Nodes() {
				want := n.Weight / 8
				worstKeys = max(worstKeys, math.Abs(float64(c[i])/balanceKeys-want)/want)
				worstShare = max(worstShare, math.Abs(shares[n.Name]-want)/want)
			}
			t.Logf("weights 1,1,2,4 %q: worst relative error %.2f%% by keys, %.2f%% by Shares (goal <= 5%%)",
				scheme, 100*worstKeys, 100*worstShare)
			if worstKeys > 0.05 || worstShare > 0.05 {
				t.Errorf("worst relative error %.4f by keys, %.4f by Shares; goal <= 0.05", worstKeys, worstShare)
			}
		})
	}
}

func TestBalanceAddShard(t *testing.T) {
	for _, scheme := range []string{"shard-%d", "10.0.0.%d:6379"} {
		t.Run(scheme, func(t *testing.T) {
			before := mustRing(t, namedNodes(scheme, ones(10)...), nil)
			after := mustRing(t, namedNodes(scheme, ones(11)...), nil)
			added := fmt.Sprintf(scheme, 10)
			ob, oa := owners(before), owners(after)
			bn, an := before.Nodes(), after.Nodes()
			moved := 0
			for i := range ob {
				if from, to := bn[ob[i]].Name, an[oa[i]].Name; from != to {
					if to != added {
						t.Fatalf("key %q moved from %q to %q, not to the new shard", millionKeys()[i], from, to)
					}
					moved++
				}
			}
			frac := float64(moved) / balanceKeys
			ideal := 1.0 / 11
			t.Logf("add 1 shard to 10 %q: %.4f of keys moved, all onto the new shard; its weight share %.4f (off by %.2f%%), its exact share %.4f",
				scheme, frac, ideal, 100*math.Abs(frac-ideal)/ideal, after.Shares()[added])
			if math.Abs(frac-ideal) > 0.1*ideal {
				t.Errorf("%.4f of keys moved, want within 10%% of %.4f", frac, ideal)
			}
		})
	}
}

func TestBalanceRemoveShard(t *testing.T) {
	for _, scheme := range []string{"shard-%d", "10.0.0.%d:6379"} {
		t.Run(scheme, func(t *testing.T) {
			nodes := namedNodes(scheme, ones(10)...)
			removed := nodes[3].Name
			before := mustRing(t, nodes, nil)
			after := mustRing(t, slices.Delete(slices.Clone(nodes), 3, 4), nil)
			ob, oa := owners(before), owners(after)
			bn, an := before.Nodes(), after.Nodes()
			moved := 0
			for i := range ob {
				if from, to := bn[ob[i]].Name, an[oa[i]].Name; from != to {
					if from != removed {
						t.Fatalf("key %q moved from %q to %q, not from the removed shard", millionKeys()[i], from, to)
					}
					moved++
				} else if from == removed {
					t.Fatalf("key %q stayed on the removed shard", millionKeys()[i])
				}
			}
			t.Logf("remove 1 shard of 10 %q: %.4f of keys moved, all from the removed shard", scheme, float64(moved)/balanceKeys)
		})
	}
}
