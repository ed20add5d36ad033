package hotkey_test

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redshard/redshard/hotkey"
)

// TestZipfTop50 measures precision and recall of Top(50) against the exact
// top 50 of a Zipf(1.1) stream over a million keys. The truth uses the same
// exponential decay as the detector, computed exactly from the fake clock.
func TestZipfTop50(t *testing.T) {
	const distinct = 1_000_000
	const window = 10 * time.Second
	tau := window.Seconds() / 2
	n := 5_000_000
	if testing.Short() || raceEnabled {
		n = 1_000_000
	}
	tests := []struct {
		name string
		span time.Duration // clock time the whole stream takes
	}{
		{"clock stopped", 0},
		{"stream spans a window", window},
	}
	keys := make([]string, distinct)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			d := mustNew(t, &hotkey.Config{Window: window, Now: clk.Now})
			z := rand.NewZipf(rand.New(rand.NewPCG(2026, 1)), 1.1, 1, distinct-1)
			step := tt.span / time.Duration(n)
			weight := make([]float64, distinct)
			var elapsed time.Duration
			for range n {
				v := z.Uint64()
				if keys[v] == "" {
					keys[v] = "key:" + strconv.FormatUint(v, 10)
				}
				d.Observe(keys[v])
				weight[v] += math.Exp(elapsed.Seconds() / tau)
				clk.Advance(step)
				elapsed += step
			}

			var seen []int
			for v, w := range weight {
				if w > 0 {
					seen = append(seen, v)
				}
			}
			slices.SortFunc(seen, func(a, b int) int { return cmp.Compare(weight[b], weight[a]) })
			truth := make(map[string]bool, 50)
			for _, v := range seen[:50] {
				truth[keys[v]] = true
			}

			top := d.Top(50)
			hits := 0
			for _, k := range top {
				if truth[k.Key] {
					hits++
				}
			}
			precision := float64(hits) / float64(len(top))
			recall := float64(hits) / 50
			// Relative error of the estimated rate of the true top key.
			trueTop := weight[seen[0]] * math.Exp(-elapsed.Seconds()/tau) / tau
			t.Logf("%d observations, %d distinct: precision %.3f, recall %.3f; top key %s rate %.1f (exact %.1f)",
				n, len(seen), precision, recall, top[0].Key, top[0].Rate, trueTop)
			if precision < 0.95 || recall < 0.95 {
				t.Fatalf("precision %.3f, recall %.3f; want >= 0.95 each", precision, recall)
			}
		})
	}
}

// TestObservationsUntilHot measures how many observations pass between a new
// key starting to take a share of a steady Zipf(1.1) stream and IsHot
// reporting it, and checks it against the model in the package
// documentation: tau×ln(1/(1-MinShare/p)) plus one refresh period.
func TestObservationsUntilHot(t *testing.T) {
	const window = time.Second
	const step = 10 * time.Microsecond // 100k observations/s
	tau := window.Seconds() / 2
	perWindow := int(window / step)
	tests := []struct {
		name  string
		share float64
	}{
		{"20% of traffic", 0.20},
		{"5% of traffic", 0.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			d := mustNew(t, &hotkey.Config{Window: window, Now: clk.Now})
			z := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, 1_000_000-1)
			keys := map[uint64]string{}
			background := func() {
				v := z.Uint64()
				k, ok := keys[v]
				if !ok {
					k = "key:" + strconv.FormatUint(v, 10)
					keys[v] = k
				}
				d.Observe(k)
			}
			for range 2 * perWindow { // reach a steady total first
				clk.Advance(step)
				background()
			}
			if d.IsHot("new") {
				t.Fatal("new key hot before it appears")
			}
			model := tau*math.Log(1/(1-hotkey.DefaultMinShare/tt.share)) + window.Seconds()/100
			bound := int(1.5*model/step.Seconds()) + 32*16
			var acc float64
			n := 0
			for !d.IsHot("new") {
				if n > 4*bound {
					t.Fatalf("not hot after %d observations", n)
				}
				clk.Advance(step)
				if acc += tt.share; acc >= 1 {
					acc--
					d.Observe("new")
				} else {
					background()
				}
				n++
			}
			t.Logf("hot after %d observations (%d of the key, %.1f ms of a 100k/s stream); model %.0f, bound %d",
				n, int(float64(n)*tt.share), float64(n)*step.Seconds()*1000, model/step.Seconds(), bound)
			if n > bound {
				t.Fatalf("hot after %d observations, want <= %d", n, bound)
			}
		})
	}
}
