package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestZipfSamplerMatchesTheory: the ranks drawn follow 1/k^s, below,
// at and above s = 1, by a chi-squared test of the first ranks and the
// rest together against the exact probabilities. The seed is fixed, so
// the outcome is too; the bound is far above what a right sampler gives
// (the 99.99% quantile of chi-squared with 11 degrees of freedom is 35).
func TestZipfSamplerMatchesTheory(t *testing.T) {
	const draws = 200_000
	for _, tc := range []struct {
		s float64
		n uint64
	}{{0.5, 1000}, {0.99, 100_000}, {1, 50}, {1.2, 1000}, {2, 12}, {1e-9, 20}} {
		norm := 0.0
		for k := uint64(1); k <= tc.n; k++ {
			norm += math.Pow(float64(k), -tc.s)
		}
		const head = 11 // ranks 1..11 apart (or all of them), the rest in one bin
		bins := make([]float64, head+1)
		z := newZipfSampler(rand.New(rand.NewPCG(1, 2)), tc.s, tc.n)
		for range draws {
			k := z.rank()
			if k < 1 || k > tc.n {
				t.Fatalf("s=%g n=%d: rank %d out of range", tc.s, tc.n, k)
			}
			bins[min(k, head+1)-1]++
		}
		chi2 := 0.0
		rest := 1.0
		for i := range bins {
			var p float64
			if i < head {
				p = math.Pow(float64(i+1), -tc.s) / norm
				rest -= p
			} else {
				p = math.Max(rest, 0)
			}
			want := p * draws
			if want == 0 {
				if bins[i] != 0 {
					t.Errorf("s=%g n=%d: %g draws in bin %d, which has probability 0", tc.s, tc.n, bins[i], i+1)
				}
				continue
			}
			chi2 += (bins[i] - want) * (bins[i] - want) / want
		}
		if chi2 > 35 {
			t.Errorf("s=%g n=%d: chi-squared %.1f over %d bins: the draws do not follow 1/k^s (counts %v)", tc.s, tc.n, chi2, len(bins), bins)
		}
	}
}

// TestZipfWorkloadBelowOne: --zipf-s accepts exponents at or below 1
// (rand.Zipf draws only above 1), and such a workload chooses every key
// index in range, the first (rank 1) most often.
func TestZipfWorkloadBelowOne(t *testing.T) {
	for _, s := range []float64{0.99, 1} {
		w := workload{kind: "zipf", zipfS: s, keys: 1000, readRatio: 1, concurrency: 1}
		if err := w.check(true); err != nil {
			t.Fatalf("--zipf-s %g: %v", s, err)
		}
		g := w.generator(0)
		counts := make([]int, w.keys)
		for range 100_000 {
			k, _ := g.next()
			if k < 0 || k >= w.keys {
				t.Fatalf("--zipf-s %g: key index %d", s, k)
			}
			counts[k]++
		}
		for i, n := range counts[1:] {
			if n >= counts[0] {
				t.Errorf("--zipf-s %g: key %d drawn %d times, key 0 (rank 1) %d", s, i+1, n, counts[0])
			}
		}
	}
}
