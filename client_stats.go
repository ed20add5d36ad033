package redshard

import "github.com/redshard/redshard/hotkey"

// The Client's snapshots of its state and counters: methods its users
// call and the core never does, so that the types they fill (stats.go,
// hot_stats.go) need nothing of the core.

// Stats returns a snapshot of the client's state and counters. It is safe
// for concurrent use.
func (c *client) Stats() Stats {
	top := c.top.Load()
	shares := top.ring.Shares()
	st := Stats{
		Epoch:         top.epoch,
		HandoffActive: top.handoff != nil,
		HandoffMoved:  c.stats.handoffMoved.Load(),
		HandoffErrors: c.stats.handoffErrors.Load(),

		ShardDowns:        c.stats.shardDowns.Load(),
		StandInCommands:   c.stats.standInCommands.Load(),
		OutageKeysCleaned: c.stats.outageKeysCleaned.Load(),
	}
	for _, s := range top.shards {
		st.Shards = append(st.Shards, ShardStats{
			Name: s.Name, Addr: s.Addr, Weight: s.Weight, Share: shares[s.Name], Down: s.down.Load(),
		})
	}
	r := &c.stats.rebalance
	st.Rebalance = RebalanceStats{Running: r.running.Load(), Runs: r.runs.Load(), Epoch: r.epoch.Load(),
		Scanned: r.scanned.Load(), Moved: r.moved.Load(), Failed: r.failed.Load(), Total: r.total.Load()}
	// Hot keys
	st.Hot = c.hotStats()
	return st
}

// HotKeys returns the keys this client counts most, highest estimated rate
// first (at most 20), whether hot or not (see hotkey.Key.Hot). It returns
// nil when Options.HotKeys is nil. It is meant for monitoring: it locks and
// allocates.
func (c *client) HotKeys() []hotkey.Key {
	if c.hot == nil {
		return nil
	}
	return c.hot.Top()
}

// hotStats fills Stats.Hot.
func (c *client) hotStats() HotStats {
	h := c.hot
	if h == nil {
		return HotStats{}
	}
	n := h.Counts()
	st := HotStats{
		Mitigation:     c.cfg.hot.Mitigation,
		CacheHits:      n.Hits,
		CacheMisses:    n.Misses,
		Coalesced:      n.Coalesced,
		SplitReads:     n.SplitReads,
		SplitFallbacks: n.SplitFallbacks,
		CopyFills:      n.CopyFills,
		Invalidations:  n.Invalidations,
		TrackingLost:   n.TrackingLost,
		Cache:          h.CacheStats(),
	}
	for _, k := range h.Top() {
		if k.Hot {
			st.Keys = append(st.Keys, k)
		}
	}
	for _, s := range c.top.Load().shards {
		x := h.ShardStats(s.hot.Load())
		st.Shards = append(st.Shards, HotShardStats{
			Name:          s.Name,
			Invalidation:  InvalidationState(x.Invalidation),
			Connected:     x.Connected,
			Invalidations: x.Invalidations,
		})
	}
	return st
}
