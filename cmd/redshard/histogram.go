package main

import (
	"math"
	"math/bits"
	"time"
)

// Latency histogram: log-linear buckets over nanoseconds, as in HDR
// histograms. Values below 2^subBits ns have a bucket each; above, every
// power of two is cut into 2^(subBits-1) equal buckets, so a bucket's
// width is at most 1/64 of its lower bound (1.6% relative error), and the
// memory is fixed whatever the number of operations.
const (
	subBits     = 7
	subHalf     = 1 << (subBits - 1)         // 64 buckets per power of two
	maxLatency  = int64(1) << 40             // ~18 minutes; larger values are clamped
	histBuckets = (40-subBits+2)*subHalf + 1 // bucketOf(maxLatency) + 1
)

// histogram counts latencies. It is not safe for concurrent use: each
// worker keeps its own and they are merged at the end.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    float64 // ns, for the mean
	max    int64
}

func bucketOf(v int64) int {
	if v < 1<<subBits {
		return int(max(v, 0))
	}
	v = min(v, maxLatency)
	e := bits.Len64(uint64(v)) - subBits // >= 1
	return (e+1)*subHalf + int(v>>e) - subHalf
}

// bucketBounds returns the smallest and largest value of bucket i.
func bucketBounds(i int) (lo, hi int64) {
	if i < 1<<subBits {
		return int64(i), int64(i)
	}
	e := i/subHalf - 1
	m := int64(i%subHalf + subHalf)
	return m << e, (m+1)<<e - 1
}

func (h *histogram) record(d time.Duration) {
	v := int64(d)
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += float64(v)
	h.max = max(h.max, v)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile returns the upper bound of the bucket holding the q-quantile
// (0 < q <= 1): an overestimate by at most the bucket width.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := bucketBounds(i)
			return time.Duration(min(hi, h.max))
		}
	}
	return time.Duration(h.max)
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}
