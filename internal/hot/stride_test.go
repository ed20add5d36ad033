package hot

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/command"
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

// TestUnhotHitsNotCountedByAdmit: a key that is not hot, read once and so
// cached, is then answered from the cache by single reads and by
// pipelines alike, and those hits are not counted by the admission sketch:
// the sketch still has the key read once (ReadAgain false), which it would
// not if each hit counted. The detector sees the hits, four at a time.
func TestUnhotHitsNotCountedByAdmit(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h, b, admin := newTestPathDetector(t, &hotkey.Config{Window: 10 * time.Second, Now: func() time.Time { return now }})
	ctx := context.Background()
	cacheKey(t, h, b, "probe") // the shard tracks, its invalidation connection live
	if err := admin.Set(ctx, "once", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := get(t, h, b, "once"); err != nil || v != "v" {
		t.Fatalf("first GET: %q, %v", v, err)
	}
	if !h.cache.Holds(b.HotState().id, "once", getSubKey) {
		t.Fatal("the first read of a key did not cache its reply (the cache has room)")
	}
	if h.cache.ReadAgain("once") {
		t.Fatal("the sketch has a key read once as read again")
	}
	gets := commandCount(t, admin, "get")
	for i := range 4 {
		if v, err := get(t, h, b, "once"); err != nil || v != "v" {
			t.Fatalf("GET %d: %q, %v", i, v, err)
		}
		p := h.Pipeline(testTopology{b})
		cmd := redis.NewStringCmd(ctx, "get", "once")
		info, keys, err := command.Lookup(cmd.Args(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Answer(info, cmd, keys, nil) || cmd.Val() != "v" {
			t.Fatalf("pipeline GET %d: answered %q, %v; want a hit", i, cmd.Val(), cmd.Err())
		}
	}
	if h.cache.ReadAgain("once") {
		t.Error("8 cache hits were counted by the admission sketch")
	}
	if n := commandCount(t, admin, "get") - gets; n != 0 {
		t.Errorf("the server ran %d GETs for 8 cached reads; want 0", n)
	}
	if h.det.IsHot("once") {
		t.Error("once is hot after 9 reads")
	}
	var rate float64
	for _, k := range h.det.Top(10) {
		if k.Key == "once" {
			rate = k.Rate
		}
	}
	if want := (1.0 + 8) / 5; rate != want { // 1 miss + 8 hits, over Window/2
		t.Errorf("the detector's rate of once = %v; want %v (every read counted)", rate, want)
	}
}
