package redshard

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/redshard/redshard/internal/parallel"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/internal/beacons"
	"github.com/redshard/redshard/internal/connname"
	"github.com/redshard/redshard/internal/lease"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/ring"
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

const (
	// maxFleetCopies stands for the shard count when HotKeys.Copies is
	// checked before the registry has named the shards.
	maxFleetCopies = 64
	// defaultFleetStart is FleetOptions.StartTimeout's default.
	defaultFleetStart = 10 * time.Second
	// beaconKey holds, on every server of a change, the registry config
	// the driver last published (internal/beacons).
	beaconKey = beacons.Key
	// beaconFresh is how long a fenced process trusts a beacon it read
	// (internal/beacons).
	beaconFresh = beacons.Fresh
	// fenceMargin is the part of the lease a process keeps in hand: it
	// fences itself this much before the registry could drop it. Fenced
	// costs little (a beacon read per shard and quarter second), and the
	// margin is what a command already on its way may still take.
	fenceMargin = 50 // percent
)

// errReroute is returned by a command held in Prepare once the process has
// left that phase: it runs again on the new topology. It only reaches a
// caller from inside a transaction (Watch), where it cannot.
var errReroute = fmt.Errorf("%w: the fleet's change moved on while the command waited; run it again", ErrHandoffInProgress)

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
		if err := fc.check(ctx, top, key); err != nil {
			return err
		}
	}
	if h := top.hold; h != nil && h.moving(top, key) {
		return h.wait(ctx, key)
	}
	return nil
}

// ringIDs is a ring with the identity of each index's server.
type ringIDs struct {
	r   *ring.Ring
	ids []string
}

func (ri ringIDs) owner(key string) string { return ri.ids[ri.r.LookupIndex(key)] }

// parseRingDoc reads a registry document (LoadConfig's JSON): its shards
// and ring. Only "shards", "vnodes_per_weight" and "ring_recipe" are used:
// def.VnodesPerWeight is the client's value for a document that names
// none; the recipe is the document's alone (none: Recipe1). A Sentinel
// shard's Failover names the master and the Sentinels only: a caller that
// dials the shards gives them its connection settings first
// (Options.withConnection).
func parseRingDoc(doc []byte, def ring.Config) ([]Shard, ringIDs, error) {
	var fc fileConfig
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, ringIDs{}, fmt.Errorf("redshard: registry config: %w", jsonError(doc, err))
	}
	shards := make([]Shard, len(fc.Shards))
	for i, s := range fc.Shards {
		if err := s.check(i); err != nil {
			return nil, ringIDs{}, fmt.Errorf("redshard: registry config: %w", err)
		}
		shards[i] = s.shard()
	}
	rc := def
	if fc.VnodesPerWeight != 0 {
		rc.VnodesPerWeight = fc.VnodesPerWeight
	}
	rc.Recipe = fc.RingRecipe
	valid, r, err := resolveShards(shards, rc)
	if err != nil {
		return nil, ringIDs{}, fmt.Errorf("redshard: registry config: %w", err)
	}
	return valid, ringIDs{r, identities(r, valid)}, nil
}

// identities lists the server identity of each of r's indexes.
func identities(r *ring.Ring, shards []Shard) []string {
	byName := make(map[string]string, len(shards))
	for _, s := range shards {
		byName[s.Name] = s.identity()
	}
	nodes := r.Nodes()
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = byName[n.Name]
	}
	return ids
}

