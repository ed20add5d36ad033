package redshard

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/functions"
	"github.com/redshard/redshard/internal/keymove"
	"github.com/redshard/redshard/ring"
)

// retireGrace is how long a removed shard's client stays open for commands
// that started on the old ring before it is closed. A variable for tests.
var retireGrace = 5 * time.Second

const (
	// handoffTimeout bounds one key's migration from its previous owner.
	handoffTimeout = 5 * time.Second
	// drainTimeout bounds how long the first move of a change waits for the
	// commands that started on the previous ring to finish.
	drainTimeout = 30 * time.Second
	// blockingGrace is how long it then waits for the previous ring's
	// blocking commands. One still blocked after it is harmless: nothing of
	// this process writes to a moved key's old owner any more, so nothing
	// can wake it there; the grace covers those that were not blocked but
	// merely on their way.
	blockingGrace = time.Second
	// maxHandoffDone bounds the set of keys known to be handed off; past it
	// a key is simply checked again on its next use.
	maxHandoffDone = 1 << 20
	// handoffParallelism bounds the migrations one pipeline runs at once.
	handoffParallelism = 16
)

func (h *handoff) stripe(key string) *doneStripe {
	return &h.done[xxhash.Sum64String(key)%doneStripes]
}

func (h *handoff) isDone(key string) bool {
	st := h.stripe(key)
	st.mu.Lock()
	_, ok := st.keys[key]
	st.mu.Unlock()
	return ok
}

func (h *handoff) markDone(key string) {
	st := h.stripe(key)
	st.mu.Lock()
	if st.keys == nil {
		st.keys = map[string]struct{}{}
	}
	if len(st.keys) < maxHandoffDone/doneStripes {
		st.keys[key] = struct{}{}
	}
	st.mu.Unlock()
}

// enterMove registers a move; false once the change is over.
func (h *handoff) enterMove() bool {
	if !h.movers.Enter() {
		return false
	}
	h.flush.RLock()
	return true
}

func (h *handoff) leaveMove() {
	h.flush.RUnlock()
	h.movers.Leave()
}

// closeMoves stops new moves and waits for the running ones.
func (h *handoff) closeMoves() { h.movers.Close() }

// excludeMoves waits for the moves running in this process and keeps new
// ones from starting until the returned function is called (FLUSHDB and
// FLUSHALL during a change).
func (h *handoff) excludeMoves() (done func()) {
	h.flush.Lock()
	return h.flush.Unlock
}

// setCommitted marks the change committed (a fleet's Commit phase), or not.
func (h *handoff) setCommitted(v bool) { h.committed.Store(v) }

// isCommitted reports whether the change is committed: commands start no
// move.
func (h *handoff) isCommitted() bool { return h.committed.Load() }

// settledKey names the change's settled set on each new owner.
func (h *handoff) settledKey() string { return h.settled }

// previousOwner returns key's owner on the change's previous ring.
func (h *handoff) previousOwner(key string) *shard {
	return h.from.shards[h.from.ring.LookupIndex(key)]
}

// changeID names the change from old to next in a way every process that
// makes the same change computes alike: a hash of both shard lists.
func changeID(old, next *topology) string {
	d := xxhash.New()
	for _, t := range []*topology{old, next} {
		_, _ = d.WriteString(strconv.Itoa(t.ring.VnodesPerWeight()))
		if rc := t.ring.Recipe(); rc != ring.Recipe1 {
			// Only other recipes add to the text, so that the changes of
			// Recipe1 rings keep the IDs they had before recipes existed.
			_, _ = d.WriteString("/recipe" + strconv.Itoa(rc))
		}
		for _, s := range t.shards {
			_, _ = d.WriteString("|" + s.Name + "=" + s.identity() + "@" + strconv.FormatFloat(s.Weight, 'g', -1, 64))
		}
		_, _ = d.WriteString(";")
	}
	var b [8]byte
	return hex.EncodeToString(d.Sum(b[:0]))
}

