package redshard

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/internal/drain"
	"github.com/redshard/redshard/internal/flight"
	"github.com/redshard/redshard/internal/member"
	"github.com/redshard/redshard/ring"
)

// topology is an immutable snapshot of the ring and the shard backends,
// aligned: shards[i] is the owner of ring index i.
type topology struct {
	epoch  uint64
	ring   *ring.Ring
	shards []*shard

	// handoff, while not nil, holds the previous topology: keys whose owner
	// changed are fetched from their previous owner on first use.
	handoff *handoff

	// orphans are shards removed by SetShards whose keys Rebalance has not
	// moved yet: not on the ring, still open.
	orphans []*shard

	// gutterTTL > 0 turns failover on: a down shard's keys are served by a
	// stand-in, and writes there live at most gutterTTL.
	gutterTTL time.Duration

	// flight counts the commands running on this epoch's ring; the first
	// move of the next change waits for it to reach zero.
	flight *inflight

	// hold, in a fleet's Prepare phase, holds the commands on keys the
	// next ring moves (fleet.go); fence, while a fleet's process has lost
	// its registry, refuses those a change may move.
	hold  *hold
	fence *member.Fence
	// admit, in a fleet process, says whether the topology's commands may
	// open connections (internal/member); nil: they may.
	admit *member.Admission

	// guarded is set (seal) when commands must send their keys through
	// handOff: a change to hand off, a hold or a fence.
	guarded bool
}

// seal computes t's derived fields before it is published.
func (t *topology) seal() *topology {
	t.guarded = t.handoff != nil && !t.handoff.committed.Load() || t.hold != nil || t.fence != nil
	return t
}

// shard is one shard of a topology: its configuration (which may differ
// from its backend's in weight only) and its backend.
type shard struct {
	Shard
	*backend
}

// shard returns the named shard of t; a nil t has none.
func (t *topology) shard(name string) (*shard, bool) {
	if t == nil {
		return nil, false
	}
	i, ok := t.ring.Index(name)
	if !ok {
		return nil, false
	}
	return t.shards[i], true
}

// sources lists the shards that may hold keys: the current ones and the
// removed ones whose keys have not been moved yet.
func (t *topology) sources() []*shard {
	return append(slices.Clone(t.shards), t.orphans...)
}

// rings returns t and, during a change, the other ring whose owners
// processes not switched yet still use: the previous ring during a
// handoff, the next one in a fleet's Prepare (processes in Migrate
// publish there).
func (t *topology) rings() []*topology {
	rings := []*topology{t}
	if t.handoff != nil {
		rings = append(rings, t.handoff.from)
	}
	if t.hold != nil {
		rings = append(rings, t.hold.nextTop)
	}
	return rings
}

// previous returns the ring a handoff moves keys from, nil when no change
// is being handed off.
func (t *topology) previous() *topology {
	if t.handoff == nil {
		return nil
	}
	return t.handoff.from
}

// prepared returns the next ring of a fleet's Prepare phase (its shards are
// never published), nil outside it.
func (t *topology) prepared() *topology {
	if t.hold == nil {
		return nil
	}
	return t.hold.nextTop
}

// changing reports whether a membership change is under way on t: handed
// off, or prepared by a fleet (a keyspace walk of t then reads two rings).
func (t *topology) changing() bool { return t.handoff != nil || t.hold != nil }

// exit ends a command counted by enter on slot.
func (t *topology) exit(slot int) { t.flight.n.Exit(slot) }

// block moves a command counted by enter on slot to the blocking count;
// the caller then calls unblock instead of exit.
func (t *topology) block(slot int) {
	t.flight.blocking.Add(1)
	t.flight.n.Exit(slot)
}

// unblock ends a command moved to the blocking count.
func (t *topology) unblock() { t.flight.blocking.Add(-1) }

// inflight counts the commands routed on one epoch's topology that are
// still running: n the others, striped per P so that the commands of
// different cores do not all write one cache line (package drain says why
// its sum still sees every command in flight); blocking the blocking ones
// (BLPOP, XREAD BLOCK, ...), which may wait for ever. Read n before
// blocking (idle): a command moves to blocking (topology.block) before it
// leaves n. Copies of a topology with the same epoch share it.
type inflight struct {
	n        drain.Counter
	blocking atomic.Int64
	// prev, while set, is the count of the regime this one replaced in
	// a fleet process (internal/member): idle waits for it too.
	prev atomic.Pointer[inflight]
}

// handoff is the state of one membership change, from the moment SetShards
// publishes the new ring until Rebalance has drained it: the previous
// topology, the change's id and settled set, and which keys this process
// has already seen settled.
type handoff struct {
	from    *topology
	settled string // name of the change's settled set on each new owner: settledPrefix + changeID

	group singleflight.Group // keyed by key, run by Client.flights

	drainTurn chan struct{} // a token: one waiter at a time for the previous ring's commands
	drained   atomic.Bool

	// committed is set in a fleet's Commit phase: every key has moved, so
	// commands start no move (the settled sets stay, refusing late moves
	// of processes still in Migrate).
	committed atomic.Bool

	// movers counts the moves running in this process; Rebalance waits for
	// them before it deletes the settled sets. flush (FLUSHDB, FLUSHALL)
	// excludes them.
	movers flight.Tracker
	flush  sync.RWMutex

	// done holds the keys settled in this process (moved, found absent on
	// the previous owner, or settled without it), striped so that the
	// commands of a change do not all meet on one lock.
	done [doneStripes]doneStripe
}

const doneStripes = 64

type doneStripe struct {
	mu   sync.Mutex
	keys map[string]struct{} // guarded by mu
	_    [40]byte            // keep stripes on separate cache lines
}

// hold is a Prepare topology's view of the next ring: commands on keys that
// move wait for released.
type hold struct {
	epoch    uint64     // the registry epoch of the change
	next     *ring.Ring // the ring being prepared
	nextIDs  []string   // server identity of next's index i
	nextTop  *topology  // next's shards (never published: the pub/sub multiplexer listens there too)
	released chan struct{}
	timeout  time.Duration
}

// settled reports that no change is in flight for t: no handoff, and no
// fleet hold or fence.
func (t *topology) settled() bool { return t.handoff == nil && t.hold == nil && t.fence == nil }
