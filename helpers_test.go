package redshard_test

import (
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/redshard/redshard"
)

// cluster is a set of miniredis shards and a redshard client over them.
type cluster struct {
	c      *redshard.Client
	mini   map[string]*miniredis.Miniredis // by shard name
	shards []redshard.Shard
}

// newCluster starts one miniredis per weight and a client over them,
// closed at the end of the test.
func newCluster(t testing.TB, weights ...float64) *cluster {
	t.Helper()
	cl := &cluster{mini: map[string]*miniredis.Miniredis{}}
	for i, w := range weights {
		m := miniredis.RunT(t)
		name := fmt.Sprintf("shard-%d", i)
		cl.mini[name] = m
		cl.shards = append(cl.shards, redshard.Shard{Name: name, Addr: m.Addr(), Weight: w})
	}
	c, err := redshard.NewClient(&redshard.Options{Shards: cl.shards})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cl.c = c
	return cl
}

// keysOn returns n keys (prefix:0, prefix:1, ...) owned by the named shard.
func (cl *cluster) keysOn(t testing.TB, shard, prefix string, n int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n; i++ {
		if i > 100000 {
			t.Fatalf("no key with prefix %q maps to %s", prefix, shard)
		}
		k := fmt.Sprintf("%s:%d", prefix, i)
		if name, _ := cl.c.ShardFor(k); name == shard {
			out = append(out, k)
		}
	}
	return out
}

// twoShardKeys returns two keys owned by different shards.
func (cl *cluster) twoShardKeys(t testing.TB) (string, string) {
	t.Helper()
	a := cl.keysOn(t, "shard-0", "a", 1)[0]
	b := cl.keysOn(t, "shard-1", "b", 1)[0]
	return a, b
}
