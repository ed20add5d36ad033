package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
)

// maxTop is the most keys Client.HotKeys returns, and so the largest --top.
const maxTop = 20

func runHotkeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("hotkeys", "[--config FILE | --shard ... | --shards N --weights w,w,...] [--workload zipf|celebrity|uniform] [flags]", `
Hotkeys runs a workload through a redshard client with hot-key detection on
and prints, every --interval for --duration, the keys the client's detector
counts most (Client.HotKeys): the estimated rate of each (operations per
second, decayed over --window), its share of the operations of the last
interval, whether it is hot, and the shard that owns it. A last table is
printed at the end.

A key turns hot when its rate passes --min-rate and its share of the
client's traffic passes --min-share; hot reads are then served as
--mitigation says. The rates are estimates of one client's traffic: each
process of a fleet sees its own.

Shards are embedded miniredis servers (--shards, --weights) unless
--config or --shard name real ones. There the workload's keys (under
--prefix) must not exist yet; they are deleted afterwards (--cleanup), with
the split copies made of them, and no other key is touched.`)
	var wl workload
	wl.register(f, "zipf")
	var src source
	src.register(f, "shards")
	shards := f.Int("shards", 3, "number of embedded shards, 1 to 64 (without --config/--shard)")
	weights := f.String("weights", "", "`weights` of the embedded shards, comma-separated (default all 1; sets --shards)")
	mitigation := f.String("mitigation", "local-cache", "hot-key mitigation while watching: local-cache or split")
	interval := f.Duration("interval", time.Second, "time between two tables")
	duration := f.Duration("duration", 10*time.Second, "how long to run")
	top := f.Int("top", 10, fmt.Sprintf("keys per table, 1 to %d (Client.HotKeys returns the %d most counted keys)", maxTop, maxTop))
	window := f.Duration("window", 0, "detector decay window (default hotkey.DefaultWindow, 10s)")
	minRate := f.Float64("min-rate", 0, "operations per second a key needs to turn hot (default hotkey.DefaultMinRate, 100)")
	minShare := f.Float64("min-share", 0, "share of the traffic a key needs to turn hot (default hotkey.DefaultMinShare, 0.01)")
	cleanup := f.Bool("cleanup", true, "with real servers, delete the workload's keys at the end")
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	if err := wl.check(!src.given()); err != nil {
		return err
	}
	var hot redshard.HotKeyOptions
	switch *mitigation {
	case "local-cache":
		hot.Mitigation = redshard.LocalCache
	case "split":
		hot.Mitigation = redshard.SplitCopies
	default:
		return usagef("--mitigation %q: want local-cache or split", *mitigation)
	}
	switch {
	case *interval <= 0 || *duration <= 0:
		return usagef("--interval and --duration must be positive")
	case *top < 1 || *top > maxTop:
		return usagef("--top %d: want 1 to %d: the client's detector reports at most the %d most counted keys (Client.HotKeys)", *top, maxTop, maxTop)
	case *window < 0:
		return usagef("--window %v: must not be negative", *window)
	case !(*minRate >= 0) || math.IsInf(*minRate, 0):
		return usagef("--min-rate %g: want a number of operations per second, 0 or more", *minRate)
	case !(*minShare >= 0 && *minShare <= 1):
		return usagef("--min-share %g: want a fraction in [0, 1]", *minShare)
	case src.given() && (f.isSet("shards") || f.isSet("weights")):
		return usagef("--shards and --weights are for embedded shards; with --config or --shard the list comes from there")
	}
	hot.Detector = &hotkey.Config{Window: *window, MinRate: *minRate, MinShare: *minShare}

	fl, err := newFleet(&src, *shards, *weights, f.isSet("shards"))
	if err != nil {
		return err
	}
	defer fl.close()
	opt := *fl.opt
	opt.Shards = fl.shards()
	opt.HotKeys = &hot
	if err := opt.Validate(); err != nil {
		if errors.Is(err, redshard.ErrInvalidHotKeyOptions) {
			// What the flags above asked for.
			return usageError{err}
		}
		return err
	}
	c, err := redshard.NewClient(&opt)
	if err != nil {
		return err
	}
	defer c.Close()
	keys := wl.keyNames()
	if !fl.embedded() {
		// Real servers hold other data: write and delete only the
		// workload's own keys, and only where none exists yet.
		if err := fl.checkKeysFree(ctx, keys); err != nil {
			return err
		}
		if *cleanup {
			defer func() {
				// Split copies are made by this client: close it first.
				c.Close()
				if err := fl.deleteKeys(context.WithoutCancel(ctx), keys, hot.Mitigation == redshard.SplitCopies); err != nil {
					fmt.Fprintf(stderr, "hotkeys: cleanup: %v\n", err)
				}
			}()
		}
	}
	value := strings.Repeat("v", wl.valueSize)
	if err := preload(ctx, c, keys, value); err != nil {
		return err
	}

	fmt.Fprintf(stdout, "shards:   %s\nworkload: %s\nclient:   mitigation %s\n", fl.desc, wl.String(), hot.Mitigation)
	var ops atomic.Int64
	stop := make(chan struct{})
	start := time.Now()
	run := load(ctx, c, &wl, keys, value, stop, &ops)
	tick := time.NewTicker(*interval)
	end := time.NewTimer(*duration)
	lastOps, lastAt := int64(0), start
	show := func(final bool) {
		now := time.Now()
		n := ops.Load()
		rate := float64(n-lastOps) / now.Sub(lastAt).Seconds()
		lastOps, lastAt = n, now
		writeHotKeys(stdout, c, now.Sub(start), rate, *top, final)
	}
	ticks := 0
loop:
	for {
		select {
		case <-tick.C:
			// The last interval is shown by the final table.
			if ticks++; time.Duration(ticks+1)*(*interval) <= *duration+*interval/2 {
				show(false)
			}
		case <-end.C:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	tick.Stop()
	end.Stop()
	close(stop)
	run.wait()
	show(true)
	t := run.total()
	fmt.Fprintf(stdout, "\n%d operations, %d errors\n", t.ops, t.errors())
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return nil
}

// writeHotKeys prints one table of the client's most counted keys.
func writeHotKeys(w io.Writer, c *redshard.Client, at time.Duration, opsRate float64, top int, final bool) {
	keys := c.HotKeys()
	st := c.Stats().Hot
	hot := 0
	for _, k := range keys {
		if k.Hot {
			hot++
		}
	}
	label := fmt.Sprintf("t=%.1fs", at.Seconds())
	if final {
		label = "final, " + label
	}
	fmt.Fprintf(w, "\n[%s] %.0f ops/s, %d hot keys, local cache hits %d misses %d, split reads %d\n",
		label, opsRate, hot, st.CacheHits, st.CacheMisses, st.SplitReads)
	t := &table{align: "ll"}
	t.add("#", "key", "rate/s", "share", "hot", "shard")
	for i, k := range keys {
		if i == top {
			break
		}
		share := "-"
		if opsRate > 0 {
			share = pct(k.Rate / opsRate)
		}
		isHot := "no"
		if k.Hot {
			isHot = "yes"
		}
		owner, _ := c.ShardFor(k.Key)
		t.add(fmt.Sprint(i+1), k.Key, fmt.Sprintf("%.0f", k.Rate), share, isHot, owner)
	}
	t.write(w)
}