// follower keeps a client on its registry's config.
type follower struct {
	c   *client
	reg registry.Registry
	ttl time.Duration
	me  registry.Member // ID, Host, PID, Started

	applyMu sync.Mutex      // serialises apply
	applied registry.Config // what the topology follows; guarded by applyMu

	acked atomic.Pointer[acked] // what heartbeats report
	kick  chan struct{}         // a heartbeat now, please

	// lease is fresh while the last heartbeat that counts was sent less
	// than half a lease ago (fenceMargin): read on the command path
	// (Client.enter) and by the admission of connections (fleet_fence.go).
	lease *lease.Lease
	// connName names this process's command connections: its member id
	// and incarnation (connname.Name).
	connName string
	// holdTimeout bounds a command held in Prepare (FleetOptions.HoldTimeout).
	holdTimeout time.Duration

	mu     sync.Mutex
	sentOK time.Time // when the last successful heartbeat was sent (wall clock, for status); guarded by mu
	err    error     // the last error following the registry; guarded by mu
	// lost, once set, says why this process lost its member id to
	// another live process (a heartbeat refused with
	// registry.ErrMemberIDInUse): it stays fenced for good, sends no
	// heartbeat and does not leave (the entry is the other process's),
	// and err is lost from then on. Guarded by mu.
	lost     error
	stopping bool // set by stop: spawn starts nothing; guarded by mu

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newFollower reads the registry's config. The caller builds the first
// topology from it (build) and then calls start.
func newFollower(c *client, reg registry.Registry, fo *FleetOptions) (*follower, registry.Config, error) {
	f := &follower{c: c, reg: reg, ttl: reg.MemberTTL(), kick: make(chan struct{}, 1)}
	f.lease = lease.New(f.ttl * (100 - fenceMargin) / 100)
	timeout := defaultFleetStart
	if fo != nil && fo.StartTimeout > 0 {
		timeout = fo.StartTimeout
	}
	f.holdTimeout = f.ttl + 4*beaconFresh
	if fo != nil && fo.HoldTimeout > 0 {
		f.holdTimeout = fo.HoldTimeout
	}
	host, _ := os.Hostname()
	f.me = registry.Member{Host: host, PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Millisecond)}
	if fo != nil && fo.MemberID != "" {
		f.me.ID = fo.MemberID
	} else {
		var b [4]byte
		_, _ = rand.Read(b[:])
		f.me.ID = fmt.Sprintf("%s/%d/%s", host, f.me.PID, hex.EncodeToString(b[:]))
	}
	f.me.Incarnation = connname.NewIncarnation()
	f.connName = connname.Name(f.me.ID, f.me.Incarnation)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Join before reading: from now on a driver counts this process as
	// late (it has acknowledged nothing), so no phase can be published
	// past the one read below before this process has acknowledged it.
	// The lease counts from the join's sending.
	joined := lease.Now()
	if err := reg.Heartbeat(ctx, f.me); err != nil {
		if errors.Is(err, registry.ErrMemberIDInUse) {
			return nil, registry.Config{}, fmt.Errorf("%w: member id %q is in use by a live process; pick another FleetOptions.MemberID: %w",
				ErrInvalidOptions, f.me.ID, err)
		}
		return nil, registry.Config{}, fmt.Errorf("redshard: joining the registry: %w", err)
	}
	f.lease.Renew(joined)
	f.ctx, f.cancel = context.WithCancel(context.Background())
	cfg, err := reg.Get(ctx)
	switch {
	case err != nil:
		err = fmt.Errorf("redshard: reading the registry: %w", err)
	case cfg.Version() == (registry.Version{}):
		err = fmt.Errorf("%w: Registry: it holds no config yet (publish one with redshard apply)", ErrInvalidOptions)
	}
	if err != nil {
		f.stop()
		return nil, cfg, err
	}
	return f, cfg, nil
}

// acked is what a process has acknowledged: a config's version and ID.
type acked struct {
	registry.Version
	id string
}

// start registers the member and starts following: a watcher that applies
// every newer config, and the heartbeat that acknowledges them and fences
// the client when it fails for a lease.
func (f *follower) start(first registry.Config) error {
	f.applied = first
	f.acked.Store(&acked{first.Version(), first.ID()})
	ch, err := f.reg.Watch(f.ctx)
	if err != nil {
		f.cancel()
		return fmt.Errorf("redshard: watching the registry: %w", err)
	}
	f.mu.Lock()
	f.sentOK = time.Now() // for status: the join, which acknowledged nothing
	f.mu.Unlock()
	// Acknowledge first at once: the join reported nothing, and a driver
	// waits for this process until it does.
	select {
	case f.kick <- struct{}{}:
	default:
	}
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		for cfg := range ch {
			f.apply(cfg)
		}
	}()
	go func() {
		defer f.wg.Done()
		f.heartbeats()
	}()
	return nil
}

