package localcache

import "sync"

const guardStripes = 16 // a power of two

// guard makes Close safe while other methods run. Ristretto panics when a
// Get or Set races with its Close (they send on channels Close closes), so
// every call into ristretto holds a read lock and Close takes them all.
// The read lock is striped so that concurrent readers rarely share a cache
// line, as one RWMutex would make them do.
type guard struct {
	stripes [guardStripes]struct {
		mu sync.RWMutex
		_  [64 - 24]byte // one stripe per cache line
	}
	closed bool // written with every stripe write-locked
}

// enter read-locks stripe r (any number; it is reduced) and reports whether
// the cache is open. If it is not, the lock is already released.
func (g *guard) enter(r uint32) (stripe uint32, open bool) {
	stripe = r & (guardStripes - 1)
	g.stripes[stripe].mu.RLock()
	if g.closed {
		g.stripes[stripe].mu.RUnlock()
		return stripe, false
	}
	return stripe, true
}

func (g *guard) leave(stripe uint32) { g.stripes[stripe].mu.RUnlock() }

// close marks the guard closed, calls f once if it was open, and reports
// whether it did. It waits for every reader to leave first.
func (g *guard) close(f func()) bool {
	for i := range g.stripes {
		g.stripes[i].mu.Lock()
	}
	defer func() {
		for i := range g.stripes {
			g.stripes[i].mu.Unlock()
		}
	}()
	if g.closed {
		return false
	}
	g.closed = true
	f()
	return true
}
