package redshard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
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
	// SkipVerify skips the final pass that checks every key lives on its owner.
	SkipVerify bool
}

// RebalanceProgress counts what Rebalance has done so far.
type RebalanceProgress struct {
	Scanned int64 // keys seen on the shards scanned
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
	// Verified reports whether the final pass ran; Misplaced counts keys it
	// found on a shard that does not own them (0 after a complete run
	// without concurrent writers on an older ring).
	Verified  bool
	Misplaced int64
}

// Rebalance moves every key that does not live on its owner under the
// current ring to that owner: it SCANs every shard (and the shards removed
// by the last SetShards, while their handoff runs) in batches, copies each
// misplaced key with DUMP, PTTL and RESTORE without REPLACE (a newer value
// already on the owner wins), then deletes it from the old shard only if it
// still holds the copied value, so a write that reached the old shard
// meanwhile is not lost. It is safe to run while the client serves traffic,
// and to run again after an interruption: keys already moved are no longer
// found on their old shard. When every key has moved and the final check
// finds none misplaced, the handoff of the last SetShards ends and the
// clients of removed shards are closed (not with SkipVerify).
//
// Rebalance stops when ctx is done and returns the report so far with
// ctx's error.
func (c *Client) Rebalance(ctx context.Context, opt RebalanceOptions) (RebalanceReport, error) {
	opt, err := opt.resolve()
	if err != nil {
		return RebalanceReport{}, err
	}
	top, err := c.topology()
	if err != nil {
		return RebalanceReport{}, err
	}
	sources := top.sources()
	rb := &rebalancer{c: c, top: top, opt: opt, start: time.Now(),
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
	if report.Failed == 0 && report.Misplaced == 0 && report.Verified {
		c.mu.Lock()
		if cur := c.top.Load(); cur.epoch == top.epoch && !c.closed.Load() {
			c.releaseOrphansLocked(cur)
		}
		c.mu.Unlock()
	}
	return report, nil
}

// sources lists the shards that may hold keys: the current ones and the
// removed ones whose keys have not been moved yet.
func (t *topology) sources() []*shard {
	return append(slices.Clone(t.shards), t.orphans...)
}

const maxRebalancePasses = 3

func (rb *rebalancer) misplaced() int64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.report.Misplaced
}

type rebalancer struct {
	c     *Client
	top   *topology
	opt   RebalanceOptions
	start time.Time

	paceMu sync.Mutex // guards paced
	paced  int64      // keys admitted by pace so far

	mu     sync.Mutex // guards report and serialises Progress
	report RebalanceReport
}

// drain moves the misplaced keys of one shard.
func (rb *rebalancer) drain(ctx context.Context, src *shard) error {
	var cursor uint64
	for {
		// go-redis does not check ctx before sending; stop between batches.
		if err := ctx.Err(); err != nil {
			return err
		}
		keys, next, err := src.client.Scan(ctx, cursor, "", int64(rb.opt.BatchSize)).Result()
		if err != nil {
			return fmt.Errorf("redshard: rebalance: scanning shard %s: %w", src.Name, err)
		}
		// SCAN may return more than COUNT keys: move them BatchSize at a time.
		for len(keys) > 0 {
			n := min(len(keys), rb.opt.BatchSize)
			if err := rb.pace(ctx, n); err != nil {
				return err
			}
			if err := rb.moveBatch(ctx, src, keys[:n]); err != nil {
				return err
			}
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

// moveBatch moves the misplaced keys among keys, found on src.
func (rb *rebalancer) moveBatch(ctx context.Context, src *shard, keys []string) error {
	var move []string
	for _, k := range keys {
		if !isInternalKey(k) && rb.top.shards[rb.top.ring.LookupIndex(k)].Name != src.Name {
			move = append(move, k)
		}
	}
	var res []migration
	if len(move) > 0 {
		var err error
		res, err = moveKeys(ctx, src.client, move, func(k string) *redis.Client {
			return rb.top.shards[rb.top.ring.LookupIndex(k)].client
		})
		if err != nil {
			return fmt.Errorf("redshard: rebalance: moving keys from shard %s: %w", src.Name, err)
		}
	}
	rb.record(src, keys, move, res)
	return nil
}

func (rb *rebalancer) record(src *shard, keys, move []string, res []migration) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	r := &rb.report
	defer rb.c.stats.rebalance.record(r)
	r.Scanned += int64(len(keys))
	r.Skipped += int64(len(keys) - len(move))
	for i, m := range res {
		switch {
		case m.err != nil:
			r.Failed++
		case m.absent:
			r.Skipped++
		default:
			r.Moved++
			r.Bytes += int64(m.bytes)
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

// verify scans every source again and counts keys not on their owner.
func (rb *rebalancer) verify(ctx context.Context, sources []*shard) error {
	var misplaced int64
	for _, s := range sources {
		iter := s.client.Scan(ctx, 0, "", int64(rb.opt.BatchSize)).Iterator()
		for iter.Next(ctx) {
			if k := iter.Val(); !isInternalKey(k) && rb.top.shards[rb.top.ring.LookupIndex(k)].Name != s.Name {
				misplaced++
			}
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("redshard: rebalance: verifying shard %s: %w", s.Name, err)
		}
	}
	rb.mu.Lock()
	rb.report.Verified, rb.report.Misplaced = true, misplaced
	rb.mu.Unlock()
	return nil
}

// isInternalKey reports whether key is one of redshard's own, which live
// off their ring owner on purpose and expire on their own: split copies of
// hot keys and GetOrLoad leases.
func isInternalKey(key string) bool {
	return isSplitCopy(key) || strings.HasPrefix(key, LeaseKeyPrefix)
}
