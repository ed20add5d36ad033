package member

import (
	"context"
	"sync/atomic"
	"time"
)

// Admission is whether a topology's commands may open connections to the
// shards. A nil Admission is open (topologies outside a fleet, and those
// a regime change did not replace).
type Admission struct {
	open   atomic.Bool
	opened chan struct{} // closed when open is set
}

// NewAdmission returns a closed admission.
func NewAdmission() *Admission { return &Admission{opened: make(chan struct{})} }

// Open opens a. It is idempotent.
func (a *Admission) Open() {
	if !a.open.Swap(true) {
		close(a.opened)
	}
}

// admitWait bounds how long a new connection waits for its topology's
// admission to open. The commands of the previous regime that it waits for
// usually end within microseconds; one of them may itself be dialling,
// and is refused once its own wait ends, which lets the rest through.
const admitWait = 100 * time.Millisecond

// Wait reports whether a's commands may open connections, waiting up to
// admitWait (and ctx) for a to open.
func (a *Admission) Wait(ctx context.Context) bool {
	if a == nil || a.open.Load() {
		return true
	}
	timer := time.NewTimer(admitWait)
	defer timer.Stop()
	select {
	case <-a.opened:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	return a.open.Load()
}
