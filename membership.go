package redshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/internal/command"
)

// retireGrace is how long a removed shard's client stays open for commands
// that started on the old ring before it is closed. A variable for tests.
var retireGrace = 5 * time.Second

const (
	// handoffTimeout bounds one key's migration from its previous owner.
	handoffTimeout = 5 * time.Second
	// maxHandoffDone bounds the set of keys known to be handed off; past it
	// a key is simply checked again on its next use.
	maxHandoffDone = 1 << 20
	// handoffParallelism bounds the migrations one pipeline runs at once.
	handoffParallelism = 16
)

// handoff is the state of one membership change: the previous topology,
// and which keys have already been brought over from it.
type handoff struct {
	from  *topology
	until time.Time
	group singleflight.Group // keyed by key, run by Client.flights; one group per change (epoch)

	mu   sync.Mutex
	done map[string]struct{} // guarded by mu: keys migrated or found absent on the previous owner
}

func (h *handoff) isDone(key string) bool {
	h.mu.Lock()
	_, ok := h.done[key]
	h.mu.Unlock()
	return ok
}

func (h *handoff) markDone(key string) {
	h.mu.Lock()
	if len(h.done) < maxHandoffDone {
		h.done[key] = struct{}{}
	}
	h.mu.Unlock()
}

// SetShards switches the client to a new shard list. The new ring is
// published atomically with a higher epoch: commands already running
// finish against the ring they started with, and none fails because of the
// switch. Clients of shards that keep their name and endpoint are reused;
// clients of new shards are created; clients of removed shards stay open
// until Rebalance has moved their keys, then close.
//
// After the switch, the first command on a key whose owner changed first
// brings the key over from its previous owner (DUMP, PTTL, then RESTORE
// without REPLACE on the new owner, so a newer value written there wins,
// and a compare-and-delete on the previous owner), once per key however
// many goroutines ask. Reads therefore keep hitting, writes apply to the
// existing value, and a deleted key cannot come back from the previous
// owner. The handoff ends when Rebalance completes, on EndHandoff, or after
// Options.HandoffWindow.
//
// An invalid list is rejected with the same errors as NewClient (see
// Options.Validate) and the current ring stays. A second change while a handoff is still running is
// refused with ErrHandoffInProgress. Every client of a fleet should be given
// the same list before Rebalance runs.
func (c *Client) SetShards(ctx context.Context, shards []Shard) error {
	valid, r, err := resolveShards(shards, c.cfg.opt.VnodesPerWeight)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return redis.ErrClosed
	}
	old := c.top.Load()
	if h := old.handoff; h != nil {
		if time.Now().Before(h.until) {
			return fmt.Errorf("%w (epoch %d, until %s)", ErrHandoffInProgress, old.epoch, h.until.Format(time.RFC3339))
		}
		old = c.endHandoffLocked(old)
	}
	top := &topology{epoch: old.epoch + 1, ring: r, gutterTTL: old.gutterTTL}
	top.shards = c.buildShards(r, valid, old)
	// Shards that left keep their clients: their keys are still to be
	// moved (handoff, Rebalance).
	for _, s := range old.sources() {
		if !slices.ContainsFunc(top.shards, func(n *shard) bool { return n.backend == s.backend }) {
			top.orphans = append(top.orphans, s)
		}
	}
	if window := c.cfg.handoffWindow; window > 0 {
		top.handoff = &handoff{from: old, until: time.Now().Add(window), done: map[string]struct{}{}}
	}
	c.top.Store(top)
	return nil
}

// EndHandoff ends the handoff of the last membership change now: keys
// still on their previous owner are no longer looked for there (they miss
// until Rebalance moves them). The clients of removed shards stay open
// until a Rebalance has moved their keys.
func (c *Client) EndHandoff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return
	}
	if top := c.top.Load(); top.handoff != nil {
		c.endHandoffLocked(top)
	}
}

// endHandoffLocked publishes top without its handoff. Caller holds c.mu.
func (c *Client) endHandoffLocked(top *topology) *topology {
	next := *top
	next.handoff = nil
	c.top.Store(&next)
	return &next
}

// releaseOrphansLocked publishes top without its handoff and its removed
// shards, whose keys have all been moved, and closes their clients after a
// grace period for commands that started on an older ring. Caller holds c.mu.
func (c *Client) releaseOrphansLocked(top *topology) {
	next := *top
	next.handoff, next.orphans = nil, nil
	c.top.Store(&next)
	if len(top.orphans) == 0 {
		return
	}
	gone := make([]*backend, len(top.orphans))
	for i, s := range top.orphans {
		gone[i] = s.backend
	}
	c.retireLocked(gone)
}

// handOff brings the given keys of a command over from their previous
// owners, when a handoff is running and their owner changed.
func (c *Client) handOff(ctx context.Context, top *topology, args []interface{}, keys []int) error {
	h := top.handoff
	if h == nil {
		return nil
	}
	if time.Now().After(h.until) {
		c.mu.Lock()
		if cur := c.top.Load(); cur.handoff == h && !c.closed.Load() {
			c.endHandoffLocked(cur)
		}
		c.mu.Unlock()
		return nil
	}
	for _, k := range keys {
		if err := c.handOffKey(ctx, top, command.Arg(args[k])); err != nil {
			return err
		}
	}
	return nil
}

