package rebalance

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/redshard/redshard/internal/keymove"
)

// Placement says what a run does with a key found on a source.
type Placement int

const (
	InPlace   Placement = iota // on its owner (or an internal key)
	Displaced                  // on its previous owner in the change: move it
	Stray                      // neither: leave it unless Options.MoveStrays
)

// Source is a server that may hold keys to move.
type Source struct {
	Name   string        // in errors and in Report.Moves
	Client *redis.Client // scanned, and the keys' DBSIZE counted
}

// Options are a run's settings, resolved by the root.
type Options struct {
	BatchSize  int     // the SCAN COUNT and the most keys moved per batch (> 0)
	Rate       float64 // keys scanned per second over all sources; 0: no cap
	SkipVerify bool    // no final pass (Report.Verified stays false)
	MoveStrays bool    // move strays as displaced keys
	// Progress, if set, is called after every batch with the totals so
	// far. Calls are serialised.
	Progress func(Progress)
	// BatchBudget, if not 0, is how long a batch should take at most (a
	// quarter of a fleet process's lease): see BatchSizer.
	BatchBudget time.Duration
}

// Seam is what a run needs from the client: where a key belongs, how to
// move a batch, and its counters. The funcs are called from one goroutine
// per source at once.
type Seam struct {
	// Place says what to do with key, found on sources[src].
	Place func(src int, key string) Placement
	// Owner names the owner of key, for Report.Moves.
	Owner func(key string) string
	// Move moves keys (displaced ones, and strays with MoveStrays) from
	// sources[src] to their owners, and returns one result per key; an
	// error stops the run and is returned as it is. Nil: nothing is moved
	// and every key counts as skipped.
	Move func(ctx context.Context, src int, keys []string) ([]keymove.Result, error)
	// Started, if set, is called once the sources' DBSIZE is counted,
	// before the first batch: total is Progress.Total.
	Started func(total int64)
	// Record, if set, is called after every batch with the totals so far,
	// after Options.Progress, under the same serialisation.
	Record func(Progress)
}

// Progress counts what a run has done so far (the root's
// RebalanceProgress, field for field).
type Progress struct {
	Scanned int64 // keys seen, each time SCAN returned one
	Moved   int64 // keys copied to their owner and deleted from the source
	Skipped int64 // keys in place, or gone before they could be moved
	Failed  int64 // keys that could not be moved
	Bytes   int64 // serialized bytes moved
	Total   int64 // the sources' DBSIZE at the start
	Elapsed time.Duration
}

// Report is the outcome of a run.
type Report struct {
	Progress
	Moves     map[[2]string]int64 // moved keys by (source, owner) name
	Verified  bool                // the final pass ran
	Misplaced int64               // displaced keys (and strays, with MoveStrays) it found
	Strays    int64               // strays it found
}

// maxPasses bounds the drains of a run: a server whose SCAN can skip keys
// deleted under it (miniredis; Redis itself guarantees it cannot) leaves
// keys behind, which the verification finds and another pass moves.
const maxPasses = 3

// Run drains every source in parallel (SCAN in batches of BatchSize, each
// batch's keys placed, moved and counted), then verifies (unless
// SkipVerify) by scanning every source again, and starts another pass
// while keys are still misplaced, up to three passes. It stops when ctx is
// done and returns the report so far with ctx's error.
func Run(ctx context.Context, sources []Source, opt Options, seam Seam) (Report, error) {
	r := &run{sources: sources, opt: opt, seam: seam, start: time.Now(),
		report: Report{Moves: map[[2]string]int64{}}}
	for _, s := range sources {
		if n, err := s.Client.DBSize(ctx).Result(); err == nil {
			r.report.Total += n
		}
	}
	if seam.Started != nil {
		seam.Started(r.report.Total)
	}
	var err error
	for pass := 0; pass < maxPasses; pass++ {
		g, gctx := errgroup.WithContext(ctx)
		for i := range sources {
			g.Go(func() error { return r.drain(gctx, i) })
		}
		if err = g.Wait(); err != nil || opt.SkipVerify {
			break
		}
		if err = r.verify(ctx); err != nil || r.misplaced() == 0 {
			break
		}
	}
	r.mu.Lock()
	report := r.report
	report.Elapsed = time.Since(r.start)
	r.mu.Unlock()
	return report, err
}

