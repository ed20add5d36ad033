package localcache_test

import (
	"testing"
	"time"

	"github.com/redshard/redshard/localcache"
)

// TestFrontIndex: a hit found in ristretto moves to the front index, and
// an entry there is still refused once invalidated, expired, replaced, or
// the cache closed, exactly as one in ristretto.
func TestFrontIndex(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	fill := func(t *testing.T) *localcache.Cache {
		t.Helper()
		c, err := localcache.New(&localcache.Config{Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if !c.Set(1, "k", "get", "v1", 2, time.Second) {
			t.Fatal("Set refused")
		}
		c.Wait()
		if v, ok := c.Get(1, "k", "get"); !ok || v != "v1" {
			t.Fatalf("Get = %v, %v; want v1", v, ok)
		}
		if !c.FrontHolds(1, "k", "get") {
			t.Fatal("a hit did not reach the front index")
		}
		return c
	}
	t.Run("invalidated", func(t *testing.T) {
		c := fill(t)
		c.InvalidateKey("k")
		if v, ok := c.Get(1, "k", "get"); ok {
			t.Fatalf("Get after InvalidateKey = %v, want a miss", v)
		}
	})
	t.Run("shard invalidated", func(t *testing.T) {
		c := fill(t)
		c.InvalidateShard(1)
		if v, ok := c.Get(1, "k", "get"); ok {
			t.Fatalf("Get after InvalidateShard = %v, want a miss", v)
		}
	})
	t.Run("expired", func(t *testing.T) {
		c := fill(t)
		defer func(t0 time.Time) { now = t0 }(now)
		now = now.Add(time.Second)
		if v, ok := c.Get(1, "k", "get"); ok {
			t.Fatalf("Get after the TTL = %v, want a miss", v)
		}
	})
	t.Run("replaced", func(t *testing.T) {
		c := fill(t)
		if !c.Set(1, "k", "get", "v2", 2, time.Second) {
			t.Fatal("Set refused")
		}
		if v, ok := c.Get(1, "k", "get"); !ok || v != "v2" {
			t.Fatalf("Get after a replacing Set = %v, %v; want v2", v, ok)
		}
	})
	t.Run("other sub-key", func(t *testing.T) {
		c := fill(t)
		if v, ok := c.Get(1, "k", "strlen"); ok {
			t.Fatalf("Get of another sub-key = %v, want a miss", v)
		}
		if v, ok := c.Get(2, "k", "get"); ok {
			t.Fatalf("Get on another shard = %v, want a miss", v)
		}
	})
	t.Run("closed", func(t *testing.T) {
		c := fill(t)
		c.Close()
		if v, ok := c.Get(1, "k", "get"); ok {
			t.Fatalf("Get after Close = %v, want a miss", v)
		}
	})
}

// TestSmallFillVisibleAtOnce: a small entry a Fill accepted is found by the
// next Get without Wait (the front index holds it before ristretto's
// goroutine applies it), which is what lets a miss's filler return without
// a round trip through that goroutine; a large one is not promised.
func TestSmallFillVisibleAtOnce(t *testing.T) {
	c, err := localcache.New(nil) // 64 MiB: entries up to 4 KiB are small
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 200 {
		key := string(rune('a'+i%26)) + string(rune('0'+i/26))
		if !c.VisibleAtOnce(key, "get", 10) {
			t.Fatalf("a 10-byte reply of %s is not visible at once", key)
		}
		tk := c.FillTicket(1, key, "get")
		if !c.Fill(tk, "v", 10, time.Minute) {
			t.Fatalf("Fill of %s refused", key)
		}
		if v, ok := c.Get(1, key, "get"); !ok || v != "v" {
			t.Fatalf("Get(%s) right after its Fill = %v, %v; want v", key, v, ok)
		}
	}
	if c.VisibleAtOnce("k", "get", 1<<16) {
		t.Fatal("a 64 KiB reply is said to be visible at once")
	}
}

// TestRecent: Recent answers what a store just made visible, from the front
// index alone, with Get's checks, counting a hit but not a miss; a reply
// too large for the front index is left to Get.
func TestRecent(t *testing.T) {
	c := newCache(t, nil)
	if v, ok := c.Recent(1, "k", "get"); ok {
		t.Fatalf("Recent on an empty cache = %v; want a miss", v)
	}
	if !c.Set(1, "k", "get", "v1", 2, hour) {
		t.Fatal("Set refused")
	}
	if v, ok := c.Recent(1, "k", "get"); !ok || v != "v1" {
		t.Fatalf("Recent after Set = %v, %v; want v1", v, ok)
	}
	if v, ok := c.Recent(2, "k", "get"); ok {
		t.Fatalf("Recent of another shard = %v; want a miss", v)
	}
	if got := c.Stats(); got.Hits != 1 || got.Misses != 0 {
		t.Errorf("Stats hits %d, misses %d; want 1 and 0 (a miss of Recent is not counted)", got.Hits, got.Misses)
	}
	c.InvalidateKey("k")
	if v, ok := c.Recent(1, "k", "get"); ok {
		t.Fatalf("Recent after InvalidateKey = %v; want a miss", v)
	}
	big := int64(1 << 13) // beyond the default MaxBytes/frontShare
	if c.VisibleAtOnce("b", "get", big) {
		t.Fatalf("a %d-byte reply is visible at once", big)
	}
	if !c.Set(1, "b", "get", "big", big, hour) {
		t.Fatal("Set of the large reply refused")
	}
	c.Wait()
	if _, ok := c.Get(1, "b", "get"); !ok {
		t.Fatal("Get misses the large reply after Wait")
	}
	if v, ok := c.Recent(1, "b", "get"); ok {
		t.Fatalf("Recent of a reply too large for the front index = %v; want a miss", v)
	}
}

// TestGetCounted: GetCounted numbers the returns of a reply from 1; Get
// does not count, a miss returns 0, and a new reply of the triple starts
// again.
func TestGetCounted(t *testing.T) {
	c := newCache(t, nil)
	if _, n, ok := c.GetCounted(1, "k", "get"); ok || n != 0 {
		t.Fatalf("GetCounted on an empty cache = %d, %v; want 0, false", n, ok)
	}
	c.Set(1, "k", "get", "v1", 2, hour)
	c.Wait()
	for want := uint32(1); want <= 3; want++ {
		if v, n, ok := c.GetCounted(1, "k", "get"); !ok || v != "v1" || n != want {
			t.Fatalf("GetCounted = %v, %d, %v; want v1, %d, true", v, n, ok, want)
		}
		c.Get(1, "k", "get")
	}
	c.Set(1, "k", "get", "v2", 2, hour)
	if v, n, ok := c.GetCounted(1, "k", "get"); !ok || v != "v2" || n != 1 {
		t.Fatalf("GetCounted of a new reply = %v, %d, %v; want v2, 1, true", v, n, ok)
	}
}