// SetShards switches the client to a new shard list. The new ring is
// published atomically with a higher epoch: commands already running
// finish against the ring they started with, and none fails because of the
// switch. A shard keeps its client when its server (address, or Sentinel
// master) and options are unchanged, whatever its name: renaming a shard
// moves no key that is already on its server. Shard.Options is compared
// by pointer; Shard.Failover by content, its function fields (Dialer,
// OnConnect, credentials providers) by their code, since Go cannot compare
// functions: a closure rebuilt with other captured values is not, alone, a
// change. Clients of new servers are
// created; clients of removed ones stay open until Rebalance has moved
// their keys, then close.
//
// After the switch, the first command on a key whose owner is now another
// server first brings the key over from its previous owner, once per key
// however many goroutines (or processes) ask, under the protocol of
// docs/membership.md: reads keep hitting, writes apply to the existing
// value, a deleted key cannot come back, and commands that started on the
// old ring finish before any key moves. While the previous owner is down,
// such a key's commands fail with its ErrShardDown (or, with
// HealthOptions.Failover, go on without its old value). The change lasts
// until Rebalance has moved every key it displaced; until then a further
// SetShards is refused with ErrHandoffInProgress, since a second change on
// top of an undrained one could bring stale copies back.
//
// Before the switch, a server new to the ring gets the function libraries
// the current shards hold (FUNCTION DUMP from one, FUNCTION RESTORE on it),
// so FCALL works on the keys it takes over; SetShards talks to the
// servers within ctx (other calls that change the client, such as
// AddHook, Close and Rebalance, do not wait for it meanwhile). When
// the current shards hold different libraries, or the new server holds
// others, the change is refused with ErrLibrariesDiffer. Scripts (SCRIPT
// LOAD), CONFIG SET settings and ACL users are not carried over: see
// "Functions, scripts and server settings" in docs/membership.md.
//
// An invalid list is rejected with the same errors as NewClient (see
// Options.Validate) and the current ring stays, as it does when SetShards
// fails for any reason. Every client of a fleet should be given the same
// list before Rebalance runs.
//
// The client's PubSubs are subscribed on the new owners of their channels
// (keeping the old owners', where clients not switched yet publish)
// before the ring switches, so a message this client publishes at any
// point reaches them; a shard that is down, or has not confirmed within
// 2s, is reported on their Receive instead.
func (c *client) SetShards(ctx context.Context, shards []Shard) error {
	if err := c.setShards(ctx, shards); err != nil {
		return err
	}
	c.pubsub.Follow(ctx)
	return nil
}

func (c *client) setShards(ctx context.Context, shards []Shard) error {
	if c.fleet != nil {
		return fmt.Errorf("%w: apply the change to the registry (redshard apply)", ErrFleetManaged)
	}
	valid, r, err := resolveShards(shards, c.cfg.opt.ringConfig())
	if err != nil {
		return err
	}
	// One change at a time; c.mu is held while the change is decided and
	// published, but not while functions are carried to joining servers
	// (network round trips, up to seconds), so that AddHook, Close,
	// Rebalance and Stats do not wait for them.
	c.changing.Lock()
	defer c.changing.Unlock()
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return redis.ErrClosed
	}
	old := c.top.Load()
	if old.handoff != nil {
		c.mu.Unlock()
		return fmt.Errorf("%w (the change to epoch %d): run Rebalance to finish it", ErrHandoffInProgress, old.epoch)
	}
	top := &topology{epoch: old.epoch + 1, ring: r, gutterTTL: old.gutterTTL, flight: &inflight{}}
	top.shards = c.buildShards(r, valid, old)
	var joining []*shard // servers new to the ring, with new backends
	for _, s := range top.shards {
		if !slices.ContainsFunc(old.sources(), func(o *shard) bool { return o.backend == s.backend }) {
			joining = append(joining, s)
			c.joining = append(c.joining, s.backend) // AddShardHook and Close reach them meanwhile
		}
	}
	c.mu.Unlock()

	err = carryFunctions(ctx, old, top, joining)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.joining = nil
	switch {
	case c.closed.Load():
		err = redis.ErrClosed // Close closed the joining backends
	case err != nil:
		err = fmt.Errorf("redshard: SetShards (the ring is unchanged): %w", err)
	case c.top.Load() != old:
		// Nothing else replaces a ring that has no change in progress
		// (a fleet's client refuses SetShards); refuse rather than
		// publish over a ring this change was not decided on.
		err = errors.New("redshard: SetShards (the ring is unchanged): the ring changed while functions were carried to the new servers; try again")
	}
	if err != nil {
		for _, s := range joining {
			_ = s.close()
		}
		return err
	}
	// Servers that left keep their clients: their keys are still to be
	// moved (handoff, Rebalance).
	for _, s := range old.sources() {
		if !slices.ContainsFunc(top.shards, func(n *shard) bool { return n.backend == s.backend }) {
			top.orphans = append(top.orphans, s)
		}
	}
	top.handoff = newHandoff(old, changeID(old, top))
	top.seal()
	// The PubSubs subscribe on the new ring's owners (keeping the old
	// ones', where the change's other processes still publish) before
	// any PUBLISH is routed by it.
	c.pubsub.FollowRing(ctx, pubsubRing{top})
	c.top.Store(top)
	if switchHook != nil {
		switchHook()
	}
	return nil
}

