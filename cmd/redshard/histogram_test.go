package main

import (
	"testing"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	prevHi := int64(-1)
	for i := 0; i < histBuckets-1; i++ {
		lo, hi := bucketBounds(i)
		if lo != prevHi+1 || hi < lo {
			t.Fatalf("bucket %d = [%d, %d], previous ended at %d", i, lo, hi, prevHi)
		}
		if i >= 1<<subBits && float64(hi-lo+1) > float64(lo)/subHalf {
			t.Fatalf("bucket %d = [%d, %d] is wider than 1/%d of its start", i, lo, hi, subHalf)
		}
		for _, v := range []int64{lo, hi, (lo + hi) / 2} {
			if b := bucketOf(v); b != i {
				t.Fatalf("bucketOf(%d) = %d, want %d", v, b, i)
			}
		}
		prevHi = hi
	}
	if lo, _ := bucketBounds(histBuckets - 1); lo != prevHi+1 || lo != maxLatency {
		t.Errorf("last bucket starts at %d, want %d", lo, maxLatency)
	}
	if b := bucketOf(maxLatency * 4); b != histBuckets-1 {
		t.Errorf("bucketOf(huge) = %d, want the last bucket %d", b, histBuckets-1)
	}
}

func TestQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	var o histogram
	o.record(time.Second)
	h.merge(&o)
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Second}} {
		got := h.quantile(tc.q)
		if got < tc.want || float64(got) > float64(tc.want)*(1+1.0/subHalf) {
			t.Errorf("quantile(%v) = %v, want %v within one bucket", tc.q, got, tc.want)
		}
	}
	if h.n != 1001 || h.max != int64(time.Second) {
		t.Errorf("n %d max %d", h.n, h.max)
	}
}