// stop ends following and leaves the fleet (best effort).
func (f *follower) stop() {
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
	if f.idLost() != nil {
		return // the entry is another process's
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = f.reg.Leave(ctx, f.me.ID)
}

// setErr records err as the last error following the registry, unless
// the process lost its member id: that error stays.
func (f *follower) setErr(err error) {
	f.mu.Lock()
	if f.lost == nil {
		f.err = err
	}
	f.mu.Unlock()
}

// idLost returns why the process lost its member id, nil if it has not.
func (f *follower) idLost() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}

// loseID handles a heartbeat refused with registry.ErrMemberIDInUse:
// another live process is this member now (this one was paused past its
// lease and its id was taken). The process fences itself for good, so that
// it never acknowledges a phase under an id it lost: the driver no longer
// waits for it, and only a fenced process may fall behind.
func (f *follower) loseID(refused error) {
	err := fmt.Errorf("redshard: member id %q was taken by another live process while this one could not heartbeat; it stays fenced and no longer heartbeats (restart it with another FleetOptions.MemberID): %w",
		f.me.ID, refused)
	f.mu.Lock()
	if f.lost == nil {
		f.lost, f.err = err, err
	}
	f.mu.Unlock()
	f.fenceFor(err)
}

func (f *follower) getErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// fenceRank orders the causes of a fence: a fence is fenced again with a
// cause of a higher rank, so that its refusals say the gravest. A lost
// member id (for good) ranks above a registry behind the fleet, which
// ranks above the rest (a lease that ran out, nil).
func fenceRank(cause error) int {
	switch {
	case errors.Is(cause, registry.ErrMemberIDInUse):
		return 2
	case registryBehind(cause):
		return 1
	}
	return 0
}

// heartbeats reports the acknowledged version every quarter lease and on
// every kick. A heartbeat renews the lease only if the lease was still
// fresh when it was sent: one sent later may come after the fleet dropped
// this process and went on without it, so the process fences itself (if a
// command has not already), catches up with the registry, and ends the
// fence only with a heartbeat sent after that (unfence). Nothing here is
// needed for the fence to hold: the command path reads the lease itself.
func (f *follower) heartbeats() {
	tick := time.NewTicker(f.ttl / 4)
	defer tick.Stop()
	beats := 0
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-tick.C:
		case <-f.kick:
		}
		if f.idLost() != nil {
			continue // fenced for good; the watcher still follows the registry
		}
		sent := lease.Now()
		if !f.heartbeat() || f.late(sent) {
			continue
		}
		if f.lease.FreshAt(sent) && !f.isFenced() {
			f.lease.Renew(sent)
			// Once a lease, the registry is read back: one that lost its
			// data says nothing through Watch (it only delivers newer
			// configs), so this is where the process learns of it; and a
			// newer config that a wedged watch never delivered is applied
			// from here.
			if beats++; beats%4 != 0 || !f.poll() {
				continue
			}
			f.fenceFor(f.getErr())
		}
		f.fenceNow()
		if !f.catchUp() {
			continue
		}
		sent = lease.Now()
		if f.heartbeat() && !f.late(sent) && f.stillCurrent() {
			f.unfence(sent)
		}
	}
}

// late reports whether a heartbeat sent at sent returned more than a
// quarter lease later. Such a heartbeat renews nothing, as if it had
// failed: the argument for the lease (docs/membership.md, "Fencing at the
// data") needs every counted heartbeat to have reached the registry within
// a quarter lease of its send, and this holds it on the process's own
// clock whether or not the registry's client honours deadlines.
func (f *follower) late(sent int64) bool { return lease.Now()-sent > int64(f.ttl/4) }

