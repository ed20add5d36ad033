package localcache_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/redshard/redshard/localcache"
)

// fillUp fills c with entries until less than 1/32 of its budget is free,
// and makes Admit see it.
func fillUp(t *testing.T, c *localcache.Cache) {
	t.Helper()
	val := string(make([]byte, 100))
	for i := 0; ; i++ {
		if i%64 == 0 {
			c.Wait()
			if st := c.Stats(); st.MaxBytes-st.Bytes < st.MaxBytes/32 {
				break
			}
		}
		if i > 1<<20 {
			t.Fatalf("%d entries did not fill the cache: %+v", i, c.Stats())
		}
		c.Set(7, fmt.Sprint("fill:", i), "get", val, int64(len(val)), hour)
	}
	c.LookAtRoom()
}

// TestAdmitFirstReadWhileRoom: while the cache has room, a key is admitted
// at its first read; once it is full (Admit looks at its fill now and
// then), only from its second read. A nil Cache admits nothing.
func TestAdmitFirstReadWhileRoom(t *testing.T) {
	c := newCache(t, &localcache.Config{MaxBytes: 64 << 10})
	for i := range 100 {
		if k := fmt.Sprintf("room:%d", i); !c.Admit(k) {
			t.Fatalf("Admit(%q) at its first read into an empty cache = false", k)
		}
	}
	fillUp(t, c)
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		if c.Admit(k) {
			t.Fatalf("Admit(%q) at its first read into a full cache = true", k)
		}
		if !c.Admit(k) {
			t.Fatalf("Admit(%q) at its second read = false", k)
		}
	}
	// Room again (the entries were invalidated and expired, say): after
	// Admit's next look, first reads are admitted again.
	c.Clear()
	c.LookAtRoom()
	if !c.Admit("again") {
		t.Fatal("a first read was not admitted once the cache had room again")
	}
	var nilCache *localcache.Cache
	if nilCache.Admit("k") || nilCache.Admit("k") {
		t.Fatal("a nil Cache admitted a key")
	}
}

// TestAdmitLooksAtRoom: Admit finds out by itself, within a few thousand
// reads, that the cache filled up.
func TestAdmitLooksAtRoom(t *testing.T) {
	c := newCache(t, &localcache.Config{MaxBytes: 64 << 10, NumCounters: 1 << 16})
	val := string(make([]byte, 100))
	for i := range 2000 {
		c.Set(7, fmt.Sprint("fill:", i), "get", val, int64(len(val)), hour)
	}
	c.Wait()
	firstReads := 0
	for i := range 20000 {
		if c.Admit(fmt.Sprint("tail:", i)) {
			firstReads++
		}
	}
	if firstReads == 20000 {
		t.Fatalf("20000 first reads into a full cache (%+v) were all admitted", c.Stats())
	}
}

// TestAdmitTailOnce: once the cache is full, of many keys read once each
// (a skewed workload's tail), almost none is admitted at its read: the
// sketch's collisions stay rare.
func TestAdmitTailOnce(t *testing.T) {
	c := newCache(t, &localcache.Config{MaxBytes: 64 << 10, NumCounters: 1 << 16})
	fillUp(t, c)
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
	c := newCache(t, &localcache.Config{MaxBytes: 64 << 10, NumCounters: 4096})
	fillUp(t, c)
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