// switchHook, when set (tests), runs in SetShards right after the ring
// switched, before SetShards returns.
var switchHook func()

// newHandoff returns the handoff of a change named change (changeID, or a
// fleet config's Change) away from the topology from.
func newHandoff(from *topology, change string) *handoff {
	return &handoff{from: from, settled: settledPrefix + change, drainTurn: make(chan struct{}, 1)}
}

// releaseChangeLocked publishes top without its handoff and its removed
// shards, whose keys have all been moved, then (outside c.mu, in the
// caller's goroutine) waits for this process's moves to end, deletes the
// change's settled sets and retires the removed shards. Caller holds c.mu;
// the returned func must be called after unlocking it.
func (c *client) releaseChangeLocked(ctx context.Context, top *topology) func() {
	next := *top
	next.handoff, next.orphans = nil, nil
	c.top.Store(next.seal())
	h := top.handoff
	gone := make([]*backend, len(top.orphans))
	for i, s := range top.orphans {
		gone[i] = s.backend
	}
	return func() {
		c.dropSettled(ctx, h, top.shards)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.retireLocked(gone)
	}
}

// handOff brings the given keys of a command over from their previous
// owners, when a change is in progress and their owner changed.
// A topology that is guarded (seal) sends every key of a command through
// here. A hold or a move waits no longer than ctx, nor than the context
// cmd was built with: an AutoPipeliner runs a batch of one command on a
// context of its own (holdContext).
func (c *client) handOff(ctx context.Context, top *topology, cmd redis.Cmder, keys []int) error {
	ctx, stop := holdContext(ctx, []redis.Cmder{cmd})
	defer stop()
	args := cmd.Args()
	for _, k := range keys {
		if err := c.handOffKey(ctx, top, command.Arg(args[k])); err != nil {
			return err
		}
	}
	return nil
}

// handOffBatch is handOffAll for the keys of a batch's commands (a
// pipeline's, a transaction's, an AutoPipeliner's batch): a hold or a move
// waits no longer than the earliest deadline of the commands' own contexts
// (holdContext), nor ctx's.
func (c *client) handOffBatch(ctx context.Context, top *topology, cmds []redis.Cmder, keys []string) error {
	if !top.guarded || len(keys) == 0 {
		return nil
	}
	hctx, stop := holdContext(ctx, cmds)
	defer stop()
	return c.handOffAll(hctx, top, keys)
}

