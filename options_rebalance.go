package redshard

import (
	"math"
	"time"
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

// Bounds of RebalanceOptions.
const (
	defaultBatchSize = 500
	maxBatchSize     = 1 << 20
	// minRate and maxRate bound RebalanceOptions.Rate (keys per second).
	minRate = 1e-3
	maxRate = 1e9
)

// Validate reports whether Rebalance would accept o: the first invalid
// field, named, in an error matching ErrInvalidRebalanceOptions.
func (o RebalanceOptions) Validate() error {
	_, err := o.resolve()
	return err
}

// resolve validates o and returns it with defaults filled in.
func (o RebalanceOptions) resolve() (RebalanceOptions, error) {
	k := ErrInvalidRebalanceOptions
	switch {
	case o.BatchSize < 0 || o.BatchSize > maxBatchSize:
		return o, invalid(k, "BatchSize", "%d is outside [0, %d]", o.BatchSize, maxBatchSize)
	case math.IsNaN(o.Rate) || o.Rate < 0:
		return o, invalid(k, "Rate", "%v: want 0 (no cap) or a number of keys per second", o.Rate)
	case o.Rate != 0 && (o.Rate < minRate || o.Rate > maxRate):
		return o, invalid(k, "Rate", "%v keys/s is outside [%g, %g] (0 means no cap)", o.Rate, minRate, maxRate)
	}
	if o.BatchSize == 0 {
		o.BatchSize = defaultBatchSize
	}
	return o, nil
}
