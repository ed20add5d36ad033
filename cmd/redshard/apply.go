package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redshard/redshard"
	rsfleet "github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
)

// confirmInput is where apply reads its confirmation; tests replace it.
var confirmInput io.Reader = os.Stdin

func runApply(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("apply", "--registry URL --config FILE [--yes] [--driver NAME] [--rate N] [--batch N] [--no-progress] [--registry-timeout D]", `
Apply changes a fleet's ring through its registry: every process of the
fleet follows the registry (redshard.Options.Registry) and moves with it,
phase by phase. Apply reads the current config from the registry, prints
the plan (as redshard plan does, from the current ring to the shards of
FILE), asks for confirmation (or --yes), then drives the change: it takes
the registry's driver lock, publishes prepare, migrate, commit and stable
one after the other, each only once every live process has acknowledged
the previous one, and moves the data (Rebalance) in migrate. A live display
on stderr shows the phase being acknowledged, how many processes are on
which phase, which are late, and for how long apply has waited; then the
progress bar of the data migration.

Only the ring of FILE is published (its shards, vnodes_per_weight and
ring_recipe); its connection settings (password_env, tls, timeouts, ...)
are used by apply's own connections to the shards. A new placement
(vnodes_per_weight or ring_recipe) moves most keys: apply takes it only
with the same shards, as a change of its own. On an empty registry apply publishes FILE as
the first config (epoch 1); nothing moves.

Ctrl-C stops it: the change stays where it is (the fleet keeps serving on
its phase) and running the same command again resumes it. While a change
is in flight, applying another FILE is refused: finish the change first (a
rollback is just another apply once it is done). A second apply while one
runs is refused, naming the holder of the lock.

The URL is redis://host:port/NAME (the password, if any, comes from
$REDSHARD_REGISTRY_PASSWORD) or etcd://host:port/PREFIX. A registry that
does not answer its first reads within --registry-timeout (5s) is an error
naming it, before anything is published.`)
	regFlag := registryFlag(f)
	regTimeout := registryTimeoutFlag(f)
	config := f.String("config", "", "JSON configuration `file` with the new shard list (format: docs/operations.md)")
	yes := f.Bool("yes", false, "apply without asking")
	driver := f.String("driver", "", "`name` of who drives the change, shown to the fleet and to a second apply (default host/pid)")
	rate := f.Float64("rate", 0, "cap on keys scanned per second over all shards while the data moves, 0 for no cap")
	batch := f.Int("batch", 500, "SCAN COUNT and keys moved per pipelined batch while the data moves")
	noProgress := f.Bool("no-progress", false, "do not draw the phase display and the progress bar (on stderr)")
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	u, err := registryArg(*regFlag)
	if err != nil {
		return err
	}
	if err := registryTimeoutArg(*regTimeout); err != nil {
		return err
	}
	if *config == "" {
		return usagef("no --config: give the configuration file of the shard list to apply")
	}
	if err := (redshard.RebalanceOptions{Rate: *rate}).Validate(); err != nil {
		return usagef("--rate %g: %w", *rate, err)
	}
	if *batch <= 0 {
		return usagef("--batch %d: must be positive", *batch)
	}
	if err := (redshard.RebalanceOptions{BatchSize: *batch}).Validate(); err != nil {
		return usagef("--batch %d: %w", *batch, err)
	}
	opt, err := redshard.LoadConfig(*config)
	if err != nil {
		return err
	}
	doc, err := encodeRingDoc(opt)
	if err != nil {
		return fmt.Errorf("%s: %w", *config, err)
	}

	reg, closeReg, err := openRegistry(u, stderr)
	if err != nil {
		return err
	}
	defer closeReg()
	// Refuse at once, before the plan, while another apply holds the
	// driver lock; Apply takes the lock itself (and refuses the same way
	// if another apply started meanwhile). Both first reads are bounded
	// by --registry-timeout.
	rctx, cancel := context.WithTimeout(ctx, *regTimeout)
	defer cancel()
	if err := probeLock(rctx, reg, *driver); errors.Is(err, registry.ErrLocked) {
		return applyError(ctx, reg, err)
	} else if err != nil {
		return registryErr(rctx, u, *regTimeout, "taking the driver lock", err)
	}
	cur, err := reg.Get(rctx)
	if err != nil {
		return registryErr(rctx, u, *regTimeout, "reading the config", err)
	}
	base := &redshard.Options{ShardOptions: opt.ShardOptions, FailoverShardOptions: opt.FailoverShardOptions,
		VnodesPerWeight: opt.VnodesPerWeight, Health: opt.Health}
	lost, restore, err := rsfleet.RegistryBehind(rctx, reg, doc, base)
	cancel()
	if err != nil {
		return applyError(ctx, reg, err)
	}
	if restore {
		fmt.Fprintf(stdout, "the registry lost the fleet's config: it holds %s, but the servers' beacons and the live processes follow %s;\n"+
			"apply publishes that config again first (nothing older may be published), then goes on from it\n\n", cur.Version(), lost.Version())
		cur = lost
	}
	if done, err := writeApplyPlan(stdout, cur, doc, restore); err != nil || (done && !restore) {
		return err
	}
	fmt.Fprintln(stdout)
	if !*yes {
		ok, err := confirm(ctx, stderr, "Apply this change to the fleet? [y/N] ")
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintln(stderr, "redshard apply: nothing done (--yes applies without asking)")
			return errReported
		}
	}

	var disp *phaseDisplay
	if !*noProgress {
		disp = newPhaseDisplay(stderr)
	}
	ao := rsfleet.ApplyOptions{
		Driver: *driver,
		Client: base,
		Rebalance: redshard.RebalanceOptions{
			BatchSize: *batch,
			Rate:      *rate,
			Progress:  disp.rebalance, // nil-safe
		},
		Progress: disp.progress,
	}
	rep, err := rsfleet.Apply(ctx, reg, doc, ao)
	disp.end(err == nil)
	if err != nil {
		return applyError(ctx, reg, err)
	}
	writeApplyReport(stdout, rep)
	return nil
}

