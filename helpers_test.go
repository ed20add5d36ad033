package redshard_test

import (
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/redshardtest"
)

// cluster is a set of miniredis shards and a redshard client over them.
type cluster struct {
	c      *redshard.Client
	mini   map[string]*miniredis.Miniredis // by shard name
	shards []redshard.Shard
}

// newCluster starts one miniredis per weight and a client over them,
// closed at the end of the test (redshardtest.NewCluster).
func newCluster(t testing.TB, weights ...float64) *cluster {
	t.Helper()
	rc := redshardtest.NewCluster(t, nil, weights...)
	cl := &cluster{c: rc.Client, mini: map[string]*miniredis.Miniredis{}, shards: rc.Shards}
	for i, s := range rc.Shards {
		cl.mini[s.Name] = rc.Servers[i].Miniredis
	}
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
