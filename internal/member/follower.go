package member

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/internal/beacons"
	"github.com/redshard/redshard/internal/connname"
	"github.com/redshard/redshard/internal/lease"
	"github.com/redshard/redshard/registry"
)

var (
	// ErrFenced is the root's redshard.ErrFenced (see its doc).
	ErrFenced = errors.New("redshard: fenced from the fleet's membership change")
	// ErrRegistryBehind is the root's redshard.ErrRegistryBehind (see its
	// doc).
	ErrRegistryBehind = errors.New("redshard: the registry is behind the fleet")
)

const (
	// DefaultStart is Options.StartTimeout's default.
	DefaultStart = 10 * time.Second
	// fenceMargin is the part of the lease a process keeps in hand: it
	// fences itself this much before the registry could drop it. Fenced
	// costs little (a beacon read per shard and quarter second), and the
	// margin is what a command already on its way may still take.
	fenceMargin = 50 // percent
)

// Host is the root's side of the seam: the client a Follower keeps on its
// registry's config. Its methods are safe for concurrent use.
type Host interface {
	// Apply moves the client to cfg, after prev (what it followed): it
	// publishes cfg's topology, whose fence is the current one's
	// Fence.Follow(cfg), and returns once no command routed on the
	// replaced topology is running (or ctx ends). It reports false, with
	// no error, when the client is closed; an error when cfg cannot be
	// followed (nothing published then).
	Apply(ctx context.Context, prev, cfg registry.Config) (bool, error)
	// Regime publishes a new regime (docs/membership.md, "Fencing at the
	// data"): a copy of the current topology whose fence is change's
	// result, with a new in-flight count and a closed Admission. change is
	// called under the lock that serialises the client's topologies, with
	// the current fence; it reports false to publish nothing. Regime
	// returns nil funcs when nothing was published (the client is closed,
	// or change said so); otherwise drain, which waits until the previous
	// regime's commands have ended (or ctx ends) and then opens the
	// admission, and open, which opens it at once.
	Regime(ctx context.Context, change func(cur *Fence) (*Fence, bool)) (drain, open func())
	// Fence returns the current topology's fence (nil: trusted).
	Fence() *Fence
	// Beacons reads the beacon of every server of cfg's documents, each on
	// a connection of its own with the client's connection settings and
	// no admission (beacons.Read), within ctx. Server is how a message
	// names the server.
	Beacons(ctx context.Context, cfg registry.Config) ([]beacons.Found[string], error)
	// Parse reads a registry document as the client builds its rings.
	Parse(doc []byte) (Ring, error)
	// Share runs fn once for the callers that ask for key in g at the
	// same time, detached from any one caller's cancellation and bounded
	// by the client's own deadline for a shared call; the client's Close
	// cancels it.
	Share(ctx context.Context, g *singleflight.Group, key string, fn func(context.Context) (any, error)) (any, error)
}

// Options are what a Follower is made with (the root's FleetOptions, and
// the errors it wraps).
type Options struct {
	MemberID     string        // "": host/pid/random
	StartTimeout time.Duration // 0: DefaultStart
	HoldTimeout  time.Duration // 0: the lease and four beacons.Fresh
	// Invalid is the error a start refusal wraps: the registry holds no
	// config, or another live process has the member id.
	Invalid error
}

// Follower keeps a client on its registry's config.
type Follower struct {
	host Host
	reg  registry.Registry
	ttl  time.Duration
	me   registry.Member // ID, Host, PID, Started

	applyMu sync.Mutex      // serialises apply
	applied registry.Config // what the topology follows; guarded by applyMu

	acked atomic.Pointer[acked] // what heartbeats report
	kick  chan struct{}         // a heartbeat now, please

	// lease is fresh while the last heartbeat that counts was sent less
	// than half a lease ago (fenceMargin): read on the command path and
	// by the admission of connections (Admit).
	lease *lease.Lease
	// connName names this process's command connections: its member id
	// and incarnation (connname.Name).
	connName string
	// holdTimeout bounds a command held in Prepare (Options.HoldTimeout).
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
	stopping bool // set by Stop: spawn starts nothing; guarded by mu

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New joins the registry and reads its config. The caller builds the
// first topology from it (with StartFence's fence) and then calls Start,
// or Stop if it cannot.
func New(host Host, reg registry.Registry, o Options) (*Follower, registry.Config, error) {
	f := &Follower{host: host, reg: reg, ttl: reg.MemberTTL(), kick: make(chan struct{}, 1)}
	f.lease = lease.New(f.ttl * (100 - fenceMargin) / 100)
	timeout := DefaultStart
	if o.StartTimeout > 0 {
		timeout = o.StartTimeout
	}
	f.holdTimeout = f.ttl + 4*beacons.Fresh
	if o.HoldTimeout > 0 {
		f.holdTimeout = o.HoldTimeout
	}
	hostname, _ := os.Hostname()
	f.me = registry.Member{Host: hostname, PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Millisecond)}
	if o.MemberID != "" {
		f.me.ID = o.MemberID
	} else {
		var b [4]byte
		_, _ = rand.Read(b[:])
		f.me.ID = fmt.Sprintf("%s/%d/%s", hostname, f.me.PID, hex.EncodeToString(b[:]))
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
				o.Invalid, f.me.ID, err)
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
		err = fmt.Errorf("%w: Registry: it holds no config yet (publish one with redshard apply)", o.Invalid)
	}
	if err != nil {
		f.Stop()
		return nil, cfg, err
	}
	return f, cfg, nil
}

