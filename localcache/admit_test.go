package localcache_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/redshard/redshard/localcache"
)

// TestAdmitSecondRead: a key is admitted from its second read on, not at
// its first; a nil Cache admits nothing.
func TestAdmitSecondRead(t *testing.T) {
	c := newCache(t, &localcache.Config{MaxBytes: 1 << 20})
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		if c.Admit(k) {
			t.Fatalf("Admit(%q) at its first read = true", k)
		}
		if !c.Admit(k) {
			t.Fatalf("Admit(%q) at its second read = false", k)
		}
	}
	var nilCache *localcache.Cache
	if nilCache.Admit("k") || nilCache.Admit("k") {
		t.Fatal("a nil Cache admitted a key")
	}
}

// TestAdmitTailOnce: of many keys read once each (a skewed workload's
// tail), almost none is admitted at its read: the sketch's collisions
// stay rare.
func TestAdmitTailOnce(t *testing.T) {
	c := newCache(t, &localcache.Config{MaxBytes: 1 << 20, NumCounters: 1 << 16})
	admitted := 0
	const n = 20000
	for i := range n {
		if c.Admit(fmt.Sprintf("tail:%d", i)) {
			admitted++
		}
	}
	if admitted > n/50 {
		t.Fatalf("%d of %d keys read once were admitted", admitted, n)
	}
}

// TestAdmitAges: the sketch halves its counts once per NumCounters reads,
// so a key read once long ago counts for nothing and is not admitted at
// its next read.
func TestAdmitAges(t *testing.T) {
	c := newCache(t, &localcache.Config{MaxBytes: 1 << 20, NumCounters: 4096})
	c.Admit("old")
	c.Age()
	if c.Admit("old") {
		t.Fatal("a key read once before a halving was admitted at its next read")
	}
	if !c.Admit("old") {
		t.Fatal("a key read twice since the halving was not admitted")
	}
	before := c.Halvings()
	for i := range 4096 {
		c.Admit(fmt.Sprintf("other:%d", i))
	}
	if c.Halvings() == before {
		t.Fatal("4096 reads (NumCounters) did not halve the sketch")
	}
}

// TestAdmitConcurrent: Admit from many goroutines at once (for the race
// detector), and a key read by all of them is admitted.
func TestAdmitConcurrent(t *testing.T) {
	c := newCache(t, &localcache.Config{MaxBytes: 1 << 20, NumCounters: 4096})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				c.Admit(fmt.Sprintf("g%d:%d", g, i))
				c.Admit("shared")
			}
		})
	}
	wg.Wait()
	if !c.Admit("shared") {
		t.Fatal("a key read 16000 times was not admitted")
	}
}

// TestAdmittedFillsStayWithinMaxBytes: filling the cache with every key
// Admit lets in, far more than MaxBytes holds, keeps the budget in use
// within MaxBytes, and the cache still holds entries.
func TestAdmittedFillsStayWithinMaxBytes(t *testing.T) {
	const maxBytes = 64 << 10
	c := newCache(t, &localcache.Config{MaxBytes: maxBytes, NumCounters: 1 << 16})
	val := make([]byte, 100)
	filled := 0
	for round := range 2 {
		for i := range 5000 {
			k := fmt.Sprintf("key:%d", i)
			if !c.Admit(k) {
				if round == 1 {
					t.Fatalf("%q not admitted at its second read", k)
				}
				continue
			}
			if c.Fill(c.FillTicket(0, k, "get"), string(val), int64(len(val)), hour) {
				filled++
			}
		}
	}
	c.Wait()
	st := c.Stats()
	if filled*(100+localcache.EntryOverhead) <= maxBytes {
		t.Fatalf("only %d fills: the test does not overflow the budget", filled)
	}
	if st.Bytes > maxBytes || st.Bytes <= 0 {
		t.Fatalf("Bytes = %d after %d fills; want in (0, %d]", st.Bytes, filled, maxBytes)
	}
	held := 0
	for i := range 5000 {
		if _, ok := c.Get(0, fmt.Sprintf("key:%d", i), "get"); ok {
			held++
		}
	}
	if held == 0 || held*(100+localcache.EntryOverhead) > maxBytes {
		t.Fatalf("%d entries of %d bytes held; want some, within %d bytes", held, 100+localcache.EntryOverhead, maxBytes)
	}
}