// probeLock takes the registry's driver lock and releases it: it fails
// with registry.ErrLocked, naming the holder, while another apply runs.
func probeLock(ctx context.Context, reg registry.Registry, driver string) error {
	if driver == "" {
		driver = "redshard apply (checking the lock)"
	}
	lock, err := reg.Lock(ctx, driver, 5*time.Second)
	if err != nil {
		return fmt.Errorf("the driver lock: %w", err)
	}
	return lock.Unlock(ctx)
}

// writeApplyPlan prints what applying doc to a registry holding cur does.
// done is set when there is nothing to do (or nothing that may be done).
// restoring says cur is the config apply restores from the beacons, not
// one the registry holds.
func writeApplyPlan(w io.Writer, cur registry.Config, doc json.RawMessage, restoring bool) (done bool, err error) {
	to, toP, err := decodeRingDoc(doc)
	if err != nil {
		return true, err
	}
	switch {
	case cur.Version() == (registry.Version{}):
		fmt.Fprintln(w, "the registry is empty: apply publishes this config as the fleet's first (epoch 1); no key moves")
		fmt.Fprintln(w)
		r, err := newRing(to, toP)
		if err != nil {
			return true, err
		}
		writeShares(w, r, to)
		return false, nil
	case cur.InFlight() && !registry.SameDoc(cur.Doc, doc):
		return true, fmt.Errorf("a change to another config is in flight: epoch %d, phase %s, driven by %s since %s; "+
			"apply that config to finish it first (redshard status shows it; going back is another apply afterwards)",
			cur.Epoch, cur.Phase, cur.Driver, cur.Since.UTC().Format(time.RFC3339))
	case !cur.InFlight() && registry.SameDoc(cur.Doc, doc) && restoring:
		fmt.Fprintf(w, "nothing to change: the fleet is on this config (%s); apply only restores it\n", cur.Version())
		return true, nil
	case !cur.InFlight() && registry.SameDoc(cur.Doc, doc):
		fmt.Fprintf(w, "nothing to do: the registry already holds this config (%s)\n", cur.Version())
		return true, nil
	}
	fromDoc := cur.Doc
	if cur.InFlight() {
		fmt.Fprintf(w, "resuming: the change to this config is in flight (%s, driven by %s since %s); apply takes it from there\n\n",
			cur.Version(), cur.Driver, cur.Since.UTC().Format(time.RFC3339))
		fromDoc = cur.PrevDoc
	}
	from, fromP, err := decodeRingDoc(fromDoc)
	if err != nil {
		return true, err
	}
	if err := checkPlacementChange(fromP, toP, from, to); err != nil {
		return true, err
	}
	if !cur.InFlight() {
		fmt.Fprintf(w, "from the registry's %s to the next epoch, %d:\n\n", cur.Version(), cur.Epoch+1)
	}
	p, err := makePlan(from, to, fromP, toP)
	if err != nil {
		return true, err
	}
	p.write(w)
	return false, nil
}