// Lease is the process's lease, read on the command path: a process whose
// lease is not fresh fences itself (FenceNow) before its command.
func (f *Follower) Lease() *lease.Lease { return f.lease }

// HoldTimeout bounds a command held in Prepare.
func (f *Follower) HoldTimeout() time.Duration { return f.holdTimeout }

// acked is what a process has acknowledged: a config's version and ID.
type acked struct {
	registry.Version
	id string
}

// Start starts following, from first (the config the first topology
// follows): a watcher that applies every newer config, and the heartbeat
// that acknowledges them and fences the client when it fails for a lease.
func (f *Follower) Start(first registry.Config) error {
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
	f.kickNow()
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

// Stop ends following and leaves the fleet (best effort). It waits for
// the Follower's goroutines.
func (f *Follower) Stop() {
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
	_ = f.reg.Leave(ctx, f.me) // its own incarnation's entry only
}

func (f *Follower) kickNow() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// setErr records err as the last error following the registry, unless
// the process lost its member id: that error stays.
func (f *Follower) setErr(err error) {
	f.mu.Lock()
	if f.lost == nil {
		f.err = err
	}
	f.mu.Unlock()
}

// idLost returns why the process lost its member id, nil if it has not.
func (f *Follower) idLost() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}

// loseID handles a heartbeat refused with registry.ErrMemberIDInUse:
// another live process is this member now (this one was paused past its
// lease and its id was taken). The process fences itself for good, so that
// it never acknowledges a phase under an id it lost: the driver no longer
// waits for it, and only a fenced process may fall behind.
func (f *Follower) loseID(refused error) {
	err := fmt.Errorf("redshard: member id %q was taken by another live process while this one could not heartbeat; it stays fenced and no longer heartbeats (restart it with another FleetOptions.MemberID): %w",
		f.me.ID, refused)
	f.mu.Lock()
	if f.lost == nil {
		f.lost, f.err = err, err
	}
	f.mu.Unlock()
	f.fenceFor(err)
}

