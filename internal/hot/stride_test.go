package hot

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redshard/redshard/hotkey"
)

// TestCachedHitsCountedFourAtATime: the cache hits of a key that is not hot
// reach the detector hitStride (4) at a time, at weight 4, and reach no
// server; the detector's rate of the key moves only at every fourth hit,
// and by four reads' worth.
func TestCachedHitsCountedFourAtATime(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const window = 10 * time.Second // one read adds 1/(window/2) = 0.2/s to the rate
	h, b, admin := newTestPathDetector(t, &hotkey.Config{Window: window, Now: func() time.Time { return now }})
	ctx := context.Background()
	if err := admin.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cacheKey(t, h, b, "k")
	if h.det.IsHot("k") {
		t.Fatal("k is hot after a few reads; the test needs it not hot")
	}
	rate := func() float64 {
		for _, k := range h.det.Top(10) {
			if k.Key == "k" {
				return k.Rate
			}
		}
		return 0
	}
	gets, hits := commandCount(t, admin, "get"), h.stats.hits.Load()
	r0 := rate()
	for i := 1; i <= 8; i++ {
		if v, err := get(t, h, b, "k"); err != nil || v != "v" {
			t.Fatalf("GET %d: %q, %v", i, v, err)
		}
		want := r0 + float64(i/hitStride*hitStride)/window.Seconds()*2
		if r := rate(); math.Abs(r-want) > 1e-9 {
			t.Fatalf("after %d hits the rate of k is %v; want %v", i, r, want)
		}
	}
	if n := h.stats.hits.Load() - hits; n != 8 {
		t.Errorf("%d hits counted; want 8", n)
	}
	if n := commandCount(t, admin, "get") - gets; n != 0 {
		t.Errorf("the server ran %d GETs for 8 cached reads; want 0", n)
	}
}