// confirm asks question on w and reads the answer from confirmInput:
// "y" or "yes" (any case) is yes; anything else, end of input included,
// is no. Ctrl-C (ctx) while it waits is no.
func confirm(ctx context.Context, w io.Writer, question string) (bool, error) {
	fmt.Fprint(w, question)
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() { // left reading the terminal after Ctrl-C, until the process exits
		line, err := bufio.NewReader(confirmInput).ReadString('\n')
		got <- answer{line, err}
	}()
	var a answer
	select {
	case <-ctx.Done():
		fmt.Fprintln(w)
		return false, nil
	case a = <-got:
	}
	if a.err != nil && !errors.Is(a.err, io.EOF) {
		return false, fmt.Errorf("reading the confirmation: %w", a.err)
	}
	if a.err != nil {
		fmt.Fprintln(w) // the answer's newline never came
	}
	switch strings.ToLower(strings.TrimSpace(a.line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// applyError explains why Apply stopped, and where the change stands.
func applyError(ctx context.Context, reg registry.Registry, err error) error {
	if errors.Is(err, registry.ErrLocked) {
		return fmt.Errorf("another apply is driving the fleet, refused: %w (wait for it to finish; if it died, its lock expires within its ttl)", err)
	}
	where := ""
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if cur, gerr := reg.Get(rctx); gerr == nil && cur.InFlight() {
		where = fmt.Sprintf("the change stays at %s (the fleet keeps serving there)", cur.Version())
	}
	if ctx.Err() != nil {
		if where == "" {
			where = "nothing more was published"
		}
		return fmt.Errorf("interrupted: %s; run the same command again to resume", where)
	}
	if where != "" {
		return fmt.Errorf("%w\n%s; run the same command again to resume", err, where)
	}
	return err
}

// writeApplyReport prints what Apply did: each phase's propagation and the
// data migration's report.
func writeApplyReport(w io.Writer, rep rsfleet.ApplyReport) {
	if rep.Restored != "" {
		fmt.Fprintf(w, "restored: %s\n", rep.Restored)
	}
	if rep.Unchanged && rep.Restored != "" {
		fmt.Fprintf(w, "the fleet is on %s, restored; nothing else was published\n", rep.To)
		return
	}
	if rep.Unchanged {
		fmt.Fprintf(w, "the fleet is on %s; nothing was published\n", rep.To)
		return
	}
	fmt.Fprintf(w, "applied: %s -> %s\n\n", rep.From, rep.To)
	if len(rep.Phases) > 0 {
		t := &table{align: "l"}
		t.add("phase", "acknowledged after", "processes")
		for _, ph := range rep.Phases {
			t.add(ph.Version.String(), age(ph.Acked), fmt.Sprint(ph.Members))
		}
		t.write(w)
	}
	if rep.Severed > 0 {
		fmt.Fprintf(w, "\nsevered %d connections of processes the fleet dropped\n", rep.Severed)
	}
	if rep.Rebalance.Epoch != 0 || rep.Rebalance.Scanned != 0 {
		// The report's ring epoch is the driver client's own counter, not
		// the registry's: leave it out.
		fmt.Fprintln(w)
		writeReportTitled(w, fmt.Sprintf("data migration (Rebalance, %s)", rep.Rebalance.Elapsed.Round(time.Millisecond)), rep.Rebalance)
	}
}