func (f *Follower) getErr() error {
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

// registryBehind reports whether err says the registry is behind.
func registryBehind(err error) bool { return errors.Is(err, ErrRegistryBehind) }

// heartbeats reports the acknowledged version every quarter lease and on
// every kick. A heartbeat renews the lease only if the lease was still
// fresh when it was sent: one sent later may come after the fleet dropped
// this process and went on without it, so the process fences itself (if a
// command has not already), catches up with the registry, and ends the
// fence only with a heartbeat sent after that (unfence). Nothing here is
// needed for the fence to hold: the command path reads the lease itself.
func (f *Follower) heartbeats() {
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
		f.FenceNow()
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
func (f *Follower) late(sent int64) bool { return lease.Now()-sent > int64(f.ttl/4) }

// stillCurrent reads the registry's config again after the heartbeat that
// would end a fence, and reports whether it is still the one the client
// follows. The heartbeat put the process back among the members the driver
// waits for, but a driver that read the members before it arrived may have
// published a phase without it after catchUp read the config; such a phase
// is seen here, and the fence stays until the process has caught up with
// it (docs/membership.md, "Fencing at the data").
func (f *Follower) stillCurrent() bool {
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
func (f *Follower) readRegistry() (cfg registry.Config, ok bool) {
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
	if beacons.Behind(cfg, applied) {
		f.setErr(fmt.Errorf("%w: it holds %s (%s), this process follows %s (%s); run redshard apply to restore it from the servers' beacons",
			ErrRegistryBehind, cfg.Version(), beacons.OrNone(cfg.ID()), applied.Version(), beacons.OrNone(applied.ID())))
		return cfg, false
	}
	return cfg, true
}

// poll reads the registry back: it applies a newer config (in the
// background, as the watcher would), and reports whether the registry is
// behind the client (ErrRegistryBehind); a failed read is not.
func (f *Follower) poll() (behind bool) {
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

// heartbeat sends one heartbeat; it reports success.
func (f *Follower) heartbeat() bool {
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

// MoveDeadline is when a move of this process must have sent its last
// step: when the process fences itself. Past it the fleet may drop the
// process and finish the change without it, deleting the settled sets
// that would refuse a late settle; the fence margin is left for a step on
// its way to land.
func (f *Follower) MoveDeadline() time.Time {
	return time.Now().Add(f.lease.Remaining())
}

// catchUp reads the registry's config and applies it; it reports whether
// the client now follows it.
func (f *Follower) catchUp() bool {
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
	// servers' beacons agree with it (beaconsAhead).
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
func (f *Follower) isFenced() bool { return f.host.Fence() != nil }

// apply moves the client to cfg when it is newer than what it follows,
// waits until no command routed on the replaced topology is running, and
// acknowledges cfg.
func (f *Follower) apply(cfg registry.Config) {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if !f.applied.Version().Less(cfg.Version()) {
		return
	}
	ok, err := f.host.Apply(f.ctx, f.applied, cfg)
	if err != nil {
		f.setErr(fmt.Errorf("redshard: applying %s: %w", cfg.Version(), err))
		return
	}
	if !ok {
		return // closed
	}
	f.applied = cfg
	f.acked.Store(&acked{cfg.Version(), cfg.ID()})
	f.setErr(nil)
	f.kickNow()
}

// FenceNow fences the process, unless it is already: its commands from now
// on are checked as a fenced process's.
func (f *Follower) FenceNow() { f.fenceFor(nil) }

// fenceFor is FenceNow with the error that fences the process, which the
// commands it refuses wrap; nil: the lease ran out. A process already
// fenced is fenced again with cause when cause is graver (fenceRank): the
// registry is behind the fleet (ErrRegistryBehind), or the process lost its
// member id, so that its refusals say so.
func (f *Follower) fenceFor(cause error) {
	f.newRegime(func(cur *Fence) (*Fence, bool) {
		if cur != nil {
			if fenceRank(cause) <= fenceRank(cur.cause) {
				return nil, false
			}
			fc := *cur
			fc.cause, fc.reason = cause, cause.Error()
			return &fc, true
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
		return &Fence{f: f, known: a.Version, knownID: a.id, cache: &beaconCache{}, reason: reason, cause: cause}, true
	})
}

// refence starts a new fenced regime: the fence learnt a beacon that
// commands already checked did not know.
func (f *Follower) refence() {
	f.newRegime(func(cur *Fence) (*Fence, bool) { return cur, cur != nil })
}

// unfence ends the fence: the process has caught up, and the heartbeat
// sent at the lease reading sent succeeded.
func (f *Follower) unfence(sent int64) {
	if f.idLost() != nil {
		return // fenced for good
	}
	f.lease.Renew(sent) // first: the trusted topology's commands must find the lease fresh
	f.newRegime(func(cur *Fence) (*Fence, bool) { return nil, cur != nil })
}

// newRegime publishes a new regime whose fence is change's (Host.Regime)
// and opens its admission once the current regime's commands have ended.
func (f *Follower) newRegime(change func(*Fence) (*Fence, bool)) {
	drain, open := f.host.Regime(f.ctx, change)
	if drain == nil {
		return
	}
	if !f.spawn(drain) {
		open() // stopping: nothing is admitted any more anyway
	}
	f.kickNow()
}

// spawn runs fn in a goroutine the follower waits for when it stops; it
// reports false, running nothing, once the follower is stopping.
func (f *Follower) spawn(fn func()) bool {
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

// Status is what a client following a registry reports of itself (the
// root's FleetStatus, field for field).
type Status struct {
	Member        registry.Member
	Version       registry.Version
	Fenced        bool
	LastHeartbeat time.Time
	Err           error
}

// Status reports how the client follows its registry.
func (f *Follower) Status() (st Status) {
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
	return st
}
