// Package lease is the clock of a fleet member's lease: when its last
// heartbeat that counts was sent, on the monotonic clock, and whether that
// is recent enough to act on. It is read on every command of a fleet
// process, so a check is an atomic load and a monotonic clock read, with
// no allocation and no lock.
//
// The lease is decided where it is used, never by a timer: a process that
// was paused for longer than its lease (a GC pause, a VM stall, SIGSTOP)
// finds it expired on its first instruction after the pause, whichever
// goroutine runs first.
package lease

import (
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock in nanoseconds: what time.Now
// reads for its monotonic part, without the wall clock.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns the monotonic clock, in nanoseconds since an arbitrary
// origin; only differences between two readings mean anything.
func Now() int64 { return nanotime() }

// Lease is a lease renewed by heartbeats. It is valid for Valid after the
// moment the last renewal counted from. The zero Lease has never been
// renewed and is never fresh. Its methods are safe for concurrent use.
type Lease struct {
	valid   int64        // nanoseconds; set by New, never changed
	renewed atomic.Int64 // Now() of the last renewal; 0: never
}

// New returns a lease that is fresh for valid after each renewal.
func New(valid time.Duration) *Lease { return &Lease{valid: int64(valid)} }

// Valid is how long a renewal keeps the lease fresh.
func (l *Lease) Valid() time.Duration { return time.Duration(l.valid) }

// Renew counts the lease from at (a reading of Now taken before the
// heartbeat that renews it was sent). A renewal older than the current one
// is ignored: the lease never moves backwards.
func (l *Lease) Renew(at int64) {
	for {
		cur := l.renewed.Load()
		if at <= cur || l.renewed.CompareAndSwap(cur, at) {
			return
		}
	}
}

// Fresh reports whether the lease is valid now.
func (l *Lease) Fresh() bool { return l.FreshAt(nanotime()) }

// FreshAt reports whether the lease was valid at the reading now.
func (l *Lease) FreshAt(now int64) bool {
	r := l.renewed.Load()
	return r != 0 && now-r <= l.valid
}

// Expiry is the reading of Now at which the lease stops being fresh, 0
// before the first renewal. It moves only forward, with each renewal.
func (l *Lease) Expiry() int64 {
	r := l.renewed.Load()
	if r == 0 {
		return 0
	}
	return r + l.valid
}

// Remaining is how long the lease stays fresh from now; 0 once expired.
func (l *Lease) Remaining() time.Duration {
	r := l.renewed.Load()
	if r == 0 {
		return 0
	}
	return max(time.Duration(r+l.valid-nanotime()), 0)
}
