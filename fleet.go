package redshard

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/internal/beacons"
	"github.com/redshard/redshard/internal/fleetseam"
	"github.com/redshard/redshard/internal/member"
	"github.com/redshard/redshard/internal/parallel"
	"github.com/redshard/redshard/registry"
)

// A fleet (docs/membership.md, "A fleet"): every process follows the
// registry's config phase by phase and acknowledges a phase (Heartbeat with
// its version) once it routes by it and no command it routed under the
// previous one is still running. What each phase means here:
//
//	Stable   route by Doc.
//	Prepare  route by PrevDoc; a command on a key whose owner differs in
//	         Doc waits (hold) until this process leaves Prepare, then runs
//	         again on the new topology. Nobody takes a key before Migrate,
//	         and Migrate is published only once every process is here, so
//	         nothing reaches a moved key's previous owner after its take.
//	Migrate  route by Doc, with handoff from PrevDoc (SetShards' protocol).
//	Commit   route by Doc; the handoff stays (its settled sets refuse late
//	         moves of Migrate processes) but starts no new move, and the
//	         moves still running end before Commit is acknowledged.
//	Stable   (the next) route by Doc; the change's settled sets are deleted
//	         and the removed servers' clients closed.
//
// A process whose last successful heartbeat was sent a lease ago (the
// registry's MemberTTL) may have been dropped, and the fleet may go on
// without it: it fences itself. Fenced, it refuses the keys it knows to be
// moving and, before using a shard, reads the shard's beacon (the config
// the driver last wrote on every server of its change, see fleet.Apply): a key
// that a newer change moves, or whose owner there is another server, is
// refused with ErrFenced; the rest is served, so a registry outage with no
// change in flight stops nothing. Heartbeats that succeed again, and the
// config caught up, end the fence.
//
// Following the registry, the fence's state and the admission of
// connections are internal/member's; the root keeps what the topology
// holds (the hold, the fence as a field) and builds the topologies the
// follower asks for (fleetHost).

// errReroute is returned by a command held in Prepare once the process has
// left that phase: it runs again on the new topology. It only reaches a
// caller from inside a transaction (Watch), where it cannot.
var errReroute = fmt.Errorf("%w: the fleet's change moved on while the command waited; run it again", ErrHandoffInProgress)

// release wakes the commands held on h: the process has left Prepare.
func (h *hold) release() { close(h.released) }

// moving reports whether key's server differs between top (routing by the
// previous ring) and the ring being prepared.
func (h *hold) moving(top *topology, key string) bool {
	return top.shards[top.ring.LookupIndex(key)].id != h.nextIDs[h.next.LookupIndex(key)]
}

// wait holds a command on a moving key until the process leaves Prepare,
// for at most the hold's timeout and never up to the caller's deadline:
// a command that cannot be served in time fails with ErrHandoffInProgress
// a little before its context would (holdMargin), so that the caller
// learns why rather than seeing a timeout.
func (h *hold) wait(ctx context.Context, key string) error {
	limit, why := h.timeout, "FleetOptions.HoldTimeout"
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left-holdMargin(left) < limit {
			limit, why = max(left-holdMargin(left), 0), "the command's deadline"
		}
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-h.released:
		return errReroute
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%w: key %q moves in the fleet's change to epoch %d, which has not reached its migrate phase within %v (%s); the change waits for every live process's acknowledgement, and a process that stopped answering is dropped after its lease",
			ErrHandoffInProgress, key, h.epoch, limit.Round(time.Millisecond), why)
	}
}

// holdMargin is how long before a caller's deadline a held command gives
// up: a tenth of the time it had, at most 100ms.
func holdMargin(left time.Duration) time.Duration { return min(left/10, 100*time.Millisecond) }

// fleetCheck runs, for a topology with a hold or a fence, before a command
// uses key.
func (c *client) fleetCheck(ctx context.Context, top *topology, key string) error {
	if fc := top.fence; fc != nil {
		if err := fenceCheck(ctx, fc, top, key); err != nil {
			return err
		}
	}
	if h := top.hold; h != nil && h.moving(top, key) {
		return h.wait(ctx, key)
	}
	return nil
}

