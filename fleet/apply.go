package fleet

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/redshard/redshard/internal/parallel"
	"os"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/beacons"
	"github.com/redshard/redshard/internal/fleetseam"
	"github.com/redshard/redshard/internal/keymove"
	"github.com/redshard/redshard/registry"
)

// Defaults of ApplyOptions.
const (
	defaultApplyLockTTL = 15 * time.Second
	defaultApplyPoll    = 50 * time.Millisecond
)

// ApplyOptions configures Apply.
type ApplyOptions struct {
	// Driver names who drives the change: the owner of the registry's
	// driver lock and the change's Config.Driver. Default host/pid.
	Driver string
	// Client holds the options of the driver's own client, which follows
	// the registry like every process, writes the beacons and runs
	// Rebalance: ShardOptions, NewShardClient, VnodesPerWeight, Health.
	// RingRecipe is ignored: each document names its own.
	// Shards, Registry and Fleet are set by Apply. Default nil.
	Client *redshard.Options
	// Rebalance configures the data migration of the Migrate phase.
	Rebalance redshard.RebalanceOptions
	// LockTTL is the driver lock's ttl (renewed every third). Default 15s.
	LockTTL time.Duration
	// Poll is how often the members are read while Apply waits for their
	// acknowledgements. Default 50ms.
	Poll time.Duration
	// Progress, if set, is called from Apply's goroutine at every poll
	// while it waits, and once Rebalance starts.
	Progress func(ApplyProgress)
}

// ApplyProgress is where Apply stands while it waits.
type ApplyProgress struct {
	// Config is the published phase being acknowledged.
	Config registry.Config
	// Members are the live members; Late those not yet on Config's
	// version.
	Members, Late []registry.Member
	// Waited is how long the phase has been published.
	Waited time.Duration
	// Rebalancing is set while the data migration runs; Rebalance holds
	// its progress (Stats().Rebalance of Client tells more).
	Rebalancing bool
}

// ApplyReport says what Apply did.
type ApplyReport struct {
	From, To registry.Version
	// Unchanged is set when the registry already held the document and
	// the fleet was on it: nothing was published.
	Unchanged bool
	// Phases lists, for every phase Apply published (or resumed), how
	// long the fleet took to acknowledge it.
	Phases []PhaseReport
	// Rebalance is the data migration's report.
	Rebalance redshard.RebalanceReport
	// Restored, when set, says how Apply restored a registry that had
	// lost the fleet's config (it held an older one, or none) from the
	// servers' beacons before going on (redshard.ErrRegistryBehind).
	Restored string
	// Severed counts the connections of dropped members that Apply
	// closed before publishing a phase without them (docs/membership.md,
	// "Fencing at the data").
	Severed int
}

// PhaseReport is one phase's propagation.
type PhaseReport struct {
	Version registry.Version
	// Acked is the time from publishing the phase (or, when resumed, from
	// Apply's first look at it) to the last live member's acknowledgement.
	Acked time.Duration
	// Members counts the live members when it was acknowledged.
	Members int
}

