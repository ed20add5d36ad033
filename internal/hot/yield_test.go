package hot

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redshard/redshard/hotkey"
)

// TestYieldGate: a new gate admits every miss; a window whose reads are
// under half hits turns it to admitting about one miss in yieldSample; a
// window with half its reads hits turns it back.
func TestYieldGate(t *testing.T) {
	g := yieldGate{size: 100}
	for range 1000 {
		if !g.admits() {
			t.Fatal("a new gate refused a miss; want every miss admitted")
		}
	}
	for range 100 {
		g.count(false)
	}
	if !g.off.Load() {
		t.Fatal("a window of misses left admission on")
	}
	// While off, one miss in yieldSample at random: 1,000 expected
	// (binomial, standard deviation about 31).
	n := 0
	for range 1000 * yieldSample {
		if g.admits() {
			n++
		}
	}
	if n < 700 || n > 1300 {
		t.Fatalf("while off, %d of %d misses admitted; want about 1000", n, 1000*yieldSample)
	}
	for i := range 100 {
		g.count(i%2 == 0) // 50 hits
	}
	if g.off.Load() {
		t.Fatal("a window half hits left admission off")
	}
	for i := range 100 {
		g.count(i < 49) // 49 hits
	}
	if !g.off.Load() {
		t.Fatal("a window of 49 hits in 100 reads left admission on")
	}
}

// TestYieldGateConcurrent: reads counted by many goroutines at once all
// fall in some window: the windows decided and the reads left in the
// current one add up to the reads counted.
func TestYieldGateConcurrent(t *testing.T) {
	g := yieldGate{size: 64}
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				g.count((w+i)%4 != 0) // three hits in four: admission stays on
				if g.off.Load() {
					t.Error("admission turned off with three reads in four hits")
					return
				}
			}
		})
	}
	wg.Wait()
	// Every window is swapped out whole, so what is left is under a window
	// plus what the goroutines added between a window's end and its swap.
	if left := g.window.Load() >> 32; left >= 64+workers {
		t.Fatalf("%d reads left in the current window; want fewer than %d", left, 64+workers)
	}
}

// TestAutoPipelinedAdmissionFollowsHits: on an auto-pipelined shard, keys
// that are not hot are cached from their first read (the cache has room)
// while most such reads hit; a window of reads of keys each read once
// (none hits) turns admission down to a sample, so most such misses stay
// plain reads the server does not track; reads of a few keys over and
// over (the sampled misses cache them, their reads hit) turn it back on.
// Every read returns the server's value throughout.
func TestAutoPipelinedAdmissionFollowsHits(t *testing.T) {
	h, b, admin := newTestPathDetector(t, &hotkey.Config{MinRate: 1e9}) // no key turns hot
	b.ap = true
	h.yield.size = 256
	ctx := context.Background()
	cacheKey(t, h, b, "probe") // the shard tracks
	id := b.HotState().id
	const keys = 3000
	pipe := admin.Pipeline()
	for i := range keys {
		pipe.Set(ctx, fmt.Sprint("k:", i), i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	read := func(i int) {
		t.Helper()
		if v, err := get(t, h, b, fmt.Sprint("k:", i)); err != nil || v != fmt.Sprint(i) {
			t.Fatalf("GET k:%d = %q, %v", i, v, err)
		}
	}
	read(0)
	if !h.cache.Holds(id, "k:0", getSubKey) {
		t.Fatal("on an auto-pipelined shard, a first read was not cached while admission is on")
	}

	// Keys read once each: no hits. Within two windows admission is off.
	next := 1
	for ; !h.yield.off.Load(); next++ {
		if next > 2*256+1 {
			t.Fatalf("admission still on after %d reads of keys read once", next)
		}
		read(next)
	}
	gets, cached := commandCount(t, admin, "get"), 0
	const fresh = 1000
	for i := next; i < next+fresh; i++ {
		read(i)
		if h.cache.Holds(id, fmt.Sprint("k:", i), getSubKey) {
			cached++
		}
	}
	if !h.yield.off.Load() {
		t.Fatal("admission back on while keys are read once")
	}
	// One miss in yieldSample admitted: about 16 of 1,000 (none in about
	// one run in 6 million).
	if cached == 0 || cached > fresh/4 {
		t.Fatalf("admission off: %d of %d keys read once cached; want about %d, not 0", cached, fresh, fresh/yieldSample)
	}
	if n := commandCount(t, admin, "get") - gets; n != fresh {
		t.Fatalf("%d reads of keys read once sent %d GETs; want each sent", fresh, n)
	}

	// A few keys read over and over: their sampled misses cache them, their
	// reads then hit, and a window turns admission back on.
	reads := 0
	for ; h.yield.off.Load(); reads++ {
		if reads > 64*256 {
			t.Fatalf("admission still off after %d reads of 8 keys", reads)
		}
		read(keys - 1 - reads%8)
	}
	read(next + fresh)
	if !h.cache.Holds(id, fmt.Sprint("k:", next+fresh), getSubKey) {
		t.Fatal("admission back on, but a first read was not cached")
	}
}
