package redshard_test

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/conformance"
)

// TestDropInConformance runs the same calls through a plain go-redis client
// on one miniredis and through redshard on four, and expects identical
// results.
func TestDropInConformance(t *testing.T) {
	single := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer single.Close()
	cl := newCluster(t, 1, 1, 2, 1)
	steps := conformance.Steps()
	if len(steps) < 100 {
		t.Fatalf("conformance table has %d calls, want at least 100", len(steps))
	}
	for _, st := range steps {
		want := st.Run(ctx, single)
		got := st.Run(ctx, cl.c)
		if got != want {
			t.Errorf("%s:\n  single server: %s\n  redshard:      %s", st.Name, want, got)
		}
	}
	t.Logf("%d calls compared", len(steps))
}