// moveContext bounds a move (handoff or Rebalance) by the follower's
// MoveDeadline in a fleet process.
func (c *client) moveContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.fleet == nil {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, c.fleet.MoveDeadline())
}

// idle reports whether no command counted on fl is running, or only
// blocking ones that have had blockingGrace since start.
func (fl *inflight) idle(start time.Time) bool {
	for ; fl != nil; fl = fl.prev.Load() {
		if fl.n.Load() != 0 || fl.blocking.Load() != 0 && time.Since(start) <= blockingGrace {
			return false
		}
	}
	return true
}

// waitIdle waits until no command counted on fl is running, or only
// blocking ones for blockingGrace (see awaitDrain), or ctx ends.
func waitIdle(ctx context.Context, fl *inflight) {
	start := time.Now()
	for !fl.idle(start) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// buildFleet returns the topology cfg asks for, after old (which followed
// prev), and what to do once it is published and c.mu released (delete
// a finished change's settled sets, retire removed servers). Caller holds
// c.mu.
func (c *client) buildFleet(old *topology, prev, cfg registry.Config, holdTimeout time.Duration) (*topology, func(), error) {
	rc := c.cfg.opt.ringConfig()
	s1, r1, err := parseRingDoc(cfg.Doc, rc)
	if err != nil {
		return nil, nil, err
	}
	s1 = c.cfg.opt.withConnection(s1)
	var s0 []Shard
	var r0 member.Ring
	if cfg.InFlight() {
		if s0, r0, err = parseRingDoc(cfg.PrevDoc, rc); err != nil {
			return nil, nil, err
		}
		s0 = c.cfg.opt.withConnection(s0)
	}
	sameChange := prev.Epoch == cfg.Epoch && prev.Change == cfg.Change && prev.InFlight()
	// Every backend old reaches may serve the next topology.
	reuse := &topology{}
	for _, b := range reachable(old) {
		reuse.shards = append(reuse.shards, &shard{Shard: b.shard, backend: b})
	}
	next := &topology{epoch: old.epoch + 1, gutterTTL: old.gutterTTL, flight: &inflight{}}
	switch cfg.Phase {
	case registry.Stable:
		next.ring = r1.R
		next.shards = c.buildShards(r1.R, s1, reuse)
	case registry.Prepare:
		next.ring = r0.R
		next.shards = c.buildShards(r0.R, s0, reuse)
		nt := &topology{epoch: next.epoch, ring: r1.R, flight: next.flight}
		nt.shards = c.buildShards(r1.R, s1, &topology{shards: append(reuse.shards, next.shards...)})
		next.hold = &hold{epoch: cfg.Epoch, next: r1.R, nextIDs: r1.IDs, nextTop: nt,
			released: make(chan struct{}), timeout: holdTimeout}
	case registry.Migrate, registry.Commit:
		if sameChange && prev.Phase == registry.Migrate && old.handoff != nil {
			// Commit after Migrate: the same routing, no new move. The
			// moves already running end before Commit is acknowledged:
			// once it is, Stable may come and the settled sets that
			// refuse a late settle be deleted.
			cp := *old
			cp.handoff.setCommitted(true)
			return &cp, cp.handoff.closeMoves, nil
		}
		from := old
		if !(sameChange && prev.Phase == registry.Prepare) {
			// Joined or caught up mid-change: the previous ring's
			// commands are old's.
			from = &topology{epoch: old.epoch, ring: r0.R, flight: old.flight}
			from.shards = c.buildShards(r0.R, s0, reuse)
		}
		pool := &topology{shards: append(reuse.shards, from.shards...)}
		next.ring = r1.R
		next.shards = c.buildShards(r1.R, s1, pool)
		for _, s := range from.shards {
			if !slices.ContainsFunc(next.shards, func(n *shard) bool { return n.backend == s.backend }) &&
				!slices.ContainsFunc(next.orphans, func(n *shard) bool { return n.backend == s.backend }) {
				next.orphans = append(next.orphans, s)
			}
		}
		next.handoff = newHandoff(from, cfg.Change)
		next.handoff.setCommitted(cfg.Phase == registry.Commit)
	default:
		return nil, nil, fmt.Errorf("unknown phase %q", cfg.Phase)
	}
	// Servers old used that next does not are retired; a change that old
	// was in and next is not has its settled sets deleted.
	gone := unusedBackends(old, next)
	var done *handoff
	if old.handoff != nil && (next.handoff == nil || next.handoff.settledKey() != old.handoff.settledKey()) {
		done = old.handoff
	}
	after := func() {
		if done != nil {
			c.dropSettled(context.Background(), done, next.sources())
		}
		if len(gone) > 0 {
			c.mu.Lock()
			c.retireLocked(gone)
			c.mu.Unlock()
		}
	}
	return next, after, nil
}

// reachable lists, once each, the backends t reaches: its shards and
// orphans, its previous ring's (handoff) and its next ring's (hold).
func reachable(t *topology) []*backend {
	var out []*backend
	add := func(shards []*shard) {
		for _, s := range shards {
			if !slices.Contains(out, s.backend) {
				out = append(out, s.backend)
			}
		}
	}
	add(t.sources())
	if prev := t.previous(); prev != nil {
		add(prev.shards)
	}
	if next := t.prepared(); next != nil {
		add(next.shards)
	}
	return out
}

// unusedBackends lists the backends old reaches that next does not.
func unusedBackends(old, next *topology) []*backend {
	keep := reachable(next)
	var gone []*backend
	for _, b := range reachable(old) {
		if !slices.Contains(keep, b) {
			gone = append(gone, b)
		}
	}
	return gone
}

// dropSettled ends a change in this process: waits for its moves, then
// deletes its settled sets on shards. A leftover expires (settledTTL).
func (c *client) dropSettled(ctx context.Context, h *handoff, shards []*shard) {
	h.closeMoves()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handoffTimeout)
	defer cancel()
	parallel.Run(len(shards), func(i int) {
		_, _ = shards[i].client.Pipelined(dctx, func(p redis.Pipeliner) error {
			p.Del(dctx, h.settledKey())
			p.SRem(dctx, internalIndex, h.settledKey())
			return nil
		})
	})
}

