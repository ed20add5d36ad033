package localcache_test

import (
	"testing"

	"github.com/redshard/redshard/localcache"
)

// TestFillOutdatedHidesNewerTicket is the trace of issue 27's backwards
// reads at the cache's level: read A is sent under ticket t1, an
// invalidation arrives, read B is sent under t2 and served by the server
// before the write that A then sees. B's older reply is cached; A's newer
// one is refused (its ticket is outdated) but returned to its caller. From
// then on the cache must not answer B's reply: the caller who got A's
// value would read backwards.
func TestFillOutdatedHidesNewerTicket(t *testing.T) {
	c := newCache(t, nil)
	t1 := c.FillTicket(0, "k", "get")
	c.InvalidateKey("k")
	t2 := c.FillTicket(0, "k", "get")
	if !c.Fill(t2, "old", 3, hour) {
		t.Fatal("Fill under a current ticket refused")
	}
	c.Wait()
	if v, ok := c.Get(0, "k", "get"); !ok || v != "old" {
		t.Fatalf("Get after the fill = %v, %v; want old, true", v, ok)
	}
	if c.Fill(t1, "new", 3, hour) {
		t.Fatal("Fill under an outdated ticket cached its reply")
	}
	c.Wait()
	if v, ok := c.Get(0, "k", "get"); ok {
		t.Fatalf("Get after an outdated fill = %v: a reply older than one returned is still served", v)
	}
}

// TestFillOrdersFillsOfOneSubKey: of two reads of one sub-key sent under
// the same generations, the one filled second wins and the first, if it
// comes later, is refused and hides the second (either may be the newer:
// replies come on different connections). Another sub-key of the key, and
// another key, keep their replies.
func TestFillOrdersFillsOfOneSubKey(t *testing.T) {
	c := newCache(t, nil)
	if !c.Fill(c.FillTicket(0, "k", "strlen"), "3", 1, hour) || !c.Fill(c.FillTicket(0, "other", "get"), "x", 1, hour) {
		t.Fatal("Fill under a current ticket refused")
	}
	a, b := c.FillTicket(0, "k", "get"), c.FillTicket(0, "k", "get")
	if !c.Fill(b, "abcd", 4, hour) {
		t.Fatal("Fill under a current ticket refused")
	}
	c.Wait()
	if v, ok := c.Get(0, "k", "get"); !ok || v != "abcd" {
		t.Fatalf("Get = %v, %v; want abcd, true", v, ok)
	}
	if c.Fill(a, "abc", 3, hour) {
		t.Fatal("the second of two fills under one ticket cached its reply")
	}
	c.Wait()
	if v, ok := c.Get(0, "k", "get"); ok {
		t.Fatalf("Get after a refused fill = %v: the other fill's reply may be older", v)
	}
	if v, ok := c.Get(0, "k", "strlen"); !ok || v != "3" {
		t.Fatalf("another sub-key: Get = %v, %v; want 3, true", v, ok)
	}
	if v, ok := c.Get(0, "other", "get"); !ok || v != "x" {
		t.Fatalf("another key: Get = %v, %v; want x, true", v, ok)
	}
}

// TestSupersede: a reply read outside the cache hides every cached reply
// of its key, and makes a fill under a ticket taken before it refuse.
func TestSupersede(t *testing.T) {
	c := newCache(t, nil)
	if !c.Fill(c.FillTicket(0, "k", "get"), "old", 3, hour) || !c.Fill(c.FillTicket(0, "k", "strlen"), "3", 1, hour) {
		t.Fatal("Fill refused")
	}
	c.Wait()
	before := c.FillTicket(0, "k", "get")
	c.Supersede("k")
	for _, sub := range []string{"get", "strlen"} {
		if v, ok := c.Get(0, "k", sub); ok {
			t.Fatalf("Get %s after Supersede = %v", sub, v)
		}
	}
	if c.Fill(before, "older", 5, hour) {
		t.Fatal("Fill under a ticket taken before Supersede cached its reply")
	}
	if got := c.Stats().KeyInvalidations; got != 0 {
		t.Fatalf("KeyInvalidations = %d; Supersede is not an invalidation", got)
	}
}

