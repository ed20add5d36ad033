package redshard

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/keymove"
	"github.com/redshard/redshard/internal/parallel"
	"github.com/redshard/redshard/internal/rebalance"
)

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
		settled = h.settledKey()
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
	list := make([]rebalance.Source, len(sources))
	for i, s := range sources {
		list[i] = rebalance.Source{Name: s.Name, Client: s.client}
	}
	ropt := rebalance.Options{BatchSize: opt.BatchSize, Rate: opt.Rate,
		SkipVerify: opt.SkipVerify, MoveStrays: opt.MoveStrays, BatchBudget: c.batchBudget()}
	if opt.Progress != nil {
		ropt.Progress = func(p rebalance.Progress) { opt.Progress(RebalanceProgress(p)) }
	}
	run, err := rebalance.Run(ctx, list, ropt, c.rebalanceSeam(top, sources, settled))
	defer c.stats.rebalance.running.Store(false)
	report := RebalanceReport{RebalanceProgress: RebalanceProgress(run.Progress), Epoch: top.epoch, Moves: run.Moves,
		Verified: run.Verified, Misplaced: run.Misplaced, Strays: run.Strays}
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

// batchBudget is how long a batch of Rebalance should take at most: in a
// fleet process every batch must end within the process's lease
// (moveContext), or all of its keys still moving fail, so a quarter lease
// (rebalance.BatchSizer); outside a fleet there is no such bound (0).
func (c *client) batchBudget() time.Duration {
	if c.fleet == nil {
		return 0
	}
	return c.fleet.Lease().Valid() / 4
}

// rebalanceSeam is top as internal/rebalance sees it, for a run over
// sources that moves keys under the settled set settled ("": move
// nothing).
func (c *client) rebalanceSeam(top *topology, sources []*shard, settled string) rebalance.Seam {
	owner := func(k string) *shard { return top.shards[top.ring.LookupIndex(k)] }
	h := top.handoff
	seam := rebalance.Seam{
		// A key is in place on its owner (an internal key anywhere),
		// displaced on its previous owner in the change, else a stray.
		Place: func(src int, k string) rebalance.Placement {
			id := sources[src].id
			if isInternalKey(k) || owner(k).id == id {
				return rebalance.InPlace
			}
			if h != nil && h.previousOwner(k).id == id {
				return rebalance.Displaced
			}
			return rebalance.Stray
		},
		Owner:   func(k string) string { return owner(k).Name },
		Started: func(total int64) { c.stats.rebalance.start(top.epoch, total) },
		Record: func(p rebalance.Progress) {
			c.stats.rebalance.record(&RebalanceReport{RebalanceProgress: RebalanceProgress(p)})
		},
	}
	if settled == "" {
		return seam
	}
	seam.Move = func(ctx context.Context, src int, keys []string) ([]keymove.Result, error) {
		if h != nil {
			if !h.enterMove() {
				return nil, fmt.Errorf("redshard: rebalance: the change ended while it ran")
			}
			defer h.leaveMove()
		}
		mctx, cancel := c.moveContext(ctx)
		defer cancel()
		from := sources[src]
		res, err := keymove.Move(mctx, from.client, keys, settled, internalIndex, func(k string) *redis.Client {
			return owner(k).client
		})
		if err != nil {
			return nil, fmt.Errorf("redshard: rebalance: moving keys from shard %s: %w", from.Name, err)
		}
		if h != nil {
			for i, m := range res {
				if m.Err == nil {
					h.markDone(keys[i])
				}
			}
		}
		return res, nil
	}
	return seam
}
