package hotkey

import (
	"math"
	"sync"
)

const (
	// clockEvery is how many observations a shard counts between clock
	// readings. Reading the clock costs about as much as the rest of
	// Observe; reading it every 16th time makes it cheap, and the time an
	// observation is charged at is then late by at most 16 observations
	// of its shard (16/r seconds for a key at rate r).
	clockEvery = 16

	// renormAt is the exponent at which forward-decay weights are scaled
	// back to 1 (e^40 ≈ 2.4e17 leaves float64 plenty of range).
	renormAt = 40

	maxShards   = 32 // lock stripes; each Observe takes one of them
	minPerShard = 64 // counters per shard below which striping stops
)

// shard is one lock stripe: a summary of the keys whose hash falls in it
// and the shard's forward-decay clock.
//
// Forward decay: an observation at time t adds exp((t-land)/tau) instead of
// 1, so that count×exp((land-now)/tau) is the exponentially decayed count
// at any later time now. Counts never need to be decayed one by one; only
// when the weight grows large are they all scaled down and land moved.
type shard struct {
	mu sync.Mutex // guards all fields below

	sum   summary
	land  int64   // landmark, ns since the detector's base time
	last  int64   // latest clock reading, ns since base (monotonic per shard)
	w     float64 // weight of an observation at last: exp((last-land)/tau)
	tick  int     // observations since the clock was last read
	since int     // observations since the last hot-set refresh, counted at clock readings

	_ [64]byte // keep the next shard's mutex off this shard's cache lines
}

func (s *shard) init(capacity int, t int64) {
	s.sum = newSummary(capacity)
	s.restart(t)
}

// restart forgets every count; the next observation reads the clock.
func (s *shard) restart(t int64) {
	s.sum.reset()
	s.land, s.last, s.w, s.tick, s.since = t, t, 1, clockEvery-1, 0
}

// advance moves the shard's clock to t (never backwards) and recomputes
// the observation weight, renormalizing the counts when it grows large.
func (s *shard) advance(t int64, tauNs float64) {
	if t < s.last {
		t = s.last
	}
	s.last = t
	x := float64(t-s.land) / tauNs
	if x > renormAt {
		s.sum.scale(math.Exp(-x))
		s.land, x = t, 0
	}
	s.w = math.Exp(x)
}

// decay returns the factor converting this shard's counts into decayed
// counts at time t.
func (s *shard) decay(t int64, tauNs float64) float64 {
	return math.Exp(float64(s.land-t) / tauNs)
}

// shardCount returns the number of shards for capacity: a power of two, at
// most maxShards, each with at least minPerShard counters when possible.
func shardCount(capacity int) int {
	n := 1
	for n < maxShards && capacity/(2*n) >= minPerShard {
		n *= 2
	}
	return n
}