// TestFillAbsorbing: a reply known to be newer than the absorbed bumps of
// its key's counter is cached despite them, under the counter as it is
// then, so that a later bump hides it; one bump more or fewer than
// counted refuses it, and so does a fill of the sub-key since the ticket.
func TestFillAbsorbing(t *testing.T) {
	c := newCache(t, nil)
	if !c.Fill(c.FillTicket(0, "k", "get"), "old", 3, hour) {
		t.Fatal("Fill under a current ticket refused")
	}
	c.Wait() // a second Set of a key still in ristretto's buffer is refused
	tk := c.FillTicket(0, "k", "get")
	c.InvalidateKey("k") // the write's invalidation, before the mark
	c.InvalidateKey("k") // the writer's own bump
	if !c.FillAbsorbing(tk, 2, "new", 3, hour) {
		t.Fatal("FillAbsorbing of exactly the bumps since the ticket refused")
	}
	c.Wait()
	if v, ok := c.Get(0, "k", "get"); !ok || v != "new" {
		t.Fatalf("Get after FillAbsorbing = %v, %v; want new, true", v, ok)
	}
	c.InvalidateKey("k") // a later write
	if v, ok := c.Get(0, "k", "get"); ok {
		t.Fatalf("Get after a bump that came after the fill = %v; want a miss", v)
	}

	for _, tc := range []struct {
		name    string
		bumps   int
		absorb  uint64
		between func()
	}{
		{"one bump not counted", 2, 1, nil},
		{"one bump counted that did not happen", 1, 2, nil},
		{"a Supersede since the ticket", 1, 1, func() { c.Supersede("k") }},
		{"a fill of the sub-key since the ticket", 1, 1, func() { c.Fill(c.FillTicket(0, "k", "get"), "x", 1, hour) }},
		{"a shard invalidation since the ticket", 1, 1, func() { c.InvalidateShard(0) }},
	} {
		if !c.Fill(c.FillTicket(0, "k", "get"), "cached", 6, hour) {
			t.Fatalf("%s: Fill under a current ticket refused", tc.name)
		}
		c.Wait()
		tk := c.FillTicket(0, "k", "get")
		for range tc.bumps {
			c.InvalidateKey("k")
		}
		if tc.between != nil {
			tc.between()
		}
		if c.FillAbsorbing(tk, tc.absorb, "refill", 6, hour) {
			t.Fatalf("%s: FillAbsorbing cached its reply", tc.name)
		}
		c.Wait()
		if v, ok := c.Get(0, "k", "get"); ok {
			t.Fatalf("%s: Get = %v; want a miss (a refused fill hides the sub-key)", tc.name, v)
		}
	}
}

// TestKeyStripeAndHolds: keys share a stripe exactly when an invalidation
// of one bumps the other's counter; Holds answers as Get would, without
// counting.
func TestKeyStripeAndHolds(t *testing.T) {
	c := newCache(t, &localcache.Config{MaxBytes: 1 << 20, KeyStripes: 2})
	if c.KeyStripe("a") != c.KeyStripe("a") {
		t.Fatal("KeyStripe is not a function of the key")
	}
	var same, other string
	for i := 0; same == "" || other == ""; i++ {
		k := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if c.KeyStripe(k) == c.KeyStripe("a") && k != "a" {
			same = k
		} else if c.KeyStripe(k) != c.KeyStripe("a") {
			other = k
		}
	}
	for _, k := range []string{"a", same, other} {
		if !c.Set(0, k, "get", k, 1, hour) { // Set moves no fill counter
			t.Fatalf("Set of %s refused", k)
		}
	}
	c.Wait()
	before := c.Stats()
	if c.Holds(1, "a", "get") || c.Holds(0, "a", "strlen") || !c.Holds(0, "a", "get") {
		t.Fatalf("Holds does not answer as Get: %v %v %v", c.Holds(1, "a", "get"), c.Holds(0, "a", "strlen"), c.Holds(0, "a", "get"))
	}
	if after := c.Stats(); after.Hits != before.Hits || after.Misses != before.Misses {
		t.Fatalf("Holds counted: %+v -> %+v", before, after)
	}
	c.InvalidateKey("a")
	if c.Holds(0, "a", "get") || c.Holds(0, same, "get") || !c.Holds(0, other, "get") {
		t.Fatal("an invalidation of a key did not hide exactly the keys of its stripe")
	}
}

// TestRefillRefusedHidesNothing: a Refill (a re-read no caller is given)
// refused because its ticket is outdated, by another fill of the sub-key
// or by a bump of the key it does not absorb, leaves the newer entry
// stored meanwhile visible, where a refused Fill hides it; and one whose
// ticket is current stores as FillAbsorbing does.
func TestRefillRefusedHidesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(c *localcache.Cache) // between the two tickets
	}{
		{"fill of the sub-key", func(*localcache.Cache) {}},
		{"bump of the key", func(c *localcache.Cache) { c.InvalidateKey("k") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, nil)
			old := c.FillTicket(0, "k", "get")
			tc.event(c)
			if !c.Refill(c.FillTicket(0, "k", "get"), 0, "new", 3, hour) {
				t.Fatal("Refill under a current ticket refused")
			}
			c.Wait()
			if c.Refill(old, 0, "old", 3, hour) {
				t.Fatal("Refill under an outdated ticket cached its reply")
			}
			c.Wait()
			if v, ok := c.Get(0, "k", "get"); !ok || v != "new" {
				t.Fatalf("Get after a refused Refill = %v, %v; want new, true", v, ok)
			}
			// The same with Fill hides the entry: its reply is returned.
			if c.Fill(old, "old", 3, hour) {
				t.Fatal("Fill under an outdated ticket cached its reply")
			}
			c.Wait()
			if v, ok := c.Get(0, "k", "get"); ok {
				t.Fatalf("Get after a refused Fill = %v; want a miss", v)
			}
		})
	}
	// Absorbed bumps count as in FillAbsorbing.
	c := newCache(t, nil)
	tk := c.FillTicket(0, "k", "get")
	c.InvalidateKey("k")
	c.InvalidateKey("k")
	if c.Refill(tk, 1, "v", 1, hour) {
		t.Fatal("Refill absorbing 1 of 2 bumps stored")
	}
	tk = c.FillTicket(0, "k", "get")
	c.InvalidateKey("k")
	if !c.Refill(tk, 1, "v", 1, hour) {
		t.Fatal("Refill absorbing its one bump refused")
	}
	c.Wait()
	if v, ok := c.Get(0, "k", "get"); !ok || v != "v" {
		t.Fatalf("Get = %v, %v; want v, true", v, ok)
	}
}