// Apply changes a fleet's ring to doc (the JSON redshard.LoadConfig reads) through
// reg, as redshard apply does: it takes the registry's driver lock, then
// publishes the phases of the change one by one (registry package:
// Prepare, Migrate, Commit, Stable), each only once every live member has
// acknowledged the previous, writes each phase's beacon on every server
// of the change (read by processes that lost the registry), and runs the
// data migration (Rebalance) in Migrate; a migration cut short by the
// driver's lease (a loaded machine, a slow server) runs again while it
// makes progress. Interrupted (ctx, a lost lock, a failed migration), it
// leaves the change where it is; calling Apply again
// with the same doc resumes it. A change in flight to another document is
// refused: finish it first. With doc already in place Apply only waits for
// the fleet to be on it (Unchanged). A second Apply while one runs fails
// with registry.ErrLocked.
//
// The first Apply on an empty registry publishes doc as epoch 1.
func Apply(ctx context.Context, reg registry.Registry, doc json.RawMessage, opt ApplyOptions) (ApplyReport, error) {
	var rep ApplyReport
	if err := opt.Rebalance.Validate(); err != nil {
		return rep, err
	}
	base := redshard.Options{}
	if opt.Client != nil {
		base = *opt.Client
	}
	docs := seam.Options(&base)
	if _, err := docs.Parse(doc); err != nil {
		return rep, err
	}
	if opt.Driver == "" {
		host, _ := os.Hostname()
		opt.Driver = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if opt.LockTTL <= 0 {
		opt.LockTTL = defaultApplyLockTTL
	}
	if opt.Poll <= 0 {
		opt.Poll = defaultApplyPoll
	}
	lock, err := reg.Lock(ctx, opt.Driver, opt.LockTTL)
	if err != nil {
		return rep, fmt.Errorf("redshard: apply: %w", err)
	}
	defer func() { _ = lock.Unlock(context.WithoutCancel(ctx)) }()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-lock.Lost():
			cancel(fmt.Errorf("redshard: apply: %w", registry.ErrLockLost))
		case <-ctx.Done():
		}
	}()
	d := &driver{reg: reg, opt: opt, base: base, docs: docs, rep: &rep}
	err = d.run(ctx, doc)
	rep.Severed = d.severed
	if d.client != nil {
		_ = d.client.Close()
	}
	if err != nil && context.Cause(ctx) != nil && !errors.Is(err, context.Cause(ctx)) {
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return rep, err
}

// seam is the root's side of internal/fleetseam.
var seam = fleetseam.For[redshard.Options, redshard.Client]()

type driver struct {
	reg    registry.Registry
	opt    ApplyOptions
	base   redshard.Options
	docs   fleetseam.Root // base's: reads the documents, dials with base's settings and no fleet admission
	rep    *ApplyReport
	client *redshard.Client // follows the registry; made once a config exists

	beacons time.Time // when the current phase's beacons were written; zero: not yet
	severed int       // connections of dropped members severed (sever)
}

func (d *driver) run(ctx context.Context, doc json.RawMessage) error {
	cur, err := d.reg.Get(ctx)
	if err != nil {
		return fmt.Errorf("redshard: apply: reading the registry: %w", err)
	}
	// A registry that lost its data is restored first: nothing older than
	// what the fleet follows may be published (apply_restore.go).
	if cur, err = d.restore(ctx, cur, doc); err != nil {
		return err
	}
	d.rep.From = cur.Version()
	if cur.Version() == (registry.Version{}) {
		// Data already on the servers must be placed as doc says (apply_initial.go).
		if err := d.checkInitialPlacement(ctx, doc); err != nil {
			return err
		}
		next := registry.Initial(doc)
		if err := d.publish(ctx, cur, next); err != nil {
			return err
		}
		cur = next
	}
	if d.client, err = d.newClient(ctx); err != nil {
		return err
	}
	switch {
	case cur.InFlight() && !registry.SameDoc(cur.Doc, doc):
		return fmt.Errorf("%w: the change to epoch %d is in its %s phase, to another config; apply that config to finish it first",
			redshard.ErrHandoffInProgress, cur.Epoch, cur.Phase)
	case !cur.InFlight() && registry.SameDoc(cur.Doc, doc):
		d.rep.Unchanged = d.rep.From != (registry.Version{})
	case !cur.InFlight():
		// The fleet must be on cur before it may prepare the next.
		if err := d.awaitAcks(ctx, cur, time.Now(), -1); err != nil {
			return err
		}
		if err := d.carryFunctions(ctx, cur, doc); err != nil { // apply_functions.go
			return err
		}
		next := cur.Begin(doc, fleetChangeID(cur, doc), d.opt.Driver)
		if err := d.advance(ctx, cur, next); err != nil {
			return err
		}
		cur = next
	}
	published := time.Now()
	for {
		if d.beacons.IsZero() {
			// Resumed: cur's beacons were written before it was published
			// (or are the next phase's, written just before a driver
			// stopped); written again, they say what the registry says.
			if d.beacons, err = d.writeBeacons(ctx, cur); err != nil {
				return err
			}
		}
		written := d.beacons
		d.beacons = time.Time{}
		// Before keys move, processes that lost the registry must have
		// had time to see the beacon. What is left of that wait may be
		// nothing (publishing was slow), never a negative hold, which
		// would leave the phase out of the report.
		var hold time.Duration
		if cur.Phase == registry.Prepare {
			hold = max(2*beacons.Fresh-time.Since(written), 0)
		}
		if err := d.awaitAcks(ctx, cur, published, hold); err != nil {
			return err
		}
		if cur.Phase == registry.Stable {
			d.rep.To = cur.Version()
			return nil
		}
		if cur.Phase == registry.Migrate {
			if err := d.migrate(ctx, cur); err != nil {
				return err
			}
		}
		next, err := cur.Advance()
		if err != nil {
			return err
		}
		if err := d.advance(ctx, cur, next); err != nil {
			return err
		}
		cur, published = next, time.Now()
	}
}

