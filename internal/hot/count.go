package hot

import (
	"math/rand/v2"
	"sync/atomic"
)

// stripedCount is a counter that every cache hit bumps, from every
// processor at once: its stripes sit on cache lines of their own, so that
// two processors counting do not pass one line back and forth.
type stripedCount struct {
	stripes [8]struct {
		n atomic.Int64
		_ [56]byte
	}
}

// Add adds n to a stripe chosen at random.
func (c *stripedCount) Add(n int64) { c.stripes[rand.Uint32()%uint32(len(c.stripes))].n.Add(n) }

// Load returns the count.
func (c *stripedCount) Load() int64 {
	var t int64
	for i := range c.stripes {
		t += c.stripes[i].n.Load()
	}
	return t
}
