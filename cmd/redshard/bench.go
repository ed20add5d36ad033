package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// sampleStep is the resolution of the per-shard load timeline.
const sampleStep = 100 * time.Millisecond

// maxEmbedded is the most embedded shards --shards and --weights start.
const maxEmbedded = 64

// benchConfig is the parsed command line of bench.
type benchConfig struct {
	wl         workload
	src        source
	shards     int
	weights    string
	duration   time.Duration
	mitigation string
	mitSet     bool // --mitigation was given
	failover   bool
	addAt      time.Duration
	addShard   shardSpecs // the shard --add-shard-at adds, for real servers
	killAt     time.Duration
	png        string
	compare    string
	first      bool // run the comparison before redshard
	cpuProfile string
	preload    bool
	cleanup    bool
	autopipe   bool // also run redshard with Options.AutoPipeline
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("bench", "[--config FILE | --shard ... | --shards N --weights w,w,...] [--workload uniform|zipf|celebrity] [flags]", `
Bench generates load through a redshard client and reports throughput,
latency percentiles (p50/p99/p999, from a fixed-size log-linear histogram of
every operation), errors by kind, hit and miss rates (a GET answered nil is a
miss), and the commands each shard's client was handed (a redis.Hook on every
shard client, each command of a pipeline counted) with busiest/mean.

Shards are embedded miniredis servers started in this process (--shards,
--weights) unless --config or --shard name real ones. Against real servers
the workload's keys (--prefix followed by key:0, key:1, ..., or celebrity)
must not exist yet: bench refuses to start when a shard holds one. It
deletes them, and what redshard stored about them (split copies, the
settled set of --add-shard-at's change), between runs and at the end
(--cleanup), and touches no other key.

Operations are single-key GETs and SETs, so every operation hands exactly
one command to a shard client, except reads served by the local cache (or
coalesced with another caller's read) and commands the hot-key and handoff
layers add. The "check" line accounts for every operation:
  ops = shard commands + served locally + refused - extra
where "served locally" counts operations that reached no shard, "refused"
failed operations that reached none (ErrShardDown), and "extra" the commands
beyond one per operation.

--add-shard-at adds a shard with SetShards during the run (an embedded one,
or the real one named by --add-shard); --kill-shard-at closes embedded
shard-0 during the run. --compare goredis-ring runs the
same workload, after redshard's run, through go-redis's redis.NewRing over the
same shards (it ignores weights) and prints both side by side. --png FILE
draws FILE-load.png (commands per 100ms per shard) and FILE-latency.png.
--autopipeline also runs redshard with Options.AutoPipeline (every command
auto-pipelined on its shard), right after the plain redshard run, so that
the runs of one invocation can be compared as same-run ratios. Each run
reports the process's CPU time per operation (with embedded shards that
includes the servers, which run in this process).`)
	var c benchConfig
	c.wl.register(f, "uniform")
	c.src.register(f, "shards")
	f.IntVar(&c.shards, "shards", 3, "number of embedded shards, 1 to 64 (without --config/--shard)")
	f.StringVar(&c.weights, "weights", "", "`weights` of the embedded shards, comma-separated, e.g. 1,1,2 (default all 1; sets --shards)")
	f.DurationVar(&c.duration, "duration", 10*time.Second, "how long each run sends operations")
	f.StringVar(&c.mitigation, "mitigation", "none", "hot-key mitigation: none, local-cache or split; when not given, a --config file's hot_keys apply")
	f.BoolVar(&c.failover, "failover", false, "set HealthOptions.Failover: a down shard's commands go to the next shard")
	f.DurationVar(&c.addAt, "add-shard-at", 0, "add a shard (SetShards) this long into the run: an embedded one of weight 1, or --add-shard")
	f.Var(&c.addShard, "add-shard", "the real shard --add-shard-at adds, as `name=host:port[:weight]` (its --prefix keys are deleted before each run)")
	f.DurationVar(&c.killAt, "kill-shard-at", 0, "close embedded shard-0 this long into the run")
	f.StringVar(&c.png, "png", "", "draw charts to `FILE`-load.png and FILE-latency.png")
	f.StringVar(&c.compare, "compare", "", "also run the workload through goredis-ring (go-redis's redis.Ring) and print both")
	f.BoolVar(&c.first, "compare-first", false, "with --compare, run the comparison before redshard (to check the order does not matter)")
	f.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole command to `file` (go tool pprof)")
	f.BoolVar(&c.preload, "preload", true, "write every key before the run, so reads hit")
	f.BoolVar(&c.cleanup, "cleanup", true, "with real servers, delete the workload's keys at the end")
	f.BoolVar(&c.autopipe, "autopipeline", false, "also run redshard with Options.AutoPipeline, in the same invocation")
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	if err := c.wl.check(); err != nil {
		return err
	}
	c.mitSet = f.isSet("mitigation")
	switch {
	case c.duration <= 0:
		return usagef("--duration %v: must be positive", c.duration)
	case c.mitigation != "none" && c.mitigation != "local-cache" && c.mitigation != "split":
		return usagef("--mitigation %q: want none, local-cache or split", c.mitigation)
	case c.compare != "" && c.compare != "goredis-ring":
		return usagef("--compare %q: the only comparison is goredis-ring", c.compare)
	case c.addAt < 0 || c.killAt < 0:
		return usagef("--add-shard-at and --kill-shard-at must not be negative")
	case c.addAt >= c.duration && c.addAt > 0:
		return usagef("--add-shard-at %v: the run ends at --duration %v; give a time before that", c.addAt, c.duration)
	case c.killAt >= c.duration && c.killAt > 0:
		return usagef("--kill-shard-at %v: the run ends at --duration %v; give a time before that", c.killAt, c.duration)
	case c.killAt > 0 && c.src.given():
		return usagef("--kill-shard-at needs embedded shards (no --config or --shard)")
	case c.addAt > 0 && c.src.given() && len(c.addShard) != 1:
		return usagef("--add-shard-at with real shards needs the shard to add: --add-shard name=host:port[:weight]")
	case len(c.addShard) > 0 && (c.addAt <= 0 || !c.src.given() || len(c.addShard) > 1):
		return usagef("--add-shard names one real shard for --add-shard-at, with --config or --shard")
	case c.src.given() && (f.isSet("shards") || f.isSet("weights")):
		return usagef("--shards and --weights are for embedded shards; with --config or --shard the list comes from there")
	}
	// A chart file that cannot be written fails now, not after the run.
	var charts *chartFiles
	if c.png != "" {
		var err error
		if charts, err = createChartFiles(strings.TrimSuffix(c.png, ".png")); err != nil {
			return fmt.Errorf("--png: %w", err)
		}
		defer charts.close()
	}
	fl, err := newFleet(&c.src, c.shards, c.weights, f.isSet("shards"))
	if err != nil {
		return err
	}
	defer fl.close()
	fl.extra = c.addShard
	if len(fl.extra) > 0 {
		all := *fl.opt
		all.Shards = append(fl.shards(), fl.extra...)
		if err := all.Validate(); err != nil {
			return usageError{fmt.Errorf("--add-shard: %w", err)}
		}
	}

	if c.cpuProfile != "" {
		pf, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	systems := []string{"redshard"}
	if c.autopipe {
		systems = append(systems, "redshard-autopipeline")
	}
	switch {
	case c.compare != "" && c.first:
		systems = append([]string{c.compare}, systems...)
	case c.compare != "":
		systems = append(systems, c.compare)
	}
	if !fl.embedded() {
		// Real servers hold other data: write and delete only the
		// workload's own keys, and only where none exists yet.
		keys := c.wl.keyNames()
		if err := fl.checkKeysFree(ctx, keys); err != nil {
			return err
		}
		if c.cleanup {
			// Split copies and a change's settled sets are redshard's
			// records of the workload's keys.
			hot := hotKeyOptions(c.mitigation, fl.opt.HotKeys, c.mitSet)
			internal := (hot != nil && hot.Mitigation == redshard.SplitCopies) || c.addAt > 0
			defer func() {
				if err := fl.deleteKeys(context.WithoutCancel(ctx), keys, internal); err != nil {
					fmt.Fprintf(stderr, "bench: cleanup: %v\n", err)
				}
			}()
		}
	}
	var results []*result
	for i, sys := range systems {
		fmt.Fprintf(stderr, "bench: running %s for %v...\n", sys, c.duration)
		r, err := c.runOne(ctx, sys, fl, i == 0)
		if err != nil {
			return fmt.Errorf("%s: %w", sys, err)
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}

	fmt.Fprintf(stdout, "shards:   %s\nworkload: %s, %v per run\n", fl.desc, c.wl.String(), c.duration)
	if len(results) == 1 {
		results[0].write(stdout)
	} else {
		writeComparison(stdout, results)
	}
	if charts != nil {
		if err := charts.draw(results); err != nil {
			return fmt.Errorf("charts: %w", err)
		}
		fmt.Fprintf(stdout, "\ncharts: %s\n", strings.Join(charts.names(), ", "))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return nil
}

// fleet is the shards a bench or hotkeys run uses.
type fleet struct {
	emb   *embedded         // nil for real servers
	opt   *redshard.Options // shards and settings; for embedded shards, built here
	extra []redshard.Shard  // real shards a run may add
	desc  string
}

// newFleet loads the real shards of src, or starts n embedded ones with
// the weights of weightList (which sets n unless nSet).
func newFleet(src *source, n int, weightList string, nSet bool) (*fleet, error) {
	if src.given() {
		opt, err := src.options()
		if err != nil {
			return nil, err
		}
		addrs := make([]string, len(opt.Shards))
		for i, s := range opt.Shards {
			addrs[i] = fmt.Sprintf("%s=%s:%g", s.Name, s.Addr, weightOf(s))
		}
		return &fleet{opt: opt, desc: fmt.Sprintf("%d real shards: %s", len(opt.Shards), strings.Join(addrs, " "))}, nil
	}
	if n < 1 || n > maxEmbedded {
		return nil, usagef("--shards %d: want 1 to %d embedded shards", n, maxEmbedded)
	}
	weights := make([]float64, n)
	for i := range weights {
		weights[i] = 1
	}
	if weightList != "" {
		w, err := parseWeights(weightList)
		if err != nil {
			return nil, usagef("--weights: %v", err)
		}
		if nSet && len(w) != n {
			return nil, usagef("--weights has %d weights for --shards %d", len(w), n)
		}
		weights = w
	}
	if len(weights) > maxEmbedded {
		return nil, usagef("--weights has %d weights: want 1 to %d embedded shards", len(weights), maxEmbedded)
	}
	emb, err := startEmbedded(weights)
	if err != nil {
		return nil, err
	}
	return &fleet{emb: emb, opt: &redshard.Options{}, desc: emb.describe()}, nil
}

func (fl *fleet) embedded() bool { return fl.emb != nil }

// shards returns the fleet's initial shard list.
func (fl *fleet) shards() []redshard.Shard {
	if fl.emb != nil {
		return slices.Clone(fl.emb.initial())
	}
	return slices.Clone(fl.opt.Shards)
}

func (fl *fleet) close() {
	if fl.emb != nil {
		fl.emb.close()
	}
}

// shardOptions returns go-redis options for a direct client of s.
func (fl *fleet) shardOptions(s redshard.Shard) *redis.Options {
	var o redis.Options
	if fl.opt.ShardOptions != nil {
		o = *fl.opt.ShardOptions
	}
	o.Addr = s.Addr
	return &o
}

// keyBatch is how many keys one EXISTS or UNLINK names.
const keyBatch = 1000

// checkKeysFree fails when one of keys already exists on a shard of the
// fleet (those a run may add included): the workload would overwrite, and
// then delete, data it did not write.
func (fl *fleet) checkKeysFree(ctx context.Context, keys []string) error {
	for _, s := range append(fl.shards(), fl.extra...) {
		c := redis.NewClient(fl.shardOptions(s))
		err := func() error {
			defer c.Close()
			for lo := 0; lo < len(keys); lo += keyBatch {
				batch := keys[lo:min(lo+keyBatch, len(keys))]
				n, err := c.Exists(ctx, batch...).Result()
				if err != nil {
					return fmt.Errorf("shard %s: checking that the workload's keys are free: %w", s, err)
				}
				if n == 0 {
					continue
				}
				example := batch[0]
				for _, k := range batch {
					if c.Exists(ctx, k).Val() == 1 {
						example = k
						break
					}
				}
				return fmt.Errorf("shard %s already holds keys the workload would write, such as %q: "+
					"give another --prefix (or delete them yourself if an earlier run with --cleanup=false left them)", s, example)
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteKeys deletes keys from every shard (those a run may add included).
// With internal, it also deletes the keys redshard's client stored about
// them (under redshard.InternalKeyPrefix): the split copies of them
// (redshard.SplitCopyPrefix + client tag + ":" + key), which would
// otherwise expire within MaxStaleness, and the settled sets of a
// membership change (hashes whose fields are key names), which would
// otherwise stay for days, but only a set whose every field is one of keys:
// a set that names another key records someone else's change. No other
// key is touched.
func (fl *fleet) deleteKeys(ctx context.Context, keys []string, internal bool) error {
	ours := make(map[string]bool, len(keys))
	for _, k := range keys {
		ours[k] = true
	}
	var errs []error
	for _, s := range append(fl.shards(), fl.extra...) {
		c := redis.NewClient(fl.shardOptions(s))
		for lo := 0; lo < len(keys); lo += keyBatch {
			errs = append(errs, c.Unlink(ctx, keys[lo:min(lo+keyBatch, len(keys))]...).Err())
		}
		if internal {
			var mine []string
			it := c.Scan(ctx, 0, globEscape(redshard.InternalKeyPrefix)+"*", keyBatch).Iterator()
			for it.Next(ctx) {
				k := it.Val()
				if rest, ok := strings.CutPrefix(k, redshard.SplitCopyPrefix); ok {
					if _, key, ok := strings.Cut(rest, ":"); ok && ours[key] {
						mine = append(mine, k)
					}
				} else if onlyOurFields(ctx, c, k, ours) {
					mine = append(mine, k)
				}
			}
			errs = append(errs, it.Err())
			for lo := 0; lo < len(mine); lo += keyBatch {
				batch := mine[lo:min(lo+keyBatch, len(mine))]
				errs = append(errs, c.Unlink(ctx, batch...).Err())
				members := make([]interface{}, len(batch))
				for i, k := range batch {
					members[i] = k
				}
				errs = append(errs, c.SRem(ctx, redshard.InternalIndexKey, members...).Err())
			}
		}
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// onlyOurFields reports whether key is a hash whose every field is in
// ours.
func onlyOurFields(ctx context.Context, c *redis.Client, key string, ours map[string]bool) bool {
	if c.Type(ctx, key).Val() != "hash" {
		return false
	}
	// HSCAN without NOVALUES (Redis 7.4): the iterator yields field,
	// value, field, value, ...
	it := c.HScan(ctx, key, 0, "", keyBatch).Iterator()
	n := 0
	for it.Next(ctx) {
		if n%2 == 0 && !ours[it.Val()] {
			return false
		}
		n++
	}
	return it.Err() == nil && n > 0
}

// globEscape quotes the characters SCAN MATCH treats as patterns.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// target is a client under test.
type target interface {
	cmdable() redis.Cmdable
	addShard(ctx context.Context, s redshard.Shard) error
	hotStats() *redshard.HotStats // nil when not applicable
	close() error
}

// redshardTarget is a redshard.Client whose shard clients count commands.
type redshardTarget struct{ c *redshard.Client }

func newRedshardTarget(fl *fleet, hot *redshard.HotKeyOptions, failover, autopipe bool, cnt *counters) (*redshardTarget, error) {
	opt := *fl.opt
	opt.Shards = fl.shards()
	opt.HotKeys = hot
	opt.AutoPipeline = opt.AutoPipeline || autopipe
	if failover {
		h := redshard.HealthOptions{}
		if opt.Health != nil {
			h = *opt.Health
		}
		h.Failover = true
		opt.Health = &h
	}
	opt.NewShardClient = func(s redshard.Shard, o *redis.Options) *redis.Client {
		c := redis.NewClient(o)
		c.AddHook(cnt.hook(s.Name))
		return c
	}
	c, err := redshard.NewClient(&opt)
	if err != nil {
		return nil, err
	}
	return &redshardTarget{c}, nil
}

func (t *redshardTarget) cmdable() redis.Cmdable { return t.c }

func (t *redshardTarget) addShard(ctx context.Context, s redshard.Shard) error {
	return t.c.SetShards(ctx, append(t.c.Shards(), s))
}

func (t *redshardTarget) hotStats() *redshard.HotStats {
	st := t.c.Stats().Hot
	if st.Mitigation == 0 {
		return nil
	}
	return &st
}

func (t *redshardTarget) close() error { return t.c.Close() }

// ringTarget is go-redis's redis.Ring over the same shards, its shard
// clients counting commands under the shards' names.
type ringTarget struct {
	r *redis.Ring

	mu     sync.Mutex // guards addrs and byAddr
	addrs  map[string]string
	byAddr map[string]string
}

func newRingTarget(fl *fleet, cnt *counters) *ringTarget {
	t := &ringTarget{addrs: map[string]string{}, byAddr: map[string]string{}}
	for _, s := range fl.shards() {
		t.addrs[s.Name] = s.Addr
		t.byAddr[s.Addr] = s.Name
	}
	ro := &redis.RingOptions{
		Addrs: maps.Clone(t.addrs),
		NewClient: func(o *redis.Options) *redis.Client {
			t.mu.Lock()
			name := t.byAddr[o.Addr]
			t.mu.Unlock()
			c := redis.NewClient(o)
			c.AddHook(cnt.hook(name))
			return c
		},
	}
	if so := fl.opt.ShardOptions; so != nil {
		ro.Username, ro.Password, ro.DB, ro.TLSConfig = so.Username, so.Password, so.DB, so.TLSConfig
		ro.PoolSize, ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = so.PoolSize, so.DialTimeout, so.ReadTimeout, so.WriteTimeout
	}
	t.r = redis.NewRing(ro)
	return t
}

func (t *ringTarget) cmdable() redis.Cmdable { return t.r }

func (t *ringTarget) addShard(_ context.Context, s redshard.Shard) error {
	t.mu.Lock()
	t.addrs[s.Name] = s.Addr
	t.byAddr[s.Addr] = s.Name
	addrs := maps.Clone(t.addrs)
	t.mu.Unlock()
	t.r.SetAddrs(addrs)
	return nil
}

func (t *ringTarget) hotStats() *redshard.HotStats { return nil }
func (t *ringTarget) close() error                 { return t.r.Close() }

// hotKeyOptions returns the HotKeyOptions of --mitigation; keep the
// config's when the flag was not given.
func hotKeyOptions(mitigation string, fromConfig *redshard.HotKeyOptions, flagSet bool) *redshard.HotKeyOptions {
	if !flagSet && fromConfig != nil {
		return fromConfig
	}
	switch mitigation {
	case "local-cache":
		return &redshard.HotKeyOptions{Mitigation: redshard.LocalCache}
	case "split":
		return &redshard.HotKeyOptions{Mitigation: redshard.SplitCopies}
	}
	return nil
}

// event is something that happened during a run.
type event struct {
	at   time.Duration
	what string
}

// result is the outcome of one run.
type result struct {
	system    string
	setting   string // mitigation and failover, as run
	elapsed   time.Duration
	t         *tally
	shards    []shardCount
	weights   map[string]float64 // of every shard that took part
	tl        *timeline
	events    []event
	hot       *redshard.HotStats
	untraced  int64
	runErrors []string
	cpu       time.Duration // the process's CPU time (user+system) during the run
	cpuUser   time.Duration // the user-mode part of cpu
}

// runOne runs the workload through one system on fresh (or, for real
// servers, re-preloaded) shards; first says no run came before it.
func (c *benchConfig) runOne(ctx context.Context, system string, fl *fleet, first bool) (*result, error) {
	// Every run starts from the same state: empty embedded shards, or real
	// ones without the previous run's keys (another client's placement).
	if fl.emb != nil {
		if err := fl.emb.reset(); err != nil {
			return nil, err
		}
	} else if !first {
		if err := fl.deleteKeys(ctx, c.wl.keyNames(), true); err != nil {
			return nil, fmt.Errorf("deleting the keys of the previous run: %w", err)
		}
	}
	cnt := newCounters()
	res := &result{system: system, weights: map[string]float64{}}
	var tg target
	switch system {
	case "redshard", "redshard-autopipeline":
		hot := hotKeyOptions(c.mitigation, fl.opt.HotKeys, c.mitSet)
		ap := system == "redshard-autopipeline"
		t, err := newRedshardTarget(fl, hot, c.failover, ap, cnt)
		if err != nil {
			return nil, err
		}
		tg = t
		res.setting = "mitigation none"
		if hot != nil {
			res.setting = "mitigation " + hot.Mitigation.String()
		}
		if c.failover {
			res.setting += ", failover"
		}
		if ap {
			res.setting += ", AutoPipeline"
		}
	default:
		tg = newRingTarget(fl, cnt)
		res.setting = "rendezvous hashing, weights ignored, no hot-key mitigation"
	}
	closed := false
	defer func() {
		if !closed {
			_ = tg.close()
		}
	}()
	for _, s := range fl.shards() {
		res.weights[s.Name] = weightOf(s)
	}
	keys := c.wl.keyNames()
	value := strings.Repeat("v", c.wl.valueSize)
	if c.preload {
		if err := preload(ctx, tg.cmdable(), keys, value); err != nil {
			return nil, err
		}
	}
	cnt.reset()

	stop := make(chan struct{})
	timelineC := sampler(cnt, sampleStep, stop)
	start := time.Now()
	user0, sys0 := processCPU()
	run := load(ctx, tg.cmdable(), &c.wl, keys, value, stop, nil)
	c.events(ctx, start, tg, fl, res)
	close(stop)
	run.wait()
	res.elapsed = time.Since(start)
	user1, sys1 := processCPU()
	res.cpu, res.cpuUser = user1-user0+sys1-sys0, user1-user0
	res.tl = <-timelineC
	res.hot = tg.hotStats()
	// Closing waits for the flights the client runs for callers, so every
	// command they send is counted before the totals are taken.
	closed = true
	if err := tg.close(); err != nil {
		res.runErrors = append(res.runErrors, "close: "+err.Error())
	}
	res.t = run.total()
	res.shards = cnt.snapshot()
	if system == "redshard-autopipeline" {
		// Batches run on the AutoPipeliner's context, not the workers':
		// their commands are untraced. Count everything as load, and no
		// operation as served locally (none is, without mitigation).
		res.setting += " (shard commands counted untraced, heartbeats included)"
		for i := range res.shards {
			res.shards[i].traced += res.shards[i].untraced
			res.shards[i].untraced = 0
		}
		if res.hot == nil {
			res.t.local = 0
		}
	}
	for _, s := range res.shards {
		res.untraced += s.untraced
	}
	return res, nil
}

// events waits for the end of the run, adding or killing a shard on the
// way when asked to.
func (c *benchConfig) events(ctx context.Context, start time.Time, tg target, fl *fleet, res *result) {
	end := time.NewTimer(c.duration)
	defer end.Stop()
	var addC, killC <-chan time.Time
	if c.addAt > 0 && c.addAt < c.duration {
		t := time.NewTimer(c.addAt)
		defer t.Stop()
		addC = t.C
	}
	if c.killAt > 0 && c.killAt < c.duration {
		t := time.NewTimer(c.killAt)
		defer t.Stop()
		killC = t.C
	}
	for {
		select {
		case <-end.C:
			return
		case <-ctx.Done():
			return
		case <-addC:
			addC = nil
			var s redshard.Shard
			var err error
			if fl.emb != nil {
				s, err = fl.emb.add()
			} else {
				s = fl.extra[0]
			}
			if err == nil {
				res.weights[s.Name] = weightOf(s)
				err = tg.addShard(ctx, s)
			}
			what := fmt.Sprintf("added %s (%s), weight %g", s.Name, s.Addr, weightOf(s))
			if err != nil {
				what = "adding a shard failed: " + err.Error()
			}
			res.events = append(res.events, event{time.Since(start), what})
		case <-killC:
			killC = nil
			fl.emb.kill(0)
			res.events = append(res.events, event{time.Since(start), fmt.Sprintf("killed %s (%s)", fl.emb.shards[0].Name, fl.emb.shards[0].Addr)})
		}
	}
}