// stillCurrent reads the registry's config again after the heartbeat that
// would end a fence, and reports whether it is still the one the client
// follows. The heartbeat put the process back among the members the driver
// waits for, but a driver that read the members before it arrived may have
// published a phase without it after catchUp read the config; such a phase
// is seen here, and the fence stays until the process has caught up with
// it (docs/membership.md, "Fencing at the data").
func (f *follower) stillCurrent() bool {
	cfg, ok := f.readRegistry()
	if !ok {
		return false
	}
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	return !f.applied.Version().Less(cfg.Version())
}

// readRegistry reads the registry's config; ok is false, with the error
// recorded, when it cannot be read or is behind what the client follows.
func (f *follower) readRegistry() (cfg registry.Config, ok bool) {
	ctx, cancel := context.WithTimeout(f.ctx, f.ttl/4)
	defer cancel()
	cfg, err := f.reg.Get(ctx)
	if err != nil {
		f.setErr(fmt.Errorf("redshard: reading the registry: %w", err))
		return cfg, false
	}
	f.applyMu.Lock()
	applied := f.applied
	f.applyMu.Unlock()
	if behind(cfg, applied) {
		f.setErr(fmt.Errorf("%w: it holds %s (%s), this process follows %s (%s); run redshard apply to restore it from the servers' beacons",
			ErrRegistryBehind, cfg.Version(), orNone(cfg.ID()), applied.Version(), orNone(applied.ID())))
		return cfg, false
	}
	return cfg, true
}

// poll reads the registry back: it applies a newer config (in the
// background, as the watcher would), and reports whether the registry is
// behind the client (ErrRegistryBehind); a failed read is not.
func (f *follower) poll() (behind bool) {
	cfg, ok := f.readRegistry()
	if !ok {
		return errors.Is(f.getErr(), ErrRegistryBehind)
	}
	f.applyMu.Lock()
	newer := f.applied.Version().Less(cfg.Version())
	f.applyMu.Unlock()
	if newer {
		f.spawn(func() { f.apply(cfg) })
	}
	return false
}

// behind reports whether the registry's cfg is behind applied, what a
// client follows: older, or the same version of another config.
func behind(cfg, applied registry.Config) bool { return beacons.Behind(cfg, applied) }

func orNone(id string) string {
	if id == "" {
		return "none"
	}
	return id
}

// heartbeat sends one heartbeat; it reports success.
func (f *follower) heartbeat() bool {
	m := f.me
	a := f.acked.Load()
	m.Epoch, m.Phase, m.Config, m.Fenced = a.Epoch, a.Phase, a.id, f.isFenced() || !f.lease.Fresh()
	sent := time.Now()
	ctx, cancel := context.WithTimeout(f.ctx, f.ttl/4)
	defer cancel()
	if err := f.reg.Heartbeat(ctx, m); err != nil {
		if errors.Is(err, registry.ErrMemberIDInUse) {
			f.loseID(err)
			return false
		}
		f.setErr(fmt.Errorf("redshard: heartbeat: %w", err))
		return false
	}
	f.mu.Lock()
	if sent.After(f.sentOK) {
		f.sentOK = sent
	}
	f.mu.Unlock()
	return true
}

// moveDeadline is when a move of this process must have sent its last
// step: when the process fences itself. Past it the fleet may drop the
// process and finish the change without it, deleting the settled sets
// that would refuse a late settle; the fence margin is left for a step on
// its way to land.
func (f *follower) moveDeadline() time.Time {
	return time.Now().Add(f.lease.Remaining())
}

// moveContext bounds a move (handoff or Rebalance) by moveDeadline in a
// fleet process.
func (c *client) moveContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.fleet == nil {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, c.fleet.moveDeadline())
}

