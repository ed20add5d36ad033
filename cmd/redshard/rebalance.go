package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"

	"github.com/redshard/redshard"
)

func runRebalance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("rebalance", "(--config FILE | --shard ...) (--add ... | --remove ... | --weight ... | --to-config FILE)... --yes [--rate N] [--batch N] [--skip-verify] [--no-progress]", `
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
	// Rebalance's own checks, one flag at a time so the error names it.
	if err := (redshard.RebalanceOptions{Rate: *rate}).Validate(); err != nil {
		return usagef("--rate %g: %w", *rate, err)
	}
	if *batch <= 0 {
		return usagef("--batch %d: must be positive", *batch)
	}
	if err := (redshard.RebalanceOptions{BatchSize: *batch}).Validate(); err != nil {
		return usagef("--batch %d: %w", *batch, err)
	}
	opt, to, p, err := planChange(&src, changes, *toConfig, nil)
	if err != nil {
		return err
	}
	if p.fromP != p.toP {
		return fmt.Errorf("--to-config %s: the placement changes (%s, to %s): rebalance switches the shard list of its own client (SetShards), "+
			"which keeps the client's placement; a new placement is a fleet's change: redshard apply (docs/operations.md, \"The ring's placement recipe\")",
			*toConfig, p.fromP, p.toP)
	}
	if sameShards(opt.Shards, to) {
		fmt.Fprintln(stdout, "nothing to do: the new shard list is the current one (same names, addresses and weights)")
		return nil
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
		bar = &progressBar{w: stderr, start: time.Now()}
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

// sameShards reports whether a and b are the same shards in any order:
// same names, addresses (or Sentinel masters) and effective weights. The
// ring and the clients of such lists are the same, so there is nothing to
// switch and nothing to move. (rebalance refuses a new placement before
// this.)
func sameShards(a, b []redshard.Shard) bool {
	if len(a) != len(b) {
		return false
	}
	byName := map[string]redshard.Shard{}
	for _, s := range a {
		byName[s.Name] = s
	}
	for _, s := range b {
		o, ok := byName[s.Name]
		if !ok || o.Addr != s.Addr || weightOf(o) != weightOf(s) || !sameFailover(o.Failover, s.Failover) {
			return false
		}
	}
	return true
}

// sameFailover reports whether a and b name the same master and the same
// Sentinels, in any order.
func sameFailover(a, b *redis.FailoverOptions) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.MasterName == b.MasterName &&
		slices.Equal(slices.Sorted(slices.Values(a.SentinelAddrs)), slices.Sorted(slices.Values(b.SentinelAddrs)))
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
// the shards held at the start (RebalanceProgress.Total), the keys and
// bytes moved, and the scan rate in keys/s with the time left. A nil
// *progressBar draws nothing.
//
// The rate is worked out here, always in keys/s: progressbar's own rate
// switches units (a first frame at 0 reads "0 keys/hr") and its ETA
// divides by that zero.
type progressBar struct {
	w     io.Writer
	now   func() time.Time // time.Now when nil
	bar   *progressbar.ProgressBar
	max   int64
	start time.Time // the rate's start: when Rebalance began, else the first update
}

func (b *progressBar) update(p redshard.RebalanceProgress) {
	if b == nil {
		return
	}
	now := time.Now
	if b.now != nil {
		now = b.now
	}
	if b.start.IsZero() {
		b.start = now()
	}
	if b.bar == nil {
		b.max = max(p.Total, p.Scanned, 1)
		b.bar = progressbar.NewOptions64(b.max,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetSpinnerChangeInterval(0), // no goroutine
		)
	}
	if p.Scanned > b.max {
		// More keys than DBSIZE said (writes meanwhile, or the final check).
		b.max = p.Scanned
		b.bar.ChangeMax64(b.max)
	}
	b.bar.Describe(progressText(p, b.max, now().Sub(b.start)))
	_ = b.bar.Set64(p.Scanned)
}

// progressText describes p, elapsed after Rebalance began, for
// a bar of max keys: "moved 120 (12.0 KiB), failed 0, 5210 keys/s, 3s
// left". The rate is left out until a key has been scanned over a
// measurable time, rather than shown as 0.
func progressText(p redshard.RebalanceProgress, max int64, elapsed time.Duration) string {
	text := fmt.Sprintf("moved %d (%s), failed %d", p.Moved, humanBytes(p.Bytes), p.Failed)
	if p.Scanned == 0 || elapsed < time.Millisecond {
		return text
	}
	rate := float64(p.Scanned) / elapsed.Seconds()
	if rate >= 10 {
		text += fmt.Sprintf(", %.0f keys/s", rate)
	} else {
		text += fmt.Sprintf(", %.2g keys/s", rate) // a slow start is not "0"
	}
	if left := max - p.Scanned; left > 0 {
		eta := time.Duration(float64(left) / rate * float64(time.Second))
		text += fmt.Sprintf(", %v left", eta.Round(time.Second))
	}
	return text
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
	writeReportTitled(w, fmt.Sprintf("rebalance report (ring epoch %d, %s)", r.Epoch, r.Elapsed.Round(time.Millisecond)), r)
}

// writeReportTitled prints Rebalance's report under title.
func writeReportTitled(w io.Writer, title string, r redshard.RebalanceReport) {
	fmt.Fprintln(w, title)
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