// handOffAll hands off many keys (a pipeline's, a transaction's) in parallel.
func (c *client) handOffAll(ctx context.Context, top *topology, keys []string) error {
	if !top.guarded || len(keys) == 0 {
		return nil
	}
	if h := top.handoff; h == nil || h.committed.Load() {
		for _, k := range keys { // fleet checks only: no move to run
			if err := c.fleetCheck(ctx, top, k); err != nil {
				return err
			}
		}
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(handoffParallelism)
	for _, k := range keys {
		g.Go(func() error { return c.handOffKey(gctx, top, k) })
	}
	return g.Wait()
}

// handOffKey settles one key on its new owner before a command uses it:
// moves it from its previous owner, once per key per change however many
// goroutines ask. It fails when the previous owner is down or cannot be
// reached (its copy may be the newest), unless failover is on, where the
// key is settled without it.
func (c *client) handOffKey(ctx context.Context, top *topology, key string) error {
	if top.hold != nil || top.fence != nil {
		if err := c.fleetCheck(ctx, top, key); err != nil {
			return err
		}
	}
	h := top.handoff
	if h == nil || h.committed.Load() {
		return nil
	}
	from := h.from.shards[h.from.ring.LookupIndex(key)]
	to := top.shards[top.ring.LookupIndex(key)]
	if from.id == to.id || h.isDone(key) {
		return nil
	}
	if to.down.Load() {
		// The command fails with the new owner's ErrShardDown, and the key
		// moves once it is up. With failover the command goes to a stand-in
		// instead, and the previous owner's copy is dropped first, so that
		// it cannot come back over what the stand-in saw (cache semantics,
		// as for any failover).
		if top.gutterTTL <= 0 || from.down.Load() {
			return nil
		}
		if err := from.client.Del(ctx, key).Err(); err != nil {
			return fmt.Errorf("redshard: dropping key %q from its previous owner %s while its new owner is down: %w", key, from.Shard, err)
		}
		h.markDone(key)
		return nil
	}
	return c.moveOne(ctx, h, from, to, key)
}

// moveOne is handOffKey's slow path, apart so that what its flight
// captures is not allocated for the commands that need no move.
func (c *client) moveOne(ctx context.Context, h *handoff, from, to *shard, key string) error {
	if err := c.awaitDrain(ctx, h); err != nil {
		return err
	}
	_, _, err := c.flights.Do(ctx, &h.group, key, handoffTimeout, func(mctx context.Context) (any, error) {
		if !h.enterMove() {
			return nil, nil // the change is over: the key is on its owner
		}
		defer h.leaveMove()
		for attempt := 1; ; attempt++ {
			start := c.leaseExpiry()
			err := c.moveOneBounded(mctx, h, from, to, key)
			// A move cut at the process's lease (moveContext) is tried
			// again, as the caller would, once a heartbeat has renewed the
			// lease past where it was cut: on a loaded machine the lease's
			// remaining time can be short when the move starts. Each try
			// is bounded by the lease as it then stands, so no step is
			// sent past the moment the process would fence itself; a
			// process that is not renewed is not retried.
			if err == nil || attempt == maxLeaseCutRetries || mctx.Err() != nil ||
				!errors.Is(err, context.DeadlineExceeded) || !c.awaitRenewal(mctx, start) {
				return nil, err
			}
		}
	})
	return err
}

// maxLeaseCutRetries bounds the tries of one handoff move cut at the
// lease (moveOne).
const maxLeaseCutRetries = 3

// leaseExpiry is when the process's lease runs out (lease.Expiry), 0
// outside a fleet.
func (c *client) leaseExpiry() int64 {
	if c.fleet == nil {
		return 0
	}
	return c.fleet.Lease().Expiry()
}

// awaitRenewal waits until a heartbeat renews the process's lease past
// the expiry was (leaseExpiry), and reports whether it did: false outside
// a fleet, once the lease has run out (the process fences itself), or
// when ctx ends.
func (c *client) awaitRenewal(ctx context.Context, was int64) bool {
	if c.fleet == nil {
		return false
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		switch {
		case !c.fleet.Lease().Fresh():
			return false
		case c.fleet.Lease().Expiry() > was:
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// moveOneBounded is one try of moveOne's move, bounded by the lease.
func (c *client) moveOneBounded(ctx context.Context, h *handoff, from, to *shard, key string) error {
	mctx, cancel := c.moveContext(ctx)
	defer cancel()
	if from.down.Load() {
		return c.settleWithoutPrevious(mctx, h, from, to, key)
	}
	res, err := keymove.Move(mctx, from.client, []string{key}, h.settled, internalIndex, func(string) *redis.Client { return to.client })
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		c.stats.handoffErrors.Add(1)
		if from.down.Load() { // marked down meanwhile
			return c.settleWithoutPrevious(mctx, h, from, to, key)
		}
		return fmt.Errorf("redshard: moving key %q from its previous owner %s to %s: %w", key, from.Shard, to.Shard, err)
	}
	if res[0].Moved {
		c.stats.handoffMoved.Add(1)
	}
	h.markDone(key)
	return nil
}

// settleWithoutPrevious handles a key whose previous owner is down: with
// failover the key is settled on its new owner without the old value (it
// must never be moved there later); without, the command fails with the
// previous owner's ErrShardDown.
func (c *client) settleWithoutPrevious(ctx context.Context, h *handoff, from, to *shard, key string) error {
	if c.top.Load().gutterTTL <= 0 {
		return fmt.Errorf("redshard: key %q is still on its previous owner: %w", key, from.downError())
	}
	if err := keymove.SettleAbsent(ctx, to.client, key, h.settled, internalIndex); err != nil {
		return fmt.Errorf("redshard: settling key %q on %s: %w", key, to.Shard, err)
	}
	h.markDone(key)
	return nil
}

// awaitDrain waits, once per change, until no command that started on the
// previous ring is still running: one of them could otherwise write to a
// key's old owner after the key has moved.
func (c *client) awaitDrain(ctx context.Context, h *handoff) error {
	if h.drained.Load() {
		return nil
	}
	select { // wait for the turn as for the drain: until ctx ends
	case h.drainTurn <- struct{}{}:
		defer func() { <-h.drainTurn }()
	case <-ctx.Done():
		return ctx.Err()
	}
	start := time.Now()
	for !h.drained.Load() {
		if h.from.flight.idle(start) {
			h.drained.Store(true)
			break
		}
		if time.Since(start) > drainTimeout {
			return fmt.Errorf("%w: commands of the previous ring (epoch %d) are still running after %v", ErrHandoffInProgress, h.from.epoch, drainTimeout)
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// carryFunctions is SetShards' part of functions that follow the ring: it
// gives the servers of next that are not in old (joining) the function
// libraries of old's shards, before next is published. The libraries are
// read from the shards that stay on the ring (all of old's when none
// stays), skipping those marked down (see giveFunctions).
func carryFunctions(ctx context.Context, old, next *topology, joining []*shard) error {
	if len(joining) == 0 {
		return nil
	}
	var sources []functions.Server
	for _, s := range old.shards {
		if !s.down.Load() && slices.ContainsFunc(next.shards, func(n *shard) bool { return n.backend == s.backend }) {
			sources = append(sources, libServer(s.Shard, s.client))
		}
	}
	if len(sources) == 0 {
		for _, s := range old.shards {
			if !s.down.Load() {
				sources = append(sources, libServer(s.Shard, s.client))
			}
		}
	}
	to := make([]functions.Server, len(joining))
	for i, s := range joining {
		to[i] = libServer(s.Shard, s.client)
	}
	return giveFunctions(ctx, sources, to)
}

// retireLocked closes the backends of shards that left the ring after a grace
// period for commands that started on an older ring. Caller holds c.mu.
// The entry is removed when it fires, so nothing accumulates across
// membership changes.
func (c *client) retireLocked(gone []*backend) {
	if len(gone) == 0 {
		return
	}
	r := &retirement{backends: gone}
	c.retiring[r] = struct{}{}
	r.timer = time.AfterFunc(retireGrace, func() {
		c.mu.Lock()
		_, ok := c.retiring[r]
		delete(c.retiring, r)
		c.mu.Unlock()
		if ok { // else Close took it
			for _, b := range r.backends {
				_ = b.close()
			}
		}
	})
}

// retirement is a group of backends waiting to be closed.
type retirement struct {
	backends []*backend
	timer    *time.Timer
}