// catchUp reads the registry's config and applies it; it reports whether
// the client now follows it.
func (f *follower) catchUp() bool {
	cfg, ok := f.readRegistry()
	if !ok {
		return false
	}
	f.apply(cfg)
	f.applyMu.Lock()
	applied := f.applied
	f.applyMu.Unlock()
	if applied.Version().Less(cfg.Version()) {
		return false
	}
	// The registry may be behind the fleet though not behind this process
	// (a process that started on it): the fence ends only once the
	// servers' beacons agree with it (fleet_beacons.go).
	if err := f.beaconsAhead(f.ctx, applied); err != nil {
		f.setErr(err)
		if registryBehind(err) {
			f.fenceFor(err)
		}
		return false
	}
	f.setErr(nil)
	return true
}

// isFenced reports whether the current topology carries a fence: the
// topology is the one record of it.
func (f *follower) isFenced() bool { return f.c.top.Load().fence != nil }

// apply moves the client to cfg when it is newer than what it follows,
// waits until no command routed on the replaced topology is running, and
// acknowledges cfg.
func (f *follower) apply(cfg registry.Config) {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if !f.applied.Version().Less(cfg.Version()) {
		return
	}
	c := f.c
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return
	}
	old := c.top.Load()
	next, after, err := c.buildFleet(old, f.applied, cfg, f.holdTimeout)
	if err != nil {
		c.mu.Unlock()
		f.setErr(fmt.Errorf("redshard: applying %s: %w", cfg.Version(), err))
		return
	}
	next.fence = nil
	if fc := old.fence; fc != nil {
		next.fence = &fence{f: f, known: cfg.Version(), knownID: cfg.ID(), rc: fc.rc, reason: fc.reason, cause: fc.cause, cache: fc.cache}
	}
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
		close(old.hold.released)
	}
	c.mu.Unlock()
	after()
	c.pubsub.Follow(f.ctx) // subscribed on every ring of the phase before acknowledging it
	if next.flight != old.flight {
		waitIdle(f.ctx, old.flight)
		next.flight.prev.CompareAndSwap(old.flight, nil) // drained: the chain stays short
	}
	f.applied = cfg
	f.acked.Store(&acked{cfg.Version(), cfg.ID()})
	f.setErr(nil)
	select {
	case f.kick <- struct{}{}:
	default:
	}
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
	var r0 ringIDs
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
		next.ring = r1.r
		next.shards = c.buildShards(r1.r, s1, reuse)
	case registry.Prepare:
		next.ring = r0.r
		next.shards = c.buildShards(r0.r, s0, reuse)
		nt := &topology{epoch: next.epoch, ring: r1.r, flight: next.flight}
		nt.shards = c.buildShards(r1.r, s1, &topology{shards: append(reuse.shards, next.shards...)})
		next.hold = &hold{epoch: cfg.Epoch, next: r1.r, nextIDs: r1.ids, nextTop: nt,
			released: make(chan struct{}), timeout: holdTimeout}
	case registry.Migrate, registry.Commit:
		if sameChange && prev.Phase == registry.Migrate && old.handoff != nil {
			// Commit after Migrate: the same routing, no new move. The
			// moves already running end before Commit is acknowledged:
			// once it is, Stable may come and the settled sets that
			// refuse a late settle be deleted.
			cp := *old
			cp.handoff.committed.Store(true)
			return &cp, cp.handoff.closeMoves, nil
		}
		from := old
		if !(sameChange && prev.Phase == registry.Prepare) {
			// Joined or caught up mid-change: the previous ring's
			// commands are old's.
			from = &topology{epoch: old.epoch, ring: r0.r, flight: old.flight}
			from.shards = c.buildShards(r0.r, s0, reuse)
		}
		pool := &topology{shards: append(reuse.shards, from.shards...)}
		next.ring = r1.r
		next.shards = c.buildShards(r1.r, s1, pool)
		for _, s := range from.shards {
			if !slices.ContainsFunc(next.shards, func(n *shard) bool { return n.backend == s.backend }) &&
				!slices.ContainsFunc(next.orphans, func(n *shard) bool { return n.backend == s.backend }) {
				next.orphans = append(next.orphans, s)
			}
		}
		next.handoff = &handoff{from: from, settled: settledPrefix + cfg.Change, drainTurn: make(chan struct{}, 1)}
		next.handoff.committed.Store(cfg.Phase == registry.Commit)
	default:
		return nil, nil, fmt.Errorf("unknown phase %q", cfg.Phase)
	}
	// Servers old used that next does not are retired; a change that old
	// was in and next is not has its settled sets deleted.
	gone := unusedBackends(old, next)
	var done *handoff
	if old.handoff != nil && (next.handoff == nil || next.handoff.settled != old.handoff.settled) {
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
	if t.handoff != nil {
		add(t.handoff.from.shards)
	}
	if t.hold != nil {
		add(t.hold.nextTop.shards)
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
			p.Del(dctx, h.settled)
			p.SRem(dctx, internalIndex, h.settled)
			return nil
		})
	})
}

