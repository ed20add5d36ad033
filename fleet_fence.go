package redshard

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fencing that holds whatever the scheduler does (docs/membership.md,
// "Fencing at the data"). Three pieces:
//
//  1. The lease is decided on the command path. Client.enter reads the
//     lease clock (internal/lease) before every command of a fleet
//     process; a process whose last counted heartbeat was sent more than
//     half a lease ago fences itself then and there, whether or not the
//     heartbeat goroutine has run since it woke up.
//
//  2. A regime is what a process's commands were checked under: trusted
//     (a fresh lease, no fence) or fenced with what the process knew of
//     the beacons. Every change of regime publishes a topology with a new
//     in-flight count (chained to the previous one) and a closed
//     admission, and the admission opens only once every command of the
//     previous regime has ended.
//
//  3. Admission happens at the data. Every command connection of a fleet
//     process is named after its member id and incarnation (connname.Name)
//     before anything else is sent on it, and is refused unless the
//     topology's admission is open and, trusted, the lease is still fresh
//     after the name reached the server or, fenced, the beacon read on
//     that very connection is one the fence already knew. Before each
//     phase it publishes, the driver severs, on every server of both
//     rings, every named connection whose (member, incarnation) pair is
//     not that of a member live with the previous phase acknowledged
//     (package fleet's sever): an identity check, so a dropped process is cut off
//     even when a live one has its id or a look-alike. So a connection
//     that survives a phase the fleet published without its process was
//     admitted after the sever, by a regime that was current then.

// admission is whether a topology's commands may open connections to the
// shards. A nil admission is open (topologies outside a fleet, and those
// a regime change did not replace).
type admission struct {
	open   atomic.Bool
	opened chan struct{} // closed when open is set
}

func newAdmission() *admission { return &admission{opened: make(chan struct{})} }

func (a *admission) openUp() {
	if !a.open.Swap(true) {
		close(a.opened)
	}
}

// admitWait bounds how long a new connection waits for its topology's
// admission to open. The commands of the previous regime that it waits for
// usually end within microseconds; one of them may itself be dialling,
// and is refused once its own wait ends, which lets the rest through.
const admitWait = 100 * time.Millisecond

// admitting reports whether t's commands may open connections, waiting up
// to admitWait (and ctx) for the admission to open.
func (t *topology) admitting(ctx context.Context) bool {
	a := t.admit
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

// fencedConnError is how an admission refuses a connection. go-redis
// unwraps an OnConnect error once before it returns it to the command, so
// the error the caller sees is err, which wraps ErrFenced.
type fencedConnError struct{ err error }

func (e *fencedConnError) Error() string { return e.err.Error() }
func (e *fencedConnError) Unwrap() error { return e.err }

func refuseConn(format string, args ...any) error {
	return &fencedConnError{fmt.Errorf("%w: connection refused: "+format, append([]any{ErrFenced}, args...)...)}
}

// admit is the OnConnect of every command connection of a fleet process
// to the server id (dial).
func (c *client) admit(ctx context.Context, cn *redis.Conn, id string) error {
	f := c.fleet
	if f == nil { // the first topology's backends are built before c.fleet is set; nothing dials then
		return nil
	}
	// The name first: once it is on the server, a driver that has dropped
	// this process severs the connection, so every check below is made
	// after the point from which the sever would catch it.
	if err := cn.ClientSetName(ctx, f.connName).Err(); err != nil {
		return err
	}
	top := c.top.Load()
	ok := top.admitting(ctx)
	if now := c.top.Load(); ok && now != top { // replaced while it waited: check the newest
		top = now
		ok = top.admitting(ctx)
	}
	if !ok {
		return refuseConn("commands checked before the process's last change of fence are still running")
	}
	fc := top.fence
	if fc == nil {
		if f.lease.Fresh() {
			return nil
		}
		f.fenceNow()
		return refuseConn("no heartbeat of this process has reached the registry for %v", f.lease.Valid())
	}
	start := time.Now()
	data, err := cn.Get(ctx, beaconKey).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	changed, err := fc.cache.learn(id, start, data, fc.rc)
	if err != nil {
		return err
	}
	if changed {
		f.refence()
		return refuseConn("the beacon of server %s changed since the fence last read it", id)
	}
	return nil
}

// fleetOnConnect returns the admission of connections to s for a client
// that follows a registry, nil for one that does not.
func (c *client) fleetOnConnect(s Shard) func(context.Context, *redis.Conn) error {
	if c.cfg.opt.Registry == nil {
		return nil
	}
	id := s.identity()
	return func(ctx context.Context, cn *redis.Conn) error { return c.admit(ctx, cn, id) }
}

// fenceNow fences the process, unless it is already: its commands from now
// on are checked as a fenced process's.
func (f *follower) fenceNow() { f.fenceFor(nil) }

// fenceFor is fenceNow with the error that fences the process, which the
// commands it refuses wrap; nil: the lease ran out. A process already
// fenced is fenced again with cause when cause is graver (fenceRank): the
// registry is behind the fleet (ErrRegistryBehind), or the process lost its
// member id, so that its refusals say so.
func (f *follower) fenceFor(cause error) {
	f.newRegime(func(t *topology) bool {
		if t.fence != nil {
			if fenceRank(cause) <= fenceRank(t.fence.cause) {
				return false
			}
			fc := *t.fence
			fc.cause, fc.reason = cause, cause.Error()
			t.fence = &fc
			return true
		}
		a := f.acked.Load()
		var reason string
		if cause != nil {
			reason = cause.Error()
		} else {
			f.mu.Lock()
			since := f.sentOK
			f.mu.Unlock()
			reason = fmt.Sprintf("no heartbeat of this process has reached the registry since %s (lease %v)",
				since.UTC().Format(time.RFC3339Nano), f.ttl)
		}
		t.fence = &fence{f: f, known: a.Version, knownID: a.id, rc: f.c.cfg.opt.ringConfig(), cache: &beaconCache{}, reason: reason, cause: cause}
		return true
	})
}

// refence starts a new fenced regime: the fence learnt a beacon that
// commands already checked did not know.
func (f *follower) refence() {
	f.newRegime(func(t *topology) bool { return t.fence != nil })
}

// unfence ends the fence: the process has caught up, and the heartbeat
// sent at the lease reading sent succeeded.
func (f *follower) unfence(sent int64) {
	if f.idLost() != nil {
		return // fenced for good
	}
	f.lease.Renew(sent) // first: the trusted topology's commands must find the lease fresh
	f.newRegime(func(t *topology) bool {
		if t.fence == nil {
			return false
		}
		t.fence = nil
		return true
	})
}

// newRegime publishes a copy of the current topology changed by change
// (which reports whether it changed anything), with a new in-flight count
// chained to the current one and an admission that opens once the current
// regime's commands have ended.
func (f *follower) newRegime(change func(*topology) bool) {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return
	}
	old := c.top.Load()
	next := *old
	if !change(&next) {
		return
	}
	next.flight = &inflight{}
	next.flight.prev.Store(old.flight)
	next.admit = newAdmission()
	c.top.Store(next.seal())
	if !f.spawn(func() {
		waitIdle(f.ctx, old.flight)
		next.flight.prev.Store(nil)
		next.admit.openUp()
	}) {
		next.admit.openUp() // stopping: nothing is admitted any more anyway
	}
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// spawn runs fn in a goroutine the follower waits for when it stops; it
// reports false, running nothing, once the follower is stopping.
func (f *follower) spawn(fn func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopping {
		return false
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn()
	}()
	return true
}