// advance publishes next over cur, next's beacons first: on every server
// of both rings, the beacon of a phase is written before the phase is
// published (and before the sever), so a registry that loses a phase the
// fleet follows finds it, or the phase after it, on the servers
// (docs/membership.md, "A registry that forgets"). A driver that stops
// between the two leaves beacons one legal step ahead of the registry,
// which apply and joining processes take for what it is (nextPhase). For
// Prepare, the beacon's time also starts the wait Migrate asks for, which
// so overlaps the acknowledgements of Prepare.
func (d *driver) advance(ctx context.Context, cur, next registry.Config) error {
	var err error
	if d.beacons, err = d.writeBeacons(ctx, next); err != nil {
		return err
	}
	return d.publish(ctx, cur, next)
}

func (d *driver) publish(ctx context.Context, prev, next registry.Config) error {
	// Fencing at the data: dropped members lose their connections first.
	if err := d.sever(ctx, prev, next); err != nil {
		return err
	}
	if err := d.reg.Publish(ctx, prev, next); err != nil {
		return fmt.Errorf("redshard: apply: publishing %s: %w", next.Version(), err)
	}
	return nil
}

// newClient makes the driver's own client, a member of the fleet. The
// driver holds the lock, so a live member under its id can only be an
// earlier run of the same driver that died (killed mid-change, then run
// again): the registry refuses to let two processes share an id
// (registry.ErrMemberIDInUse), so the new client waits, within ctx and at
// most two member lifetimes, for that entry to expire.
func (d *driver) newClient(ctx context.Context) (*redshard.Client, error) {
	o := d.base
	o.Shards, o.Registry, o.RingRecipe = nil, d.reg, 0 // the documents name the recipe
	o.Fleet = &redshard.FleetOptions{MemberID: d.opt.Driver + "/apply"}
	o.HotKeys, o.Load = nil, nil
	give := time.Now().Add(2*d.reg.MemberTTL() + time.Second)
	for {
		c, err := redshard.NewClient(&o)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, registry.ErrMemberIDInUse) || time.Now().After(give) {
			return nil, fmt.Errorf("redshard: apply: the driver's client: %w", err)
		}
		t := time.NewTimer(d.reg.MemberTTL() / 8)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("redshard: apply: the driver's client, waiting for an earlier run's member %q to expire: %w (%w)",
				o.Fleet.MemberID, context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

// awaitAcks waits until every live member has acknowledged cfg, and at
// least hold; it reports the phase's propagation unless hold < 0.
func (d *driver) awaitAcks(ctx context.Context, cfg registry.Config, published time.Time, hold time.Duration) error {
	until := time.Now().Add(hold)
	t := time.NewTicker(d.opt.Poll)
	defer t.Stop()
	for {
		members, err := d.reg.Members(ctx)
		if err == nil {
			late, astray := registry.AckedConfig(members, cfg)
			if len(astray) > 0 {
				return astrayError(cfg, astray)
			}
			if d.opt.Progress != nil {
				d.opt.Progress(ApplyProgress{Config: cfg, Members: members, Late: late, Waited: time.Since(published)})
			}
			if len(late) == 0 && !time.Now().Before(until) {
				if hold < 0 {
					return nil
				}
				d.rep.Phases = append(d.rep.Phases, PhaseReport{Version: cfg.Version(), Acked: time.Since(published), Members: len(members)})
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redshard: apply: waiting for the fleet to acknowledge %s: %w", cfg.Version(), context.Cause(ctx))
		case <-t.C:
		}
	}
}

// migrate runs the data migration once the driver's client is in cfg's
// Migrate phase.
func (d *driver) migrate(ctx context.Context, cfg registry.Config) error {
	for {
		if st, _ := d.client.FleetStatus(); !st.Version.Less(cfg.Version()) {
			break
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(d.opt.Poll):
		}
	}
	if d.opt.Progress != nil {
		d.opt.Progress(ApplyProgress{Config: cfg, Rebalancing: true})
	}
	rep, err := d.rebalanceResuming(ctx) // again while it progresses (apply_resume.go)
	d.rep.Rebalance = rep
	if err != nil {
		return fmt.Errorf("redshard: apply: migrating the data: %w (run apply again to resume)", err)
	}
	if !rep.Finished {
		return fmt.Errorf("redshard: apply: migration left %d keys that failed to move and %d misplaced (run apply again to resume)",
			rep.Failed, rep.Misplaced)
	}
	return nil
}

// writeBeacons stores cfg on every server of its documents, and returns
// when the last write started.
func (d *driver) writeBeacons(ctx context.Context, cfg registry.Config) (time.Time, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return time.Time{}, err
	}
	shards, err := d.servers(cfg)
	if err != nil {
		return time.Time{}, err
	}
	own := seam.Client(d.client)
	start := time.Now()
	errs := make([]error, len(shards))
	parallel.Run(len(shards), func(i int) {
		cl := own.Dial(shards[i])
		defer cl.Close()
		cmd := redis.NewStatusCmd(ctx, "set", beacons.Key, data)
		if err := indexInternal(ctx, cl, cmd, beacons.Key); err != nil {
			errs[i] = fmt.Errorf("redshard: apply: writing the beacon on shard %s: %w", shards[i], err)
		}
	})
	return start, errors.Join(errs...)
}

// fleetChangeID names the change from cur to doc: a hash of the epoch and
// both documents.
func fleetChangeID(cur registry.Config, doc json.RawMessage) string {
	h := xxhash.New()
	_, _ = fmt.Fprintf(h, "%d\x00", cur.Epoch+1)
	_, _ = h.Write(cur.Doc)
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(doc)
	var b [8]byte
	return hex.EncodeToString(h.Sum(b[:0]))
}

// servers lists, once each by identity, the servers of the configs'
// documents, with the connection settings of the driver's options.
func (d *driver) servers(cfgs ...registry.Config) ([]fleetseam.Server, error) {
	return fleetseam.Servers(d.docs, cfgs...)
}

// indexInternal records an internal key (redshard.InternalKeyPrefix) in
// its server's index (redshard.InternalIndexKey), as the root records
// its own; cmd is the command that creates it, sent in the same pipeline.
// The index expires a while after the last key was added.
func indexInternal(ctx context.Context, cl *redis.Client, cmd redis.Cmder, key string) error {
	_, _ = cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		_ = p.Process(ctx, cmd)
		p.SAdd(ctx, redshard.InternalIndexKey, key)
		p.PExpire(ctx, redshard.InternalIndexKey, keymove.SettledTTL)
		return nil
	})
	return cmd.Err()
}
