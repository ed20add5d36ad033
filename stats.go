package redshard

import "sync/atomic"

// counters are the client's event counters, updated with atomics.
type counters struct {
	handoffMoved  atomic.Int64 // keys brought over from a previous owner on first use
	handoffErrors atomic.Int64 // handoff migrations that failed (the command went on)

	shardDowns        atomic.Int64 // shards marked down
	standInCommands   atomic.Int64 // commands served by a stand-in shard (Failover)
	outageKeysCleaned atomic.Int64 // keys deleted when a shard came back
}

// Stats is a snapshot of a client's state and counters.
type Stats struct {
	// Epoch counts membership changes: 1 after NewClient, +1 per SetShards.
	Epoch uint64
	// Shards lists the current shards, sorted by name.
	Shards []ShardStats
	// HandoffActive reports whether keys are still being brought over from
	// their previous owners (see SetShards).
	HandoffActive bool
	// HandoffMoved counts keys brought over from a previous owner on first use.
	HandoffMoved int64
	// HandoffErrors counts handoff migrations that failed; the commands that
	// asked for them went on against the new owner.
	HandoffErrors int64
	// ShardDowns counts the times a shard was marked down.
	ShardDowns int64
	// StandInCommands counts commands a stand-in shard served for a down
	// one (HealthOptions.Failover).
	StandInCommands int64
	// OutageKeysCleaned counts keys deleted from returning shards and their
	// stand-ins because they were written during an outage.
	OutageKeysCleaned int64

	// Hot keys

	// Hot describes hot-key detection and mitigation: the keys hot now, the
	// local cache, split copies and invalidation tracking. It is the zero
	// value when Options.HotKeys is nil.
	Hot HotStats
}

// ShardStats describes one shard.
type ShardStats struct {
	Name   string
	Addr   string
	Weight float64
	Share  float64 // fraction of the hash space the shard owns
	Down   bool    // marked down by the health monitor
}

// Stats returns a snapshot of the client's state and counters. It is safe
// for concurrent use.
func (c *Client) Stats() Stats {
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
	// Hot keys
	st.Hot = c.hotStats()
	return st
}