// fence is a fenced topology's state (see the top of this file and
// fleet_fence.go).
type fence struct {
	f       *follower
	known   registry.Version // the version the topology follows
	knownID string           // and its config's ID
	rc      ring.Config      // the client's ring defaults, for the beacons' documents
	reason  string
	cause   error        // what fenced the process, if an error did (wrapped in refusals); nil: the lease
	cache   *beaconCache // shared by the fences of one fenced stretch
}

// beaconCache is what a fenced process last read of each server's beacon,
// by server identity. It is safe for concurrent use.
type beaconCache struct {
	mu sync.Mutex
	m  map[string]*beacon // guarded by mu
	// reads shares one GET of a server's beacon among the commands that
	// need it; learn never waits for it, since the GET may be dialling the
	// very connection whose admission calls learn.
	reads singleflight.Group
}

// beacon is one server's entry of a beaconCache.
type beacon struct {
	mu      sync.Mutex // guards the fields below; never held across I/O
	read    bool       // read at least once
	checked time.Time  // when the last successful read started
	cfg     registry.Config
	rings   []ringIDs // cfg's documents (Doc, and PrevDoc in flight)
}

// beaconView is what a command is checked against: one reading of a beacon.
type beaconView struct {
	cfg   registry.Config
	rings []ringIDs
}

func (bc *beaconCache) entry(id string) *beacon {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.m == nil {
		bc.m = map[string]*beacon{}
	}
	b := bc.m[id]
	if b == nil {
		b = &beacon{}
		bc.m[id] = b
	}
	return b
}

// learn records data (a beacon's value; nil: none) as read from server id
// by a read that started at start, and reports whether it differs from
// what was read before.
func (bc *beaconCache) learn(id string, start time.Time, data []byte, rc ring.Config) (changed bool, err error) {
	b := bc.entry(id)
	b.mu.Lock()
	defer b.mu.Unlock()
	_, changed, err = b.set(start, data, rc)
	return changed, err
}

// set parses data into b, read at start. A reading that started before
// the one b holds is older than it and is ignored. Caller holds b.mu.
func (b *beacon) set(start time.Time, data []byte, rc ring.Config) (beaconView, bool, error) {
	if b.read && start.Before(b.checked) {
		return beaconView{b.cfg, b.rings}, false, nil
	}
	var cfg registry.Config
	if len(data) > 0 {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return beaconView{}, false, fmt.Errorf("beacon: %w", err)
		}
	}
	changed := b.read && (cfg.Version() != b.cfg.Version() || cfg.Change != b.cfg.Change)
	if !b.read || changed {
		var rings []ringIDs
		for _, doc := range []json.RawMessage{cfg.Doc, cfg.PrevDoc} {
			if len(doc) == 0 {
				continue
			}
			_, r, err := parseRingDoc(doc, rc)
			if err != nil {
				return beaconView{}, false, fmt.Errorf("beacon: %w", err)
			}
			rings = append(rings, r)
		}
		b.cfg, b.rings = cfg, rings
	}
	b.read, b.checked = true, start
	return beaconView{b.cfg, b.rings}, changed, nil
}

func (fc *fence) errorf(key, format string, args ...any) error {
	if fc.cause != nil {
		return fmt.Errorf("%w: key %q: %s; %w", ErrFenced, key, fmt.Sprintf(format, args...), fc.cause)
	}
	return fmt.Errorf("%w: key %q: %s; %s", ErrFenced, key, fmt.Sprintf(format, args...), fc.reason)
}

