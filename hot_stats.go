package redshard

import (
	"fmt"

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

// InvalidationState is how a shard's cached hot-key replies are kept fresh
// (LocalCache). See HotShardStats.
type InvalidationState int32

const (
	// InvalidationUnprobed: no hot key has been read from the shard yet, so
	// whether its server supports CLIENT TRACKING is not known.
	InvalidationUnprobed InvalidationState = iota
	// InvalidationTracking: the server tracks the cached keys and sends
	// their invalidations to a dedicated connection; a cached reply lags
	// another process's write by the message's delivery time.
	InvalidationTracking
	// InvalidationStalenessOnly: the server refused CLIENT TRACKING; cached
	// replies live MaxStaleness (with TrackingOn: are not cached).
	InvalidationStalenessOnly
	// InvalidationOff: tracking is off (TrackingOff, or SplitCopies).
	InvalidationOff
)

// String returns "unprobed", "tracking", "staleness-only" or "off".
func (s InvalidationState) String() string {
	switch s {
	case InvalidationUnprobed:
		return "unprobed"
	case InvalidationTracking:
		return "tracking"
	case InvalidationStalenessOnly:
		return "staleness-only"
	case InvalidationOff:
		return "off"
	}
	return fmt.Sprintf("InvalidationState(%d)", int32(s))
}