// fenceCheck refuses key if a change this process knows of may be moving
// it, or if the beacon of the server it would use says a newer change
// moves it (or owns it elsewhere): fc is top's fence.
func fenceCheck(ctx context.Context, fc *member.Fence, top *topology, key string) error {
	if h := top.hold; h != nil && h.moving(top, key) {
		return fc.Refuse(key, "it moves in the change to epoch %d", h.epoch)
	}
	if h := top.handoff; h != nil && !h.isCommitted() {
		from := h.previousOwner(key)
		if from.id != top.shards[top.ring.LookupIndex(key)].id && !h.isDone(key) {
			return fc.Refuse(key, "it moves in the change being migrated (%s)", fc.Known())
		}
	}
	s := top.shards[top.ring.LookupIndex(key)]
	return fc.CheckServer(ctx, key, s.id, s.Shard, func(ctx context.Context) ([]byte, error) {
		return s.client.Get(ctx, beacons.Key).Bytes()
	})
}

// newFollower joins reg and reads its config (member.New); the caller
// builds the first topology from it and then starts the follower.
func newFollower(c *client, reg registry.Registry, fo *FleetOptions) (*member.Follower, registry.Config, error) {
	o := member.Options{Invalid: ErrInvalidOptions}
	if fo != nil {
		o.MemberID, o.StartTimeout, o.HoldTimeout = fo.MemberID, fo.StartTimeout, fo.HoldTimeout
	}
	return member.New(fleetHost{c}, reg, o)
}

// fleetHost is the client's side of its follower (member.Host).
type fleetHost struct{ c *client }

