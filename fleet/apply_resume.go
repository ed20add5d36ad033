package fleet

import (
	"context"
	"errors"
	"maps"

	"github.com/redshard/redshard"
)

// maxFruitlessRebalances is how many data migrations in a row apply runs
// that move no key before it gives up and reports the last one's error.
const maxFruitlessRebalances = 3

// rebalanceResuming runs the data migration of apply's Migrate phase, and
// runs it again, as an operator would run apply again, when it stopped
// short of the end for a reason of its own while ctx is still live: a
// batch cut at the driver's lease (a process's moves end before it could
// be fenced, see the root's moveContext), which a loaded machine or a slow server
// makes likely, or keys that failed to move. Each run resumes where the
// last left off (Rebalance is safe to repeat). It carries on while the
// runs make progress, and gives up after maxFruitlessRebalances runs in a
// row that moved nothing, with the last run's error. The report adds up
// the runs' counts; Failed (the keys still not moved), Finished,
// Verified, Misplaced and Strays are the last run's.
func (d *driver) rebalanceResuming(ctx context.Context) (redshard.RebalanceReport, error) {
	var total redshard.RebalanceReport
	fruitless := 0
	for {
		rep, err := d.client.Rebalance(ctx, d.opt.Rebalance)
		total = addRebalanceReports(total, rep)
		if (err == nil && rep.Finished) || ctx.Err() != nil || !resumable(err) {
			return total, err
		}
		if rep.Moved == 0 {
			fruitless++
		} else {
			fruitless = 0
		}
		if fruitless >= maxFruitlessRebalances {
			return total, err
		}
	}
}

// resumable reports whether a data migration that returned err (nil: it
// ended with keys left) is worth running again at once: it ran out of a
// deadline of its own (a batch cut at the lease) rather than failing.
func resumable(err error) bool {
	return err == nil || errors.Is(err, context.DeadlineExceeded)
}

// addRebalanceReports adds the counts of a later run, next, to sum; the
// rest, Failed included, is next's.
func addRebalanceReports(sum, next redshard.RebalanceReport) redshard.RebalanceReport {
	out := next
	out.Scanned += sum.Scanned
	out.Moved += sum.Moved
	out.Skipped += sum.Skipped
	out.Bytes += sum.Bytes
	out.Elapsed += sum.Elapsed
	out.Total = max(sum.Total, next.Total)
	if len(sum.Moves) > 0 {
		out.Moves = maps.Clone(next.Moves)
		if out.Moves == nil {
			out.Moves = map[[2]string]int64{}
		}
		for k, n := range sum.Moves {
			out.Moves[k] += n
		}
	}
	return out
}
