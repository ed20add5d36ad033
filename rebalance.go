package redshard

import (
	"context"
	"crypto/rand"
	"fmt"
	"github.com/redshard/redshard/internal/parallel"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/redshard/redshard/internal/keymove"
)

// RebalanceOptions configures Rebalance. The zero value is usable;
// Validate reports what Rebalance would reject.
type RebalanceOptions struct {
	// BatchSize is the SCAN COUNT and the number of keys moved per
	// pipelined batch, at most 1<<20. Default 500.
	BatchSize int
	// Rate caps the keys scanned per second over all shards: 0 for no cap,
	// else between 0.001 and 1e9 (NaN, infinities and values outside are
	// errors). Default 0.
	Rate float64
	// Progress, if set, is called after every batch with the totals so far.
	// Calls are serialised.
	Progress func(RebalanceProgress)
	// SkipVerify skips the final pass that checks every displaced key has
	// moved; without that pass the change is not marked finished.
	SkipVerify bool
	// MoveStrays also moves strays: keys found on a server that is neither
	// their owner nor, in the change being drained, their previous owner
	// (written there directly through ShardClient or ForEachShard, or by a
	// client with another shard list). Default false: strays are counted in
	// the report and left where they are. Refused while a membership change
	// is in progress.
	MoveStrays bool
}

// RebalanceProgress counts what Rebalance has done so far. Scanned and
// Skipped count keys as SCAN returns them: a key SCAN returns twice (it
// may, while the server resizes its table), or that a second pass sees
// again after a verification found keys left behind, counts each time, so
// Scanned can exceed Total.
type RebalanceProgress struct {
	Scanned int64 // keys seen on the shards scanned, each time SCAN returned one
	Moved   int64 // keys copied to their owner and deleted from where they were
	Skipped int64 // keys already on their owner, or gone before they could be moved
	Failed  int64 // keys that could not be moved; they stay where they were
	Bytes   int64 // serialized bytes moved
	// Total estimates the keys to scan (the shards' DBSIZE at the start).
	Total   int64
	Elapsed time.Duration
}

// RebalanceReport is the outcome of Rebalance.
type RebalanceReport struct {
	RebalanceProgress
	Epoch uint64 // the ring the keys were moved for
	// Moves counts moved keys by (from, to) shard names.
	Moves map[[2]string]int64
	// Verified reports whether the final pass ran; Misplaced counts the
	// displaced keys it found still on their previous owner (0 after a
	// complete run).
	Verified  bool
	Misplaced int64
	// Strays counts, in the final pass, keys on a server that is neither
	// their owner nor their previous owner (see MoveStrays).
	Strays int64
	// Finished reports that the membership change is complete: every
	// displaced key moved, the removed servers' clients are being closed,
	// and SetShards accepts the next change.
	Finished bool
}