// run is the state of one Run.
type run struct {
	sources []Source
	opt     Options
	seam    Seam
	start   time.Time

	paceMu sync.Mutex // guards paced
	paced  int64      // keys admitted by pace so far

	mu     sync.Mutex // guards report and serialises Record and Progress
	report Report
}

func (r *run) misplaced() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.report.Misplaced
}

// drain moves the misplaced keys of one source.
func (r *run) drain(ctx context.Context, src int) error {
	s := r.sources[src]
	var cursor uint64
	size := NewBatchSizer(r.opt.BatchSize, r.opt.BatchBudget)
	for {
		// go-redis does not check ctx before sending; stop between batches.
		if err := ctx.Err(); err != nil {
			return err
		}
		keys, next, err := s.Client.Scan(ctx, cursor, "", int64(r.opt.BatchSize)).Result()
		if err != nil {
			return fmt.Errorf("redshard: rebalance: scanning shard %s: %w", s.Name, err)
		}
		// SCAN may return more than COUNT keys: move them a batch at a time.
		for len(keys) > 0 {
			n := min(len(keys), size.Size())
			if err := r.pace(ctx, n); err != nil {
				return err
			}
			start := time.Now()
			if err := r.moveBatch(ctx, src, keys[:n]); err != nil {
				return err
			}
			size.Took(time.Since(start))
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

// pace waits until n more keys may be moved without going over Rate since
// the start of the run: a batch of n keys is admitted once the run has
// lasted (keys admitted so far + n) / Rate.
func (r *run) pace(ctx context.Context, n int) error {
	if r.opt.Rate == 0 {
		return nil
	}
	r.paceMu.Lock()
	r.paced += int64(n)
	due := r.start.Add(time.Duration(float64(r.paced) / r.opt.Rate * float64(time.Second)))
	r.paceMu.Unlock()
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

// moveBatch moves the displaced keys among keys, found on sources[src]
// (and the strays, with MoveStrays).
func (r *run) moveBatch(ctx context.Context, src int, keys []string) error {
	var move []string
	for _, k := range keys {
		switch r.seam.Place(src, k) {
		case Displaced:
			move = append(move, k)
		case Stray:
			if r.opt.MoveStrays {
				move = append(move, k)
			}
		}
	}
	var res []keymove.Result
	if len(move) > 0 && r.seam.Move != nil {
		var err error
		if res, err = r.seam.Move(ctx, src, move); err != nil {
			return err
		}
	} else {
		move = nil
	}
	r.record(src, keys, move, res)
	return nil
}

func (r *run) record(src int, keys, move []string, res []keymove.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &r.report
	p.Scanned += int64(len(keys))
	p.Skipped += int64(len(keys) - len(move))
	for i, m := range res {
		switch {
		case m.Err != nil:
			p.Failed++
		case m.Absent, m.Settled:
			p.Skipped++
		default:
			p.Moved++
			p.Bytes += int64(m.Bytes)
			p.Moves[[2]string{r.sources[src].Name, r.seam.Owner(move[i])}]++
		}
	}
	if r.opt.Progress != nil {
		pr := p.Progress
		pr.Elapsed = time.Since(r.start)
		r.opt.Progress(pr)
	}
	if r.seam.Record != nil {
		r.seam.Record(p.Progress)
	}
}

// verify scans every source again and counts the displaced keys still
// there, and the strays.
func (r *run) verify(ctx context.Context) error {
	var misplaced, strays int64
	for i, s := range r.sources {
		iter := s.Client.Scan(ctx, 0, "", int64(r.opt.BatchSize)).Iterator()
		for iter.Next(ctx) {
			switch r.seam.Place(i, iter.Val()) {
			case Displaced:
				misplaced++
			case Stray:
				strays++
			}
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("redshard: rebalance: verifying shard %s: %w", s.Name, err)
		}
	}
	if r.opt.MoveStrays {
		misplaced += strays
	}
	r.mu.Lock()
	r.report.Verified, r.report.Misplaced, r.report.Strays = true, misplaced, strays
	r.mu.Unlock()
	return nil
}
