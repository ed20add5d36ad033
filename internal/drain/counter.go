package drain

import (
	"sync/atomic"
	_ "unsafe" // go:linkname
)

// Stripes is the number of stripes of a Counter; a P whose id is larger
// shares the stripe of its id modulo Stripes.
const Stripes = 32

// cacheLine is the size a stripe is padded to, so that no two stripes
// share a cache line.
const cacheLine = 64

type stripe struct {
	n atomic.Int64
	_ [cacheLine - 8]byte
}

// Counter counts the commands in flight, striped per P. It is safe for
// concurrent use; the zero value is ready.
type Counter struct {
	_       [cacheLine]byte // the stripes' lines are the Counter's alone
	stripes [Stripes]stripe
}

// Enter counts one more command and returns the stripe it was counted on,
// to be passed to Exit.
func (c *Counter) Enter() int { return c.enterOn(procID() % Stripes) }

// enterOn is Enter on stripe i.
func (c *Counter) enterOn(i int) int {
	c.stripes[i].n.Add(1)
	return i
}

// Exit ends a command counted by the Enter that returned slot.
func (c *Counter) Exit(slot int) { c.stripes[slot].n.Add(-1) }

// Load returns the number of commands entered and not exited: the sum of
// the stripes, read one at a time (see the package doc for what a sum of 0
// guarantees).
func (c *Counter) Load() int64 {
	return c.load(nil)
}

// load is Load, calling read (when not nil) after each stripe is read: the
// tests interleave commands with the sum there.
func (c *Counter) load(read func(i int)) int64 {
	var sum int64
	for i := range c.stripes {
		sum += c.stripes[i].n.Load()
		if read != nil {
			read(i)
		}
	}
	return sum
}

// procID returns the id of the P the caller runs on. The goroutine may
// move to another P as soon as it returns: the id only spreads the writes
// of different cores over different stripes, it is never needed to be
// right.
func procID() int {
	id := runtime_procPin()
	runtime_procUnpin()
	return id
}

//go:linkname runtime_procPin runtime.procPin
func runtime_procPin() int

//go:linkname runtime_procUnpin runtime.procUnpin
func runtime_procUnpin()