// Rebalance finishes the membership change of the last SetShards: it
// SCANs every server that may hold keys (the current shards and the ones
// that change removed) in batches and moves each key the change displaced
// (found on its previous owner, owned now by another server) under the
// protocol SetShards' handoff uses (docs/membership.md): a newer value
// already on the owner wins, a key deleted there since it moved is never
// brought back, and a write that reached the old server meanwhile is kept
// and reported as failed. It is safe to run while the client serves
// traffic, in several processes at once, and again after an interruption.
// Keys are compared by server, not by shard name: a renamed shard's keys
// stay where they are.
//
// When every displaced key has moved and the final pass finds none left,
// the change is finished (RebalanceReport.Finished): the clients of removed
// servers close and SetShards accepts another change. Keys on a server
// that neither owns them nor owned them before the change are strays:
// they are counted and left alone unless MoveStrays is set. With no change
// in progress Rebalance only looks for strays.
//
// Invalid options are an error wrapping ErrInvalidRebalanceOptions.
// Rebalance stops when ctx is done and returns the report so far with
// ctx's error.
func (c *client) Rebalance(ctx context.Context, opt RebalanceOptions) (RebalanceReport, error) {
	opt, err := opt.resolve()
	if err != nil {
		return RebalanceReport{}, err
	}
	top, err := c.topology()
	if err != nil {
		return RebalanceReport{}, err
	}
	h := top.handoff
	if (h != nil || top.hold != nil) && opt.MoveStrays {
		// A stray settled on its owner would make the change refuse the
		// key's real copy, still on its previous owner.
		return RebalanceReport{}, invalid(ErrInvalidRebalanceOptions, "MoveStrays",
			"not while a membership change is in progress (epoch %d): finish it with a Rebalance first", top.epoch)
	}
	settled := ""
	if h != nil {
		if err := c.awaitDrain(ctx, h); err != nil {
			return RebalanceReport{}, err
		}
		settled = h.settled
	} else if opt.MoveStrays {
		settled = settledPrefix + "strays:" + rand.Text()
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handoffTimeout)
			defer cancel()
			parallel.Run(len(top.shards), func(i int) {
				_, _ = top.shards[i].client.Pipelined(dctx, func(p redis.Pipeliner) error {
					p.Del(dctx, settled)
					p.SRem(dctx, internalIndex, settled)
					return nil
				})
			})
		}()
	}
	sources := top.sources()
	rb := &rebalancer{c: c, top: top, opt: opt, start: time.Now(), settled: settled,
		report: RebalanceReport{Epoch: top.epoch, Moves: map[[2]string]int64{}}}
	for _, s := range sources {
		if n, err := s.client.DBSize(ctx).Result(); err == nil {
			rb.report.Total += n
		}
	}
	c.stats.rebalance.start(top.epoch, rb.report.Total)
	defer c.stats.rebalance.running.Store(false)
	// A server whose SCAN can skip keys deleted under it (miniredis; Redis
	// itself guarantees it cannot) leaves keys behind: the verification
	// finds them and another pass moves them.
	for pass := 0; pass < maxRebalancePasses; pass++ {
		g, gctx := errgroup.WithContext(ctx)
		for _, s := range sources {
			g.Go(func() error { return rb.drain(gctx, s) })
		}
		if err = g.Wait(); err != nil || opt.SkipVerify {
			break
		}
		if err = rb.verify(ctx, sources); err != nil || rb.misplaced() == 0 {
			break
		}
	}
	rb.mu.Lock()
	report := rb.report
	report.Elapsed = time.Since(rb.start)
	rb.mu.Unlock()
	if err != nil {
		return report, err
	}
	if h != nil && report.Failed == 0 && report.Misplaced == 0 && report.Verified {
		if c.fleet != nil {
			// The fleet's driver commits the change (fleet.Apply).
			report.Finished = true
			return report, nil
		}
		c.mu.Lock()
		var release func()
		if cur := c.top.Load(); cur.handoff == h && !c.closed.Load() {
			release = c.releaseChangeLocked(ctx, cur)
		}
		c.mu.Unlock()
		if release != nil {
			release()
			report.Finished = true
		}
	}
	return report, nil
}

const maxRebalancePasses = 3

func (rb *rebalancer) misplaced() int64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.report.Misplaced
}

type rebalancer struct {
	c       *client
	top     *topology
	opt     RebalanceOptions
	start   time.Time
	settled string // the settled set moves use; "": move nothing

	paceMu sync.Mutex // guards paced
	paced  int64      // keys admitted by pace so far

	mu     sync.Mutex // guards report and serialises Progress
	report RebalanceReport
}