// handOffAll hands off many keys (a pipeline's, a transaction's) in parallel.
func (c *Client) handOffAll(ctx context.Context, top *topology, keys []string) error {
	if top.handoff == nil || len(keys) == 0 {
		return nil
	}
	if time.Now().After(top.handoff.until) {
		return c.handOff(ctx, top, nil, nil)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(handoffParallelism)
	for _, k := range keys {
		g.Go(func() error { return c.handOffKey(gctx, top, k) })
	}
	return g.Wait()
}

// handOffKey migrates one key from its previous owner, once per key per
// change however many goroutines ask. A previous owner that cannot be
// reached does not fail the command: its data is unavailable either way.
func (c *Client) handOffKey(ctx context.Context, top *topology, key string) error {
	h := top.handoff
	from := h.from.shards[h.from.ring.LookupIndex(key)]
	to := top.shards[top.ring.LookupIndex(key)]
	if from.Name == to.Name || from.down.Load() || h.isDone(key) {
		return nil
	}
	_, _, err := c.flights.do(ctx, &h.group, key, handoffTimeout, func(mctx context.Context) (any, error) {
		res, err := migrateKey(mctx, from.client, to.client, key)
		if err != nil {
			c.stats.handoffErrors.Add(1)
			return nil, nil // not marked done: the next use tries again
		}
		if res.moved {
			c.stats.handoffMoved.Add(1)
		}
		h.markDone(key)
		return nil, nil
	})
	if ctx.Err() != nil || errors.Is(err, redis.ErrClosed) {
		return err
	}
	return nil
}

// migration is what happened to one key.
type migration struct {
	moved  bool  // restored on the new owner (or a newer value was already there) and deleted from the old
	absent bool  // not on the previous owner (never was, expired, or already moved)
	bytes  int   // size of the serialized value
	err    error // the key stays where it was
}

// casDelete deletes a key only if it still holds the serialized value that
// was copied, so a write that reached the old owner meanwhile is not lost.
var casDelete = redis.NewScript(`
if redis.call('DUMP', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// migrateKey moves one key from one server to another (see moveKeys).
func migrateKey(ctx context.Context, from, to *redis.Client, key string) (migration, error) {
	res, err := moveKeys(ctx, from, []string{key}, func(string) *redis.Client { return to })
	if err != nil {
		return migration{}, err
	}
	return res[0], res[0].err
}

// moveKeys moves keys from one server to their new owners in three
// pipelined steps: DUMP and PTTL on from; RESTORE without REPLACE on each
// owner (a value already there is newer and wins: BUSYKEY is success); a
// compare-and-delete on from. A key whose step fails keeps its old copy.
// The error is for the batch as a whole (from unreachable).
func moveKeys(ctx context.Context, from *redis.Client, keys []string, owner func(string) *redis.Client) ([]migration, error) {
	res := make([]migration, len(keys))
	dumps := make([]*redis.StringCmd, len(keys))
	pttls := make([]*redis.Cmd, len(keys))
	_, err := from.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			dumps[i] = p.Dump(ctx, k)
			pttls[i] = p.Do(ctx, "pttl", k)
		}
		return nil
	})
	if err != nil && err != redis.Nil && !isRedisError(err) {
		return nil, err
	}

	// RESTORE, grouped by owner.
	type restore struct {
		i   int
		cmd *redis.StatusCmd
	}
	byOwner := map[*redis.Client][]restore{}
	for i, k := range keys {
		switch err := dumps[i].Err(); {
		case err == redis.Nil:
			res[i].absent = true
			continue
		case err != nil:
			res[i].err = fmt.Errorf("dump %q: %w", k, err)
			continue
		}
		ms, err := pttls[i].Int64()
		switch {
		case err != nil:
			res[i].err = fmt.Errorf("pttl %q: %w", k, err)
			continue
		case ms == -2: // expired between the two commands
			res[i].absent = true
			continue
		}
		ttl := time.Duration(max(ms, 0)) * time.Millisecond
		to := owner(k)
		byOwner[to] = append(byOwner[to], restore{i: i, cmd: redis.NewStatusCmd(ctx, "restore", k, ttl.Milliseconds(), dumps[i].Val())})
	}
	var wg sync.WaitGroup
	for to, rs := range byOwner {
		wg.Go(func() {
			_, _ = to.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, r := range rs {
					_ = p.Process(ctx, r.cmd)
				}
				return nil
			})
			for _, r := range rs {
				if err := r.cmd.Err(); err != nil && !isBusyKey(err) {
					res[r.i].err = fmt.Errorf("restore %q: %w", keys[r.i], err)
				}
			}
		})
	}
	wg.Wait()

	// Compare-and-delete what was copied: EVALSHA, and EVAL for the keys
	// that met a server without the script (NOSCRIPT).
	dels := make([]*redis.Cmd, len(keys))
	for _, useSha := range []bool{true, false} {
		_, _ = from.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				switch {
				case res[i].err != nil || res[i].absent:
				case useSha:
					dels[i] = casDelete.EvalSha(ctx, p, []string{k}, dumps[i].Val())
				case dels[i] != nil && isNoScript(dels[i].Err()):
					dels[i] = casDelete.Eval(ctx, p, []string{k}, dumps[i].Val())
				}
			}
			return nil
		})
		if !slices.ContainsFunc(dels, func(d *redis.Cmd) bool { return d != nil && isNoScript(d.Err()) }) {
			break
		}
	}
	for i, d := range dels {
		if d == nil {
			continue
		}
		if err := d.Err(); err != nil {
			res[i].err = fmt.Errorf("delete %q from its previous owner: %w", keys[i], err)
			continue
		}
		res[i].moved, res[i].bytes = true, len(dumps[i].Val())
	}
	return res, nil
}

func isBusyKey(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "BUSYKEY")
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