func (h fleetHost) Apply(ctx context.Context, prev, cfg registry.Config) (bool, error) {
	c := h.c
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return false, nil
	}
	old := c.top.Load()
	next, after, err := c.buildFleet(old, prev, cfg, c.fleet.HoldTimeout())
	if err != nil {
		c.mu.Unlock()
		return false, err
	}
	next.fence = old.fence.Follow(cfg)
	next.admit = old.admit // a regime's admission opens once the previous regime has drained, whatever the ring
	if next.flight != old.flight {
		// The commands of the replaced ring belong to the regime they were
		// checked under: a change of regime from now on must wait for them
		// too before it admits connections (a command checked before a
		// pause, sent after the process caught up, is refused a new one).
		next.flight.prev.Store(old.flight)
	}
	c.top.Store(next.seal())
	if old.hold != nil {
		old.hold.release()
	}
	c.mu.Unlock()
	after()
	c.pubsub.Follow(ctx) // subscribed on every ring of the phase before acknowledging it
	if next.flight != old.flight {
		waitIdle(ctx, old.flight)
		next.flight.prev.CompareAndSwap(old.flight, nil) // drained: the chain stays short
	}
	return true, nil
}

func (h fleetHost) Regime(ctx context.Context, change func(*member.Fence) (*member.Fence, bool)) (drain, open func()) {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, nil
	}
	old := c.top.Load()
	fc, ok := change(old.fence)
	if !ok {
		return nil, nil
	}
	next := *old
	next.fence = fc
	next.flight = &inflight{}
	next.flight.prev.Store(old.flight)
	next.admit = member.NewAdmission()
	c.top.Store(next.seal())
	return func() {
		waitIdle(ctx, old.flight)
		next.flight.prev.Store(nil)
		next.admit.Open()
	}, next.admit.Open
}

func (h fleetHost) Fence() *member.Fence { return h.c.top.Load().fence }

// Beacons reads them on connections of their own with the client's
// settings and no fleet admission: the Root of its options that the
// driver uses (internal/fleetseam, filled in by fleetseam.go).
func (h fleetHost) Beacons(ctx context.Context, cfg registry.Config) ([]beacons.Found[string], error) {
	r := fleetseam.For[Options, Client]().Options(&h.c.cfg.opt)
	servers, err := fleetseam.Servers(r, cfg)
	if err != nil {
		return nil, err
	}
	found, err := beacons.Read(ctx, servers, r.Dial)
	out := make([]beacons.Found[string], len(found))
	for i, b := range found {
		out[i] = beacons.Found[string]{Server: b.Server.String(), Config: b.Config}
	}
	return out, err
}

func (h fleetHost) Parse(doc []byte) (member.Ring, error) {
	_, r, err := parseRingDoc(doc, h.c.cfg.opt.ringConfig())
	return r, err
}

func (h fleetHost) Share(ctx context.Context, g *singleflight.Group, key string, fn func(context.Context) (any, error)) (any, error) {
	v, _, err := h.c.flights.Do(ctx, g, key, handoffTimeout, fn)
	return v, err
}

// FleetStatus reports how the client follows its registry; ok is false
// when it has none (Options.Registry).
func (c *client) FleetStatus() (st FleetStatus, ok bool) {
	if c.fleet == nil {
		return FleetStatus{}, false
	}
	return FleetStatus(c.fleet.Status()), true
}

// admit is the OnConnect of every command connection of a fleet process
// to the server id (dial): member.Follower.Admit, checked against the
// newest topology's fence and admission.
func (c *client) admit(ctx context.Context, cn *redis.Conn, id string) error {
	f := c.fleet
	if f == nil { // the first topology's backends are built before c.fleet is set; nothing dials then
		return nil
	}
	return f.Admit(ctx, cn, id, func(ctx context.Context) (*member.Fence, bool) {
		top := c.top.Load()
		ok := top.admit.Wait(ctx)
		if now := c.top.Load(); ok && now != top { // replaced while it waited: check the newest
			top = now
			ok = top.admit.Wait(ctx)
		}
		return top.fence, ok
	})
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
