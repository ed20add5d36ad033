package loan

import (
	"sync/atomic"
	"testing"
)

// TestLastOfLoanAndOrphanCloses: the client closes once, when both the
// handle's cleanup has run and every loan has ended, in either order; an
// ended loan ended again changes nothing.
func TestLastOfLoanAndOrphanCloses(t *testing.T) {
	for _, orphanFirst := range []bool{true, false} {
		var closed atomic.Int32
		ls := New(func() { closed.Add(1) })
		a, b := ls.lend(), ls.lend()
		if orphanFirst {
			ls.Orphan()
		}
		a.end()
		a.end() // once: must not end b's count too
		if n := closed.Load(); n != 0 {
			t.Fatalf("orphanFirst %v: closed %d times with a loan open", orphanFirst, n)
		}
		if open, _ := ls.State(); open != 1 {
			t.Fatalf("orphanFirst %v: %d loans open, want 1", orphanFirst, open)
		}
		b.end()
		if !orphanFirst {
			if n := closed.Load(); n != 0 {
				t.Fatalf("closed %d times before the handle's cleanup", n)
			}
			ls.Orphan()
		}
		if n := closed.Load(); n != 1 {
			t.Fatalf("orphanFirst %v: closed %d times, want 1", orphanFirst, n)
		}
		if open, orphaned := ls.State(); open != 0 || !orphaned {
			t.Fatalf("orphanFirst %v: State = %d, %v; want 0, true", orphanFirst, open, orphaned)
		}
	}
}
