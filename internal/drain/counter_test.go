package drain

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCounterCounts(t *testing.T) {
	var c Counter
	if n := c.Load(); n != 0 {
		t.Fatalf("zero Counter: Load = %d, want 0", n)
	}
	var slots []int
	for range 100 {
		slots = append(slots, c.Enter())
	}
	if n := c.Load(); n != 100 {
		t.Fatalf("after 100 Enters: Load = %d, want 100", n)
	}
	for _, s := range slots {
		if s < 0 || s >= Stripes {
			t.Fatalf("Enter returned stripe %d, want 0..%d", s, Stripes-1)
		}
		c.Exit(s)
	}
	if n := c.Load(); n != 0 {
		t.Fatalf("after every Exit: Load = %d, want 0", n)
	}
}

// epoch is a topology as the root uses a Counter: a command counts itself
// on the epoch it loaded, then checks that no newer epoch was published
// (else it backs out); the drain of the next epoch waits for Load to read 0.
type epoch struct {
	count   Counter
	running atomic.Int64 // commands past the re-check and not yet exited
	drained atomic.Bool  // the drain read 0
}

// enter is the root's enter on stripe i (-1: the caller's P): it returns
// the epoch the command runs on and its slot.
func enter(cur *atomic.Pointer[epoch], i int) (*epoch, int) {
	for {
		e := cur.Load()
		var slot int
		if i < 0 {
			slot = e.count.Enter()
		} else {
			slot = e.count.enterOn(i)
		}
		if cur.Load() == e {
			e.running.Add(1)
			return e, slot
		}
		e.count.Exit(slot)
	}
}

func exit(e *epoch, slot int) {
	e.running.Add(-1)
	e.count.Exit(slot)
}

// TestDrainWhileEntering interleaves commands with the drain's sum, at
// chosen stripes: a command running on a stripe not yet read is counted,
// whatever enters and exits on the stripes already read meanwhile.
func TestDrainWhileEntering(t *testing.T) {
	var cur atomic.Pointer[epoch]
	old := new(epoch)
	cur.Store(old)
	a, aSlot := enter(&cur, 5) // running on the old ring when it is replaced
	cur.Store(new(epoch))      // the change is published; its drain starts

	var late *epoch
	var lateSlot int
	n := old.count.load(func(i int) {
		switch i {
		case 0:
			// A command that loaded the old epoch before the publication
			// counts itself on stripe 0, already read: it must back out
			// and run on the new epoch.
			late, lateSlot = enterAs(&cur, old, 0)
		case 2:
			// A command of the new epoch comes and goes on stripe 3.
			e, s := enter(&cur, 3)
			exit(e, s)
		}
	})
	if late == old {
		t.Fatal("a command that counted itself on the old epoch after the publication ran on it")
	}
	exit(late, lateSlot)
	if n != 1 {
		t.Fatalf("the drain's sum with one command running on stripe 5 = %d, want 1", n)
	}
	exit(a, aSlot)
	if n := old.count.Load(); n != 0 {
		t.Fatalf("once it exited: Load = %d, want 0", n)
	}
}

// enterAs is enter for a command that loaded e before the current epoch
// replaced it: it counts itself on e's stripe i, re-checks, and goes on as
// enter does.
func enterAs(cur *atomic.Pointer[epoch], e *epoch, i int) (*epoch, int) {
	slot := e.count.enterOn(i)
	if cur.Load() == e {
		e.running.Add(1)
		return e, slot
	}
	e.count.Exit(slot)
	return enter(cur, i)
}

// TestDrainNeverMissesACommand runs commands on many goroutines while
// epochs are published and drained one after another: once a drain read 0,
// no command runs on its epoch any more.
func TestDrainNeverMissesACommand(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	var cur atomic.Pointer[epoch]
	cur.Store(new(epoch))
	var stop atomic.Bool
	var violations atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				e, slot := enter(&cur, -1)
				if e.drained.Load() {
					violations.Add(1) // running on an epoch already drained
				}
				runtime.Gosched()
				exit(e, slot)
			}
		}()
	}
	epochs := 2000
	if testing.Short() {
		epochs = 200
	}
	for range epochs {
		old := cur.Load()
		cur.Store(new(epoch))
		for old.count.Load() != 0 {
			runtime.Gosched()
		}
		old.drained.Store(true)
		if old.running.Load() != 0 {
			violations.Add(1) // a command still running on the drained epoch
		}
	}
	stop.Store(true)
	wg.Wait()
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d commands ran on an epoch after its drain read 0", v)
	}
}

// BenchmarkEnterExit is a command's count on a Counter, against one
// shared atomic counter (what an epoch had before): run it with -cpu 1,2,...
func BenchmarkEnterExit(b *testing.B) {
	b.Run("striped", func(b *testing.B) {
		var c Counter
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Exit(c.Enter())
			}
		})
	})
	b.Run("shared", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
				n.Add(-1)
			}
		})
	})
}
