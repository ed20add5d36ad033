package redshard

import (
	"sync/atomic"
	"time"

	"github.com/redshard/redshard/registry"
)

// counters are the client's event counters, updated with atomics.
type counters struct {
	handoffMoved  atomic.Int64 // keys brought over from a previous owner on first use
	handoffErrors atomic.Int64 // handoff migrations that failed (the command went on)

	shardDowns        atomic.Int64 // shards marked down
	standInCommands   atomic.Int64 // commands served by a stand-in shard (Failover)
	outageKeysCleaned atomic.Int64 // keys deleted when a shard came back

	rebalance rebalanceCounters
}

// rebalanceCounters follow the Rebalance running now, or the last one.
type rebalanceCounters struct {
	running                       atomic.Bool
	epoch                         atomic.Uint64
	runs                          atomic.Int64
	scanned, moved, failed, total atomic.Int64
}

func (r *rebalanceCounters) start(epoch uint64, total int64) {
	r.runs.Add(1)
	r.epoch.Store(epoch)
	r.scanned.Store(0)
	r.moved.Store(0)
	r.failed.Store(0)
	r.total.Store(total)
	r.running.Store(true)
}

func (r *rebalanceCounters) record(p *RebalanceReport) {
	r.scanned.Store(p.Scanned)
	r.moved.Store(p.Moved)
	r.failed.Store(p.Failed)
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
	// HandoffErrors counts keys whose move from their previous owner, on
	// first use after a change, failed. The command that asked for the move
	// failed with that error, and the next command on the key tries the
	// move again; if the previous owner was marked down meanwhile, the
	// command fails with its ErrShardDown instead, or, with
	// HealthOptions.Failover, goes on against the new owner without the old
	// value.
	HandoffErrors int64
	// ShardDowns counts the times a shard was marked down.
	ShardDowns int64
	// StandInCommands counts commands a stand-in shard served for a down
	// one (HealthOptions.Failover).
	StandInCommands int64
	// OutageKeysCleaned counts keys deleted from returning shards and their
	// stand-ins because they were written during an outage.
	OutageKeysCleaned int64

	// Rebalance follows the Rebalance running now, or the last one.
	Rebalance RebalanceStats

	// Hot keys

	// Hot describes hot-key detection and mitigation: the keys hot now, the
	// local cache, split copies and invalidation tracking. It is the zero
	// value when Options.HotKeys is nil.
	Hot HotStats
}

// RebalanceStats follows Rebalance (Stats.Rebalance). Its counts are those
// of the run in progress, or of the last run when none is.
type RebalanceStats struct {
	Running bool   // a Rebalance is running now
	Runs    int64  // Rebalance calls that started scanning
	Epoch   uint64 // the ring the run moves keys for
	// Scanned, Moved and Failed count keys so far (see RebalanceProgress);
	// Total estimates the keys to scan.
	Scanned, Moved, Failed, Total int64
}

// ShardStats describes one shard.
type ShardStats struct {
	Name   string
	Addr   string
	Weight float64
	Share  float64 // fraction of the hash space the shard owns
	Down   bool    // marked down by the health monitor
}

// LoadStats counts what GetOrLoad did since the client was created. The
// counters are read one by one, so a snapshot taken while calls are running
// may be off by the calls in progress.
type LoadStats struct {
	Hits      uint64 // calls answered by their first GET
	Misses    uint64 // calls that missed and joined a load flight (their own or another's)
	Coalesced uint64 // calls that got the result of another caller's flight (singleflight shares)
	Canceled  uint64 // calls whose ctx ended while they waited for a flight

	Loads         uint64 // calls of a load function
	LeaseWins     uint64 // flights that took the lease
	LeaseWaits    uint64 // flights that found the lease taken and waited
	LeaseWaitHits uint64 // waits that saw the value appear
	LeaseTimeouts uint64 // waits that ended after Wait and loaded anyway

	Errors      uint64 // flights that failed: load error or panic, or a Redis error
	StoreErrors uint64 // loaded values returned but not cached because the SET failed
}

// FleetStatus is what a client following a registry reports of itself.
type FleetStatus struct {
	Member  registry.Member  // as the last heartbeat described it
	Version registry.Version // the config version the client follows
	Fenced  bool
	// LastHeartbeat is when the last successful heartbeat was sent.
	LastHeartbeat time.Time
	// Err is the last error following the registry, nil once it
	// succeeds again; except that once another live process took this
	// process's member id (registry.ErrMemberIDInUse), Err says so for
	// good, and the process stays fenced.
	Err error
}
