package hotkey_test

import (
	"math"
	"testing"
	"time"

	"github.com/redshard/redshard/hotkey"
)

// TestObserveHot: ObserveHot answers as Observe then IsHot would, and a
// hot key's observations go to its own counter, reaching the summary
// hotBatch (16) at a time, none lost.
func TestObserveHot(t *testing.T) {
	clk := newFakeClock()
	d := mustNew(t, &hotkey.Config{Window: 10 * time.Second, Now: clk.Now})
	// a at 600/s and b at 300/s for 50s, as in TestTopOrderAndRate, but a
	// through ObserveHot.
	for i := range 50_000 {
		clk.Advance(time.Millisecond)
		if i%5 < 3 {
			if hot, want := d.ObserveHot("a"), d.IsHot("a"); hot != want {
				t.Fatalf("step %d: ObserveHot(a) = %v, IsHot = %v", i, hot, want)
			}
		}
		if i%10 < 3 {
			d.Observe("b")
		}
	}
	if !d.IsHot("a") {
		t.Fatal("a is not hot")
	}
	rate := func(key string) float64 {
		for _, k := range d.Top(10) {
			if k.Key == key {
				return k.Rate
			}
		}
		return 0
	}
	if r := rate("a"); math.Abs(r-600) > 30 {
		t.Fatalf("rate of a = %v, want about 600/s", r)
	}
	// With the clock stopped, counts do not decay: the next 15 stay on the
	// key's counter, the 16th brings all of them into the summary.
	n0 := d.Pending("a")
	r0 := rate("a")
	for range 16 - n0 - 1 {
		if !d.ObserveHot("a") {
			t.Fatal("ObserveHot(a) = false for a hot key")
		}
	}
	if got := d.Pending("a"); got != 15 {
		t.Fatalf("Pending(a) = %d after %d more ObserveHot, want 15", got, 16-n0-1)
	}
	if r := rate("a"); r != r0 {
		t.Fatalf("rate of a moved from %v to %v before a batch was due", r0, r)
	}
	d.ObserveHot("a")
	if got := d.Pending("a"); got != 0 {
		t.Fatalf("Pending(a) = %d after the batch, want 0", got)
	}
	tau := 5.0 // Window/2 in seconds
	if r, want := rate("a"), r0+16/tau; math.Abs(r-want) > 1e-6*want {
		t.Fatalf("rate of a = %v after a batch of 16, want %v", r, want)
	}
	if err := d.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestObserveN: ObserveN(k, n) counts as n calls of Observe at the same
// instant, and a key counted one time in four at weight 4 ends with the
// rate of a key counted every time.
func TestObserveN(t *testing.T) {
	clk := newFakeClock()
	one := mustNew(t, &hotkey.Config{Window: 10 * time.Second, Now: clk.Now})
	many := mustNew(t, &hotkey.Config{Window: 10 * time.Second, Now: clk.Now})
	for i := range 40_000 {
		clk.Advance(time.Millisecond)
		if i%2 == 0 { // a at 500/s
			one.Observe("a")
			if i%8 == 6 {
				many.ObserveN("a", 4)
			}
		}
		if i%10 == 0 { // b at 100/s, the same on both
			one.Observe("b")
			many.Observe("b")
		}
	}
	many.ObserveN("c", 0) // counts nothing
	rates := func(d *hotkey.Detector) map[string]float64 {
		m := map[string]float64{}
		for _, k := range d.Top(10) {
			m[k.Key] = k.Rate
		}
		return m
	}
	r1, rn := rates(one), rates(many)
	if math.Abs(r1["a"]-500) > 25 || math.Abs(rn["a"]-r1["a"]) > 0.01*r1["a"] {
		t.Errorf("rate of a: %v observed one by one, %v four at a time; want both about 500/s and within 1%%", r1["a"], rn["a"])
	}
	if _, ok := rn["c"]; ok {
		t.Error("ObserveN(c, 0) counted c")
	}
	if one.IsHot("a") != many.IsHot("a") {
		t.Errorf("IsHot(a): %v observed one by one, %v four at a time", one.IsHot("a"), many.IsHot("a"))
	}
	for _, d := range []*hotkey.Detector{one, many} {
		if err := d.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}
