package localcache_test

import (
	"testing"
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
