package redshard

import (
	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/localcache"
)

// HotStats describes hot-key detection and mitigation (Stats.Hot). It is
// the zero value when Options.HotKeys is nil.
type HotStats struct {
	// Mitigation is the configured mitigation; 0 when HotKeys is off.
	Mitigation Mitigation
	// Keys are the keys hot now, highest rate first (at most 20), with
	// their estimated rates in commands per second.
	Keys []hotkey.Key

	// CacheHits and CacheMisses count LocalCache reads of hot keys answered
	// from the local cache and read from the shard.
	CacheHits, CacheMisses int64
	// Coalesced counts hot reads (LocalCache misses) and copy fills that
	// waited for another caller's identical request instead of sending
	// their own.
	Coalesced int64
	// SplitReads counts hot reads answered by a split copy; SplitFallbacks
	// those that a copy could not settle (an empty or failed reply) and the
	// owner answered. CopyFills counts copies made.
	SplitReads, SplitFallbacks, CopyFills int64
	// Invalidations counts keys named by the servers' invalidation
	// messages (CLIENT TRACKING). TrackingLost counts the times a shard's
	// cached replies were all dropped because invalidations may have been
	// missed (the invalidation connection or a reading connection closed).
	Invalidations, TrackingLost int64

	// Shards describes, per current shard, how its cached replies are kept
	// fresh. A shard that has served no hot read yet is InvalidationUnprobed.
	Shards []HotShardStats

	// Cache is the local cache's own statistics (LocalCache only).
	Cache localcache.Stats
}

// HotShardStats is the hot-key state of one shard.
type HotShardStats struct {
	Name string
	// Invalidation is how the shard's cached replies are kept fresh.
	Invalidation InvalidationState
	// Connected reports whether the shard's invalidation connection is
	// subscribed, so that reads from the shard can be cached and tracked.
	Connected bool
	// Invalidations counts keys named by this shard's invalidation messages.
	Invalidations int64
}

// HotKeys returns the keys this client counts most, highest estimated rate
// first (at most 20), whether hot or not (see hotkey.Key.Hot). It returns
// nil when Options.HotKeys is nil. It is meant for monitoring: it locks and
// allocates.
func (c *client) HotKeys() []hotkey.Key {
	if c.hot == nil {
		return nil
	}
	return c.hot.det.Top(hotTopN)
}

// hotStats fills Stats.Hot.
func (c *client) hotStats() HotStats {
	h := c.hot
	if h == nil {
		return HotStats{}
	}
	st := HotStats{
		Mitigation:     h.opt.Mitigation,
		CacheHits:      h.stats.hits.Load(),
		CacheMisses:    h.stats.misses.Load(),
		Coalesced:      h.stats.coalesced.Load(),
		SplitReads:     h.stats.splitReads.Load(),
		SplitFallbacks: h.stats.fallbacks.Load(),
		CopyFills:      h.stats.fills.Load(),
		Invalidations:  h.stats.invalidations.Load(),
		TrackingLost:   h.stats.trackingLost.Load(),
		Cache:          h.cache.Stats(),
	}
	for _, k := range h.det.Top(hotTopN) {
		if k.Hot {
			st.Keys = append(st.Keys, k)
		}
	}
	for _, s := range c.top.Load().shards {
		hs := HotShardStats{Name: s.Name, Invalidation: InvalidationUnprobed}
		if h.opt.Mitigation != LocalCache || h.opt.Tracking == TrackingOff {
			hs.Invalidation = InvalidationOff
		}
		if x := s.hot.Load(); x != nil {
			hs.Invalidation = InvalidationState(x.state.Load())
			hs.Connected = x.live.Load() != 0
			hs.Invalidations = x.invalidations.Load()
		}
		st.Shards = append(st.Shards, hs)
	}
	return st
}
