// Package feed orders what a watcher learns of, from announcements and
// from re-reads, into what its channel delivers: increasing values only,
// each once, the newest kept when the receiver is slow. It is shared by the
// Redis and etcd registries and is nobody's public API.
package feed

// maxPending bounds what a slow receiver leaves queued; past it the oldest
// pending values are dropped (the receiver skips to newer ones, as it
// would after a lost announcement).
const maxPending = 256

// Feed is the queue of one watcher. It is not safe for concurrent use: its
// watcher goroutine owns it. A Feed with Less set is empty and has seen
// nothing.
type Feed[T any] struct {
	// Less orders values; only a value after every value offered so far is
	// queued.
	Less func(a, b T) bool

	seen    bool
	last    T   // newest value offered, if seen
	pending []T // newer than everything delivered, in order
}

// Offer queues v if it is after everything offered so far and reports
// whether it did.
func (f *Feed[T]) Offer(v T) bool {
	if f.seen && !f.Less(f.last, v) {
		return false
	}
	f.seen, f.last = true, v
	f.pending = append(f.pending, v)
	if n := len(f.pending) - maxPending; n > 0 {
		clear(f.pending[:n])
		f.pending = f.pending[n:]
	}
	return true
}

// Next returns out and the value to send on it when one is pending, or a
// nil channel (a select case that never fires) when none is. After a send
// on it succeeds, call Sent.
func (f *Feed[T]) Next(out chan T) (chan<- T, T) {
	if len(f.pending) == 0 {
		var zero T
		return nil, zero
	}
	return out, f.pending[0]
}

// Sent drops the value Next returned.
func (f *Feed[T]) Sent() {
	var zero T
	f.pending[0] = zero
	f.pending = f.pending[1:]
}
