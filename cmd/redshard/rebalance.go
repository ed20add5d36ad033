package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/redshard/redshard"
)

func runRebalance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("rebalance", "(--config FILE | --shard ...) (--add ... | --remove ... | --weight ... | --to-config FILE)... --yes", `
Rebalance moves the keys of a membership change. It builds a client with the
current shard list (--config or --shard), switches it to the new list
(--add/--remove/--weight, applied in order, or --to-config) with SetShards,
and runs Client.Rebalance: every shard is SCANned, each key whose owner
changed is copied to its new owner (DUMP, PTTL, RESTORE without REPLACE, so
a newer value already there wins) and deleted from the old shard only if it
still holds the copied value. A final pass checks every key is on its owner.

It prints the plan first and does nothing without --yes.

It is resumable: Rebalance is idempotent, so after an interruption (Ctrl-C,
a lost connection, failed keys) run the same command again; keys already
moved are no longer found on their old shard and are skipped.

Before running it, give every client of the fleet the new list (SetShards)
or restart them with it: a client still on the old list keeps writing moved
keys to their old shard, where they are lost once moved or shadowed (see
docs/operations.md).`)
	var src source
	src.register(f, "current shards")
	var changes []change
	registerChanges(f, &changes)
	toConfig := f.String("to-config", "", "configuration `file` whose shard list is the new one (instead of --add/--remove/--weight; connection settings still come from --config)")
	yes := f.Bool("yes", false, "really move keys (without it, only the plan is printed)")
	rate := f.Float64("rate", 0, "cap on keys scanned per second over all shards, 0 for no cap")
	batch := f.Int("batch", 500, "SCAN COUNT and keys moved per pipelined batch")
	skipVerify := f.Bool("skip-verify", false, "skip the final pass that checks every key is on its owner")
	noProgress := f.Bool("no-progress", false, "do not draw the progress bar (on stderr)")
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	switch {
	case *rate < 0:
		return usagef("--rate %g: must not be negative", *rate)
	case *batch <= 0:
		return usagef("--batch %d: must be positive", *batch)
	}
	opt, to, p, err := planChange(&src, changes, *toConfig, nil)
	if err != nil {
		return err
	}
	p.write(stdout)
	fmt.Fprintln(stdout)
	if !*yes {
		fmt.Fprintln(stderr, "redshard rebalance: nothing done: add --yes to switch to the new shard list and move the keys")
		return errReported
	}

	c, err := redshard.NewClient(opt)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := ping(ctx, c, "current"); err != nil {
		return err
	}
	if err := c.SetShards(ctx, to); err != nil {
		return fmt.Errorf("SetShards: %w", err)
	}
	if err := ping(ctx, c, "new"); err != nil {
		return err
	}

	var bar *progressBar
	if !*noProgress {
		bar = &progressBar{w: stderr}
	}
	rep, err := c.Rebalance(ctx, redshard.RebalanceOptions{
		BatchSize:  *batch,
		Rate:       *rate,
		SkipVerify: *skipVerify,
		Progress:   bar.update, // nil-safe
	})
	bar.finish(err == nil)
	writeReport(stdout, rep)
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("interrupted (%w); the keys moved so far are on their new owner: run the same command again to resume", err)
	case err != nil:
		return fmt.Errorf("%w; run the same command again to resume (keys already moved are skipped)", err)
	case rep.Failed > 0:
		return fmt.Errorf("%d keys could not be moved and stay where they were; run the same command again to retry them", rep.Failed)
	case rep.Misplaced > 0:
		return fmt.Errorf("verification found %d keys not on their owner (written meanwhile by a client on the old shard list?); run the same command again", rep.Misplaced)
	}
	return nil
}

// ping checks that every current shard of c answers.
func ping(ctx context.Context, c *redshard.Client, which string) error {
	var errs []error
	for _, s := range c.Shards() {
		sc, _ := c.ShardClient(s.Name)
		if err := sc.Ping(ctx).Err(); err != nil {
			errs = append(errs, fmt.Errorf("shard %s: %w", s, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s shards not reachable, nothing moved:\n%w", which, err)
	}
	return nil
}

// progressBar draws Rebalance's progress: keys scanned against the keys
// the shards held at the start (RebalanceProgress.Total), with rate and
// ETA, and the keys and bytes moved. A nil *progressBar draws nothing.
type progressBar struct {
	w   io.Writer
	bar *progressbar.ProgressBar
	max int64
}

func (b *progressBar) update(p redshard.RebalanceProgress) {
	if b == nil {
		return
	}
	if b.bar == nil {
		b.max = max(p.Total, p.Scanned, 1)
		b.bar = progressbar.NewOptions64(b.max,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("keys"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetSpinnerChangeInterval(0), // no goroutine
		)
	}
	if p.Scanned > b.max {
		// More keys than DBSIZE said (writes meanwhile, or the final check).
		b.max = p.Scanned
		b.bar.ChangeMax64(b.max)
	}
	b.bar.Describe(fmt.Sprintf("moved %d (%s), failed %d", p.Moved, humanBytes(p.Bytes), p.Failed))
	_ = b.bar.Set64(p.Scanned)
}

func (b *progressBar) finish(complete bool) {
	if b == nil || b.bar == nil {
		return
	}
	if complete {
		_ = b.bar.Finish()
	} else {
		_ = b.bar.Exit()
	}
	fmt.Fprintln(b.w)
}

// writeReport prints Rebalance's report.
func writeReport(w io.Writer, r redshard.RebalanceReport) {
	fmt.Fprintf(w, "rebalance report (ring epoch %d, %s)\n", r.Epoch, r.Elapsed.Round(time.Millisecond))
	t := &table{}
	t.add("scanned", fmt.Sprint(r.Scanned))
	t.add("moved", fmt.Sprint(r.Moved), humanBytes(r.Bytes))
	t.add("skipped", fmt.Sprint(r.Skipped), "already on their owner, or gone")
	t.add("failed", fmt.Sprint(r.Failed))
	t.align = "lrl"
	t.write(w)
	if len(r.Moves) > 0 {
		fmt.Fprintln(w, "\nkeys moved:")
		keys := make([][2]string, 0, len(r.Moves))
		for k := range r.Moves {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b [2]string) int {
			return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
		})
		m := &table{align: "ll"}
		m.add("from", "to", "keys")
		for _, k := range keys {
			m.add(k[0], k[1], fmt.Sprint(r.Moves[k]))
		}
		m.write(w)
	}
	switch {
	case !r.Verified:
		fmt.Fprintln(w, "\nverification: not run")
	case r.Misplaced == 0:
		fmt.Fprintln(w, "\nverification: every key is on its owner")
	default:
		fmt.Fprintf(w, "\nverification: %d keys are not on their owner\n", r.Misplaced)
	}
}

// humanBytes formats n bytes with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), 0
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[i-1])
}
