// Package hotkey finds hot keys in a stream of key observations as they
// happen, in bounded memory and with an O(1), allocation-free Observe.
//
// # Algorithm
//
// The detector is a sharded, weighted Filtered Space-Saving summary with
// exponential (forward) decay.
//
// Keys are spread by their 64-bit xxhash over S lock stripes (S is a power of
// two up to 32, with at least 64 counters each when Capacity allows), each
// holding m = Capacity/S counters. A stripe runs Space-Saving (Metwally,
// Agrawal and El Abbadi, 2005) on its part of the stream, with the filter of
// Filtered Space-Saving (Homem and Carvalho, 2010) in front: a tracked key's
// counter grows by the observation's weight; an untracked key adds its weight
// to one of 8m filter counters (chosen by hash) until that counter reaches
// the smallest tracked count; then the key takes over the smallest counter,
// inheriting the filter counter as its error, and the evicted key's count is
// folded into its own filter counter. Most observations of rare keys thus
// stop at the filter. Counters sit in a 4-ary min-heap indexed by an
// open-addressing table, so an observation costs one hash, one uncontended
// lock and O(1) expected work (O(log m) worst case), and no allocation.
//
// Decay is forward decay (Cormode, Shkapenyuk, Srivastava and Xu, 2009): an
// observation at time t weighs exp(t/tau) with tau = Window/2, so a counter
// times exp(-now/tau) is the exponentially decayed count at any time now,
// without touching every counter as time passes. Weights are renormalized
// when they grow large; this scales all counts alike and keeps their order.
// Decaying with time constant Window/2 gives counted observations the same
// mean age as a sliding window of length Window. A key's rate is its decayed
// count divided by tau; for a key at a steady rate r it converges to r.
//
// # Error bound
//
// Let W_s be a stripe's total decayed traffic and mu its smallest tracked
// count. A filter counter never exceeds mu, so each observation raises the
// sum of the tracked counts by at most its own weight: that sum is at most
// W_s, and mu <= W_s/m. Every tracked count is an upper bound whose error is
// the filter counter it inherited (at most mu), and every filter counter is
// an upper bound of each of its untracked keys. Hence, for every key, at any
// time:
//
//	true decayed count <= estimate <= true decayed count + W_s/m
//
// and every key whose true decayed count exceeds W_s/m is tracked. With
// traffic spread evenly over the stripes (W_s ≈ W/S), the overestimate is at
// most a 1/Capacity share of the detector's traffic W: 0.024% with the
// default Capacity, far below the default MinShare of 1%. A stripe holding a
// very heavy key has W_s above W/S, but that key's own weight only counts
// against the m-1 other counters: mu <= (W_s - heavy)/(m-1).
//
// The clock is read once every 16 observations of a stripe, so an
// observation may be charged as up to 16 stripe observations older than it
// is: for a key at rate r, a relative weight error of at most 16/(r×tau)
// (3% for a key at the default MinRate and Window).
//
// ObserveHot is Observe and IsHot in one call, for a caller that asks both of
// every key (a client's hot path). A key already in the hot set is counted
// on a counter of its own, with one atomic add and no lock, and every 16
// such observations go into its stripe together: the stripe of the hottest
// key, which every goroutine would otherwise lock, is locked 16 times less
// often, at the cost of up to 15 of the key's observations being late.
//
// # Hot keys, hysteresis and latency
//
// A key turns hot when its guaranteed count (estimate minus error, so
// Space-Saving's overestimate never makes a key hot) reaches both MinRate
// (as a rate) and MinShare of the total. It stays hot until it falls below
// Hysteresis (default 1/2) times either threshold, so a key whose rate
// wobbles around a threshold does not flap.
//
// The hot set is an immutable map published through an atomic pointer, so
// IsHot is one atomic load and one map lookup. It is recomputed in O(Capacity)
// by the Observe call that finds it due: once per Window/100 of clock time,
// and whenever one stripe has seen max(4×Capacity, 1024) observations since
// the last refresh (which matters only for a stopped or very coarse clock);
// Top recomputes it too. No goroutine is involved, so with no traffic at all
// IsHot keeps its last answer.
//
// A new key that suddenly takes a share p of a steady stream turns hot after
// about tau×ln(1/(1-MinShare/p)) (if its rate is above MinRate by then), plus
// at most one refresh period: for p = 20% and the defaults, about 0.26s +
// 0.1s, i.e. some 3.6% of a Window's worth of observations. A hot key whose
// traffic stops loses its status once its decayed count falls below the
// lower thresholds: after tau×ln(c/(Hysteresis×threshold)), where c is its
// count when it stopped. A key at 20% share of a stream that goes on cools
// down after about 1.8 Windows.
package hotkey