// check refuses key if a change this process knows of may be moving it,
// or if the beacon of the server it would use says a newer change moves it
// (or owns it elsewhere).
func (fc *fence) check(ctx context.Context, top *topology, key string) error {
	if h := top.hold; h != nil && h.moving(top, key) {
		return fc.errorf(key, "it moves in the change to epoch %d", h.epoch)
	}
	if h := top.handoff; h != nil && !h.committed.Load() {
		from := h.from.shards[h.from.ring.LookupIndex(key)]
		if from.id != top.shards[top.ring.LookupIndex(key)].id && !h.isDone(key) {
			return fc.errorf(key, "it moves in the change being migrated (%s)", fc.known)
		}
	}
	s := top.shards[top.ring.LookupIndex(key)]
	b, err := fc.beacon(ctx, s)
	if err != nil {
		return fc.errorf(key, "reading the beacon of shard %s: %v", s.Shard, err)
	}
	if v := b.cfg.Version(); v.Less(fc.known) || v == fc.known && b.cfg.ID() == fc.knownID {
		return nil // the beacon knows no newer config than the one this process follows
	}
	for _, r := range b.rings {
		if r.owner(key) != s.id {
			return fc.errorf(key, "shard %s says the fleet is at %s, where the key's owner is another server", s.Shard, b.cfg.Version())
		}
	}
	return nil
}

// beacon returns s's beacon, read again if the last read is older than
// beaconFresh. A beacon that changed since the last read starts a new
// fenced regime (fleet_fence.go): commands checked against the old one may
// still be running.
func (fc *fence) beacon(ctx context.Context, s *shard) (beaconView, error) {
	b := fc.cache.entry(s.id)
	b.mu.Lock()
	if b.read && time.Since(b.checked) < beaconFresh {
		v := beaconView{b.cfg, b.rings}
		b.mu.Unlock()
		return v, nil
	}
	b.mu.Unlock()
	// One read at a time per server, shared by the commands that need it
	// (Client.flights: detached from any one caller's cancellation).
	v, _, err := fc.f.c.flights.do(ctx, &fc.cache.reads, s.id, handoffTimeout, func(rctx context.Context) (any, error) {
		start := time.Now()
		data, err := s.client.Get(rctx, beaconKey).Bytes()
		if err != nil && !errors.Is(err, redis.Nil) {
			return beaconView{}, err
		}
		b.mu.Lock()
		v, changed, err := b.set(start, data, fc.rc)
		b.mu.Unlock()
		if changed {
			fc.f.refence()
		}
		return v, err
	})
	if err != nil {
		return beaconView{}, err
	}
	return v.(beaconView), nil
}

// FleetStatus is what a client following a registry reports of itself.
type FleetStatus struct {
	Member  registry.Member  // as the last heartbeat described it
	Version registry.Version // the config version the client follows
	Fenced  bool
	// LastHeartbeat is when the last successful heartbeat was sent.
	LastHeartbeat time.Time
	// Err is the last error following the registry, nil once it
	// succeeds again; except that once another live process took this
	// process's member id (registry.ErrMemberIDInUse), Err says so for
	// good, and the process stays fenced.
	Err error
}

// FleetStatus reports how the client follows its registry; ok is false
// when it has none (Options.Registry).
func (c *client) FleetStatus() (st FleetStatus, ok bool) {
	f := c.fleet
	if f == nil {
		return FleetStatus{}, false
	}
	a := f.acked.Load()
	v := a.Version
	st.Member = f.me
	st.Member.Epoch, st.Member.Phase, st.Member.Config = v.Epoch, v.Phase, a.id
	st.Version = v
	st.Fenced = f.isFenced() || !f.lease.Fresh()
	st.Member.Fenced = st.Fenced
	f.mu.Lock()
	st.LastHeartbeat, st.Err = f.sentOK, f.err
	f.mu.Unlock()
	return st, true
}