// drain moves the misplaced keys of one shard.
func (rb *rebalancer) drain(ctx context.Context, src *shard) error {
	var cursor uint64
	size := rb.c.newBatchSizer(rb.opt.BatchSize)
	for {
		// go-redis does not check ctx before sending; stop between batches.
		if err := ctx.Err(); err != nil {
			return err
		}
		keys, next, err := src.client.Scan(ctx, cursor, "", int64(rb.opt.BatchSize)).Result()
		if err != nil {
			return fmt.Errorf("redshard: rebalance: scanning shard %s: %w", src.Name, err)
		}
		// SCAN may return more than COUNT keys: move them a batch at a time.
		for len(keys) > 0 {
			n := min(len(keys), size.n)
			if err := rb.pace(ctx, n); err != nil {
				return err
			}
			start := time.Now()
			if err := rb.moveBatch(ctx, src, keys[:n]); err != nil {
				return err
			}
			size.took(time.Since(start))
			keys = keys[n:]
			if len(keys) > 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// batchSizer sizes the batches of one shard's drain. In a fleet process
// every batch must end within the process's lease (moveContext), or all
// of its keys still moving fail: so batches start small and double while
// a batch takes less than a sixteenth of the lease, and halve when one
// takes more than a quarter; a slow server or large values slow the drain
// down rather than fail it. Outside a fleet there is no such bound and
// every batch is BatchSize.
type batchSizer struct {
	n, max int
	budget time.Duration // a quarter lease; 0: no bound
}

// firstFleetBatch is the first batch of a drain in a fleet process.
const firstFleetBatch = 16

func (c *client) newBatchSizer(max int) *batchSizer {
	if c.fleet == nil {
		return &batchSizer{n: max, max: max}
	}
	return &batchSizer{n: min(max, firstFleetBatch), max: max, budget: c.fleet.lease.Valid() / 4}
}

// took records how long the last batch took.
func (b *batchSizer) took(d time.Duration) {
	switch {
	case b.budget == 0:
	case d > b.budget:
		b.n = max(1, b.n/2)
	case d < b.budget/4:
		b.n = min(b.max, b.n*2)
	}
}

// pace waits until n more keys may be moved without going over
// RebalanceOptions.Rate since the start of the run: a batch of n keys is
// admitted once the run has lasted (keys admitted so far + n) / Rate.
func (rb *rebalancer) pace(ctx context.Context, n int) error {
	if rb.opt.Rate == 0 {
		return nil
	}
	rb.paceMu.Lock()
	rb.paced += int64(n)
	due := rb.start.Add(time.Duration(float64(rb.paced) / rb.opt.Rate * float64(time.Second)))
	rb.paceMu.Unlock()
	wait := time.Until(due)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// placement says what Rebalance does with key k found on server src.
type placement int

const (
	inPlace   placement = iota // on its owner (or an internal key)
	displaced                  // on its previous owner in the change: move it
	stray                      // neither: leave it unless MoveStrays
)

func (rb *rebalancer) place(src *shard, k string) placement {
	if isInternalKey(k) || rb.top.shards[rb.top.ring.LookupIndex(k)].id == src.id {
		return inPlace
	}
	if h := rb.top.handoff; h != nil && h.from.shards[h.from.ring.LookupIndex(k)].id == src.id {
		return displaced
	}
	return stray
}

// moveBatch moves the displaced keys among keys, found on src (and the
// strays, with MoveStrays).
func (rb *rebalancer) moveBatch(ctx context.Context, src *shard, keys []string) error {
	var move []string
	for _, k := range keys {
		switch rb.place(src, k) {
		case displaced:
			move = append(move, k)
		case stray:
			if rb.opt.MoveStrays {
				move = append(move, k)
			}
		}
	}
	var res []keymove.Result
	if len(move) > 0 && rb.settled != "" {
		h := rb.top.handoff
		if h != nil {
			if !h.enterMove() {
				return fmt.Errorf("redshard: rebalance: the change ended while it ran")
			}
			defer h.leaveMove()
		}
		mctx, cancel := rb.c.moveContext(ctx)
		defer cancel()
		var err error
		res, err = keymove.Move(mctx, src.client, move, rb.settled, internalIndex, func(k string) *redis.Client {
			return rb.top.shards[rb.top.ring.LookupIndex(k)].client
		})
		if err != nil {
			return fmt.Errorf("redshard: rebalance: moving keys from shard %s: %w", src.Name, err)
		}
		if h != nil {
			for i, m := range res {
				if m.Err == nil {
					h.markDone(move[i])
				}
			}
		}
	} else {
		move = nil
	}
	rb.record(src, keys, move, res)
	return nil
}

func (rb *rebalancer) record(src *shard, keys, move []string, res []keymove.Result) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	r := &rb.report
	defer rb.c.stats.rebalance.record(r)
	r.Scanned += int64(len(keys))
	r.Skipped += int64(len(keys) - len(move))
	for i, m := range res {
		switch {
		case m.Err != nil:
			r.Failed++
		case m.Absent, m.Settled:
			r.Skipped++
		default:
			r.Moved++
			r.Bytes += int64(m.Bytes)
			to := rb.top.shards[rb.top.ring.LookupIndex(move[i])].Name
			r.Moves[[2]string{src.Name, to}]++
		}
	}
	if rb.opt.Progress != nil {
		p := r.RebalanceProgress
		p.Elapsed = time.Since(rb.start)
		rb.opt.Progress(p)
	}
}

// verify scans every source again and counts the displaced keys still
// there, and the strays.
func (rb *rebalancer) verify(ctx context.Context, sources []*shard) error {
	var misplaced, strays int64
	for _, s := range sources {
		iter := s.client.Scan(ctx, 0, "", int64(rb.opt.BatchSize)).Iterator()
		for iter.Next(ctx) {
			switch rb.place(s, iter.Val()) {
			case displaced:
				misplaced++
			case stray:
				strays++
			}
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("redshard: rebalance: verifying shard %s: %w", s.Name, err)
		}
	}
	if rb.opt.MoveStrays {
		misplaced += strays
	}
	rb.mu.Lock()
	rb.report.Verified, rb.report.Misplaced, rb.report.Strays = true, misplaced, strays
	rb.mu.Unlock()
	return nil
}
