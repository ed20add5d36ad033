package main

import (
	"math"
	"math/rand/v2"
)

// zipfSampler draws ranks 1..n with probability proportional to 1/k^s for
// any exponent s > 0, by rejection-inversion (W. Hörmann and G. Derflinger,
// "Rejection-inversion to generate variates from monotone discrete
// distributions", 1996): it inverts the integral H of the continuous
// density h(x) = x^-s, and rejects the few draws that fall outside the
// area under the discrete distribution. math/rand/v2's Zipf uses the same
// method but requires s > 1. Setup and each draw take constant time,
// whatever n. Not safe for concurrent use (nor is its rand.Rand).
type zipfSampler struct {
	r        *rand.Rand
	n        float64
	s        float64
	hX1      float64 // H(1.5) - h(1): the lower end of the inverted range
	hN       float64 // H(n + 0.5): its upper end
	shortcut float64 // a draw within this distance below its rank is accepted at once
}

func newZipfSampler(r *rand.Rand, s float64, n uint64) *zipfSampler {
	z := &zipfSampler{r: r, n: float64(n), s: s}
	z.hX1 = z.bigH(1.5) - 1
	z.hN = z.bigH(z.n + 0.5)
	z.shortcut = 2 - z.bigHInv(z.bigH(2.5)-z.h(2))
	return z
}

// rank returns the next rank, from 1 to n.
func (z *zipfSampler) rank() uint64 {
	for {
		u := z.hN + z.r.Float64()*(z.hX1-z.hN)
		x := z.bigHInv(u)
		k := math.Max(1, math.Min(z.n, math.Floor(x+0.5)))
		if k-x <= z.shortcut || u >= z.bigH(k+0.5)-z.h(k) {
			return uint64(k)
		}
	}
}

// h is the density x^-s.
func (z *zipfSampler) h(x float64) float64 { return math.Exp(-z.s * math.Log(x)) }

// bigH is the integral of h from 1 to x, (x^(1-s) - 1) / (1-s), and log x
// at s = 1, computed without cancellation near s = 1.
func (z *zipfSampler) bigH(x float64) float64 {
	lx := math.Log(x)
	return expm1OverX((1-z.s)*lx) * lx
}

// bigHInv is the inverse of bigH.
func (z *zipfSampler) bigHInv(y float64) float64 {
	t := math.Max(-1, y*(1-z.s)) // rounding can put it just below -1
	return math.Exp(log1pOverX(t) * y)
}

// expm1OverX is (e^x - 1)/x, 1 at x = 0.
func expm1OverX(x float64) float64 {
	if math.Abs(x) < 1e-8 {
		return 1 + x/2
	}
	return math.Expm1(x) / x
}

// log1pOverX is log(1+x)/x, 1 at x = 0.
func log1pOverX(x float64) float64 {
	if math.Abs(x) < 1e-8 {
		return 1 - x/2
	}
	return math.Log1p(x) / x
}
