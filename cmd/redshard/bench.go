package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
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
	mitSet     bool          // --mitigation was given
	staleness  time.Duration // --max-staleness: HotKeyOptions.MaxStaleness (0: the defaults)
	failover   bool
	addAt      time.Duration
	addShard   shardSpecs // the shard --add-shard-at adds, for real servers
	killAt     time.Duration
	png        string
	compare    []string // the --compare systems, in the order given
	first      bool     // run the comparisons before redshard
	rounds     int      // times the sequence of runs is repeated (--rounds)
	cpuProfile string
	memProfile string
	preload    bool
	cleanup    bool
	autopipe   bool // also run redshard with Options.AutoPipeline
	fullDuplex bool // that run with AutoPipelineOptions.FullDuplex
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
(--cleanup), also when interrupted (Ctrl-C, SIGTERM, SIGHUP, or its output's
reader going away, as with | head), and touches no other key. A run that
leaves keys says which, and how to delete them.

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
shard-0 during the run. --compare runs the same workload, after redshard's
run, through other clients and prints all side by side, with each run's
throughput and CPU per operation as ratios to each compared system's (same
run, same machine): goredis-ring is go-redis's redis.NewRing over the same
shards (it ignores weights); goredis-autopipeline is go-redis's own
AutoPipeline (Client.AutoPipeline, Options.AutoPipelineOptions or go-redis's
defaults) on a plain redis.NewClient to the first shard only, the one-server
figure auto-pipelining is measured against; goredis-autopipeline-per-shard
is sharding by hand with go-redis's AutoPipeline of each shard's client,
keys placed by redshard's ring: auto-pipelining over the same shards
without redshard's routing; rueidis-per-shard is the same with a rueidis
client per shard (DisableCache), which pipelines concurrent callers on its
own. rueidis-csc-per-shard and goredis-csc-per-shard are the client-side
caches users compare redshard's LocalCache with, sharded by hand the same
way (real servers only: they need CLIENT TRACKING and RESP3):
rueidis's DoCache per shard (OPTIN tracking, rueidis's default, with a
1-minute client-side TTL) and go-redis's own cache per shard
(Options.ClientSideCacheConfig at its defaults, RESP3). Every run with a
local cache reports "GETs served locally": the fraction of the reads its
cache answered, as the cache counts them (redshard: HotStats.CacheHits,
without the reads that waited for another caller's refill, which its
"coalesced" row counts; rueidis: RedisResult.IsCacheHit and go-redis:
CSCStats().Hits, both with the reads that waited for another caller's
fill). Give several as
--compare goredis-ring,goredis-autopipeline,goredis-autopipeline-per-shard,rueidis-per-shard,
rueidis-csc-per-shard,goredis-csc-per-shard.
Real shards also report the servers' CPU per operation (INFO cpu). --png FILE
draws FILE-load.png (commands per 100ms per shard), FILE-latency.png and
FILE-throughput.png (ops/s and CPU per op of each run).
--rounds N runs the whole sequence N times (each round's runs one after
the other) and ends with a table of every round's ratios to each compared
system and their medians; the other tables are the last round's. On a
small or busy machine one run's ratio can be off by a third: quote the
median of several rounds.
--autopipeline also runs redshard with Options.AutoPipeline (every command
auto-pipelined on its shard), right after the plain redshard run, so that
the runs of one invocation can be compared as same-run ratios; with
--fullduplex that run uses go-redis's full-duplex AutoPipeliner per shard
(AutoPipelineOptions.FullDuplex), while the go-redis comparisons keep the
default half-duplex one. Each run
reports the process's CPU time per operation (with embedded shards that
includes the servers, which run in this process).`)
	var c benchConfig
	c.wl.register(f, "uniform")
	c.src.register(f, "shards")
	f.IntVar(&c.shards, "shards", 3, "number of embedded shards, 1 to 64 (without --config/--shard)")
	f.StringVar(&c.weights, "weights", "", "`weights` of the embedded shards, comma-separated, e.g. 1,1,2 (default all 1; sets --shards)")
	f.DurationVar(&c.duration, "duration", 10*time.Second, "how long each run sends operations")
	f.StringVar(&c.mitigation, "mitigation", "none", "hot-key mitigation: none, local-cache or split; when not given, a --config file's hot_keys apply")
	f.DurationVar(&c.staleness, "max-staleness", 0, "HotKeyOptions.MaxStaleness of --mitigation (default redshard's: 1s, and 1m for a reply read with tracking, within its key's TTL): how long a cached reply or split copy lives at most")
	f.BoolVar(&c.failover, "failover", false, "set HealthOptions.Failover: a down shard's commands go to the next shard")
	f.DurationVar(&c.addAt, "add-shard-at", 0, "add a shard (SetShards) this long into the run: an embedded one of weight 1, or --add-shard")
	f.Var(&c.addShard, "add-shard", "the real shard --add-shard-at adds, as `name=host:port[:weight]` (its --prefix keys are deleted before each run)")
	f.DurationVar(&c.killAt, "kill-shard-at", 0, "close embedded shard-0 this long into the run")
	f.StringVar(&c.png, "png", "", "draw charts to `FILE`-load.png, FILE-latency.png and FILE-throughput.png")
	var compare string
	f.StringVar(&compare, "compare", "", "also run the workload through these `systems`, comma-separated: goredis-ring (go-redis's redis.Ring), goredis-autopipeline (go-redis's AutoPipeline on the first shard alone), goredis-autopipeline-per-shard (go-redis's AutoPipeline of each shard's client, keys placed by redshard's ring), rueidis-per-shard (a rueidis client per shard, DisableCache, keys placed by redshard's ring), rueidis-csc-per-shard (a rueidis client per shard, DoCache with OPTIN tracking and a 1-minute TTL, keys placed by redshard's ring; real servers only), goredis-csc-per-shard (a go-redis client per shard with its ClientSideCacheConfig, RESP3, keys placed by redshard's ring; real servers only)")
	f.BoolVar(&c.first, "compare-first", false, "with --compare, run the comparisons before redshard (to check the order does not matter)")
	f.IntVar(&c.rounds, "rounds", 1, "with --compare, run the whole sequence of runs this many times, and report every round's ratios to each compared system and their medians (one round's ratio can be off by a third on a busy or small machine)")
	f.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole command to `file` (go tool pprof); each run's samples carry the label system=NAME (go tool pprof -tagfocus system=redshard), except the garbage collector's background work")
	f.StringVar(&c.memProfile, "memprofile", "", "write a profile of the whole command's allocations to `file` at the end (go tool pprof -sample_index=alloc_space)")
	f.BoolVar(&c.preload, "preload", true, "write every key before the run, so reads hit")
	f.BoolVar(&c.cleanup, "cleanup", true, "with real servers, delete the workload's keys at the end")
	f.BoolVar(&c.autopipe, "autopipeline", false, "also run redshard with Options.AutoPipeline, in the same invocation")
	f.BoolVar(&c.fullDuplex, "fullduplex", false, "with --autopipeline, run it with AutoPipelineOptions.FullDuplex (go-redis's full-duplex stream per shard; the go-redis comparisons keep their default options)")
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	if err := c.wl.check(!c.src.given()); err != nil {
		return err
	}
	c.mitSet = f.isSet("mitigation")
	var err error
	if c.compare, err = parseCompare(compare); err != nil {
		return err
	}
	if c.fullDuplex && !c.autopipe {
		return usagef("--fullduplex needs --autopipeline")
	}
	oneServer := slices.Contains(c.compare, "goredis-autopipeline")
	perShard := slices.ContainsFunc(c.compare, func(s string) bool { return strings.HasSuffix(s, "-per-shard") })
	csc := slices.ContainsFunc(c.compare, func(s string) bool { return strings.HasSuffix(s, "-csc-per-shard") })
	switch {
	case c.duration <= 0:
		return usagef("--duration %v: must be positive", c.duration)
	case c.mitigation != "none" && c.mitigation != "local-cache" && c.mitigation != "split":
		return usagef("--mitigation %q: want none, local-cache or split", c.mitigation)
	case c.rounds < 1:
		return usagef("--rounds %d: want 1 or more", c.rounds)
	case c.rounds > 1 && len(c.compare) == 0:
		return usagef("--rounds %d: rounds are for ratios to the systems of --compare; give --compare", c.rounds)
	case c.staleness < 0:
		return usagef("--max-staleness %v: must not be negative", c.staleness)
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
	case oneServer && (c.addAt > 0 || c.killAt > 0):
		return usagef("--compare goredis-autopipeline runs on the first shard alone: it has no shard to add, and --kill-shard-at would kill its only server")
	case perShard && (c.addAt > 0 || c.killAt > 0):
		return usagef("--compare %s: the *-per-shard systems shard by hand over a fixed set of shards: no --add-shard-at or --kill-shard-at", compare)
	case perShard && c.wl.mget > 1:
		return usagef("--compare %s: the *-per-shard systems send single-key commands only: no --mget", compare)
	case csc && !c.src.given():
		return usagef("--compare %s: rueidis-csc-per-shard and goredis-csc-per-shard need real servers (--config or --shard): embedded shards have no CLIENT TRACKING", compare)
	}
	// A chart file that cannot be written fails now, not after the run.
	var charts *chartFiles
	if c.png != "" {
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
	if c.memProfile != "" {
		// Created now, so that a bad name fails before the runs.
		mf, err := os.Create(c.memProfile)
		if err != nil {
			return err
		}
		defer func() {
			_ = pprof.Lookup("allocs").WriteTo(mf, 0)
			mf.Close()
		}()
	}
	systems := []string{"redshard"}
	if c.autopipe {
		systems = append(systems, "redshard-autopipeline")
	}
	if c.first {
		systems = append(slices.Clone(c.compare), systems...)
	} else {
		systems = append(systems, c.compare...)
	}
	if !fl.embedded() {
		// Real servers hold other data: write and delete only the
		// workload's own keys, and only where none exists yet.
		keys := c.wl.keyNames()
		if err := fl.checkKeysFree(ctx, keys); err != nil {
			return err
		}
		// From here the keys may exist: SIGTERM, SIGHUP and a broken pipe
		// stop the run as SIGINT does, and the cleanup runs (cleanup.go).
		var stopGuard func()
		ctx, stdout, stderr, stopGuard = guardRun(ctx, stdout, stderr)
		defer stopGuard()
		// Split copies and a change's settled sets are redshard's
		// records of the workload's keys.
		hot := hotKeyOptions(c.mitigation, fl.opt.HotKeys, c.mitSet)
		internal := (hot != nil && hot.Mitigation == redshard.SplitCopies) || c.addAt > 0
		defer (&benchCleanup{fl: fl, keys: keys, internal: internal, delete: c.cleanup, prefix: c.wl.prefix}).run(ctx, stderr)
	}
	var results []*result
	var rounds [][]*result // every complete round's results, for --rounds
	for round := 0; round < c.rounds && ctx.Err() == nil; round++ {
		results = nil
		for i, sys := range systems {
			if c.rounds > 1 {
				fmt.Fprintf(stderr, "bench: round %d of %d: running %s for %v...\n", round+1, c.rounds, sys, c.duration)
			} else {
				fmt.Fprintf(stderr, "bench: running %s for %v...\n", sys, c.duration)
			}
			// The run's goroutines, and those its clients start, carry
			// the label system=sys in a --cpuprofile.
			var r *result
			var err error
			pprof.Do(ctx, pprof.Labels("system", sys), func(ctx context.Context) {
				r, err = c.runOne(ctx, sys, fl, round == 0 && i == 0)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", sys, err)
			}
			results = append(results, r)
			if ctx.Err() != nil {
				break
			}
		}
		if len(results) == len(systems) {
			rounds = append(rounds, results)
		}
	}
	if len(rounds) > 0 {
		results = rounds[len(rounds)-1] // the tables show the last complete round
	}

	fmt.Fprintf(stdout, "shards:   %s\nworkload: %s, %v per run\n", fl.desc, c.wl.String(), c.duration)
	if len(results) == 1 {
		results[0].write(stdout)
	} else {
		if c.rounds > 1 {
			fmt.Fprintf(stdout, "round %d of %d (the rounds' ratios and medians follow):\n", len(rounds), c.rounds)
		}
		writeComparison(stdout, results, c.compare)
	}
	if c.rounds > 1 {
		writeRounds(stdout, rounds, c.compare)
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

// withFullDuplex returns a copy of fl whose AutoPipelineOptions (the
// fleet's, else go-redis's blocking defaults) have FullDuplex set.
func (fl *fleet) withFullDuplex() *fleet {
	o := redis.DefaultBlockingAutoPipelineOptions()
	if fl.opt.AutoPipelineOptions != nil {
		cp := *fl.opt.AutoPipelineOptions
		o = &cp
	}
	o.FullDuplex = true
	opt := *fl.opt
	opt.AutoPipelineOptions = o
	cp := *fl
	cp.opt = &opt
	return &cp
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

// serverStats returns what the real shards have done since they started:
// their CPU time (used_cpu_user + used_cpu_sys of INFO cpu) and the
// commands they ran (the calls of INFO commandstats, INFO itself left out:
// the bench sends it). Each is -1 with embedded shards (their CPU is the
// process's, and they keep no command counts) or when a shard does not say.
func (fl *fleet) serverStats(ctx context.Context) (cpu time.Duration, cmds int64) {
	if fl.embedded() {
		return -1, -1
	}
	for _, s := range append(fl.shards(), fl.extra...) {
		c := redis.NewClient(fl.shardOptions(s))
		info, err := c.InfoMap(ctx, "cpu", "commandstats").Result()
		_ = c.Close()
		if err != nil {
			return -1, -1
		}
		for _, field := range []string{"used_cpu_user", "used_cpu_sys"} {
			sec, err := strconv.ParseFloat(info["CPU"][field], 64)
			if err != nil || cpu < 0 {
				cpu = -1
				continue
			}
			cpu += time.Duration(sec * float64(time.Second))
		}
		stats := info["Commandstats"]
		if len(stats) == 0 {
			cmds = -1
		}
		for name, v := range stats {
			if name == "cmdstat_info" || cmds < 0 {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, err := strconv.ParseInt(calls, 10, 64)
			if err != nil || !strings.HasPrefix(v, "calls=") {
				cmds = -1
				continue
			}
			cmds += n
		}
	}
	return cpu, cmds
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
	cmdable() redis.Cmdable // preloading
	kv() kv                 // the workload's operations
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
func (t *redshardTarget) kv() kv                 { return t.c }

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

// cacheHits returns the LocalCache's hits (HotStats.CacheHits); false
// without LocalCache.
func (t *redshardTarget) cacheHits() (int64, bool) {
	st := t.c.Stats().Hot
	if st.Mitigation != redshard.LocalCache {
		return 0, false
	}
	return st.CacheHits, true
}

func (t *redshardTarget) close() error { return t.c.Close() }

// cachingTarget is a target that may have a client-side cache.
type cachingTarget interface {
	// cacheHits returns how many reads (keys of an MGET each) the
	// client's cache has answered since the client was made, as the cache
	// counts them; false when the client has no cache.
	cacheHits() (int64, bool)
}

// hooksSeeHits is a target whose shard clients' hooks see the reads their
// cache answers (go-redis's own cache): the counting hook counts each as
// a command handed to the shard client.
type hooksSeeHits interface {
	// shardHits returns, per shard name, the reads the cache of the
	// shard's client has answered since it was made.
	shardHits() map[string]int64
}

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
func (t *ringTarget) kv() kv                 { return t.r }

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

// autoPipelineTarget is go-redis's own AutoPipeline on one server: a plain
// redis.Client to the fleet's first shard and its blocking AutoPipeliner,
// configured as redshard's Options.AutoPipeline is (the fleet's
// AutoPipelineOptions, else go-redis's defaults for the blocking face).
type autoPipelineTarget struct {
	shard redshard.Shard
	c     *redis.Client
	ap    *redis.AutoPipeliner
}

func newAutoPipelineTarget(fl *fleet, cnt *counters) (*autoPipelineTarget, error) {
	s := fl.shards()[0]
	o := fl.shardOptions(s)
	if fl.opt.AutoPipelineOptions != nil {
		o.AutoPipelineOptions = fl.opt.AutoPipelineOptions
	}
	c := redis.NewClient(o)
	c.AddHook(cnt.hook(s.Name))
	ap, err := c.AutoPipeline()
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("go-redis AutoPipeline on %s: %w", s.Addr, err)
	}
	return &autoPipelineTarget{shard: s, c: c, ap: ap}, nil
}

func (t *autoPipelineTarget) cmdable() redis.Cmdable { return t.ap }
func (t *autoPipelineTarget) kv() kv                 { return t.ap }

func (t *autoPipelineTarget) addShard(context.Context, redshard.Shard) error {
	return errors.New("goredis-autopipeline runs on one server: it has no shard to add")
}

func (t *autoPipelineTarget) hotStats() *redshard.HotStats { return nil }

// close closes the client, which closes its AutoPipeliner first.
func (t *autoPipelineTarget) close() error { return t.c.Close() }

// perShardAPTarget is sharding done by hand with go-redis's own
// AutoPipeline: one per shard, on the shard clients of a plain redshard
// client (whose hooks count), each key sent to the AutoPipeliner of the
// shard redshard's ring names. It is what auto-pipelining over these shards
// costs without redshard's routing, the baseline of redshard's own.
type perShardAPTarget struct {
	handRouted
	aps map[string]*redis.AutoPipeliner
}

func newPerShardAPTarget(fl *fleet, cnt *counters) (*perShardAPTarget, error) {
	rt, err := newRedshardTarget(fl, nil, false, false, cnt)
	if err != nil {
		return nil, err
	}
	t := &perShardAPTarget{aps: map[string]*redis.AutoPipeliner{}}
	t.handRouted = handRouted{name: "goredis-autopipeline-per-shard", c: rt.c,
		pick: func(key string) redis.Cmdable { return t.ap(key) }}
	for _, s := range fl.shards() {
		sc, _ := rt.c.ShardClient(s.Name)
		var ap *redis.AutoPipeliner
		if o := fl.opt.AutoPipelineOptions; o != nil {
			ap, err = sc.AutoPipelineWithOptions(o)
		} else {
			ap, err = sc.AutoPipeline()
		}
		if err != nil {
			_ = rt.c.Close()
			return nil, fmt.Errorf("go-redis AutoPipeline on %s: %w", s.Addr, err)
		}
		t.aps[s.Name] = ap
	}
	return t, nil
}

func (t *perShardAPTarget) ap(key string) *redis.AutoPipeliner { return t.aps[t.c.Ring().Lookup(key)] }

// close closes the redshard client, whose shard clients close their
// AutoPipeliners.
func (t *perShardAPTarget) close() error { return t.c.Close() }

// compareSystems are the clients --compare can run besides redshard.
var compareSystems = []string{"goredis-ring", "goredis-autopipeline", "goredis-autopipeline-per-shard", "rueidis-per-shard", "rueidis-csc-per-shard", "goredis-csc-per-shard"}

// parseCompare parses --compare: comparison systems, comma-separated, each
// at most once.
func parseCompare(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		switch {
		case !slices.Contains(compareSystems, name):
			return nil, usagef("--compare %q: unknown system %q; want one or more of %s, comma-separated", list, name, strings.Join(compareSystems, ", "))
		case slices.Contains(out, name):
			return nil, usagef("--compare %q: %s is named twice", list, name)
		}
		out = append(out, name)
	}
	return out, nil
}

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
	system      string
	setting     string // mitigation and failover, as run
	elapsed     time.Duration
	t           *tally
	shards      []shardCount
	weights     map[string]float64 // of every shard that took part
	tl          *timeline
	events      []event
	hot         *redshard.HotStats
	untraced    int64
	noCheck     string // why the accounting line cannot be kept, if it cannot
	celebrity   bool   // the workload has a celebrity key
	watched     int64  // GETs that sent the celebrity key to a shard
	watchedMGet int64  // MGETs that did
	runErrors   []string
	cpu         time.Duration // the process's CPU time (user+system) during the run
	cpuUser     time.Duration // the user-mode part of cpu
	serverCPU   time.Duration // the real shards' CPU time during the run (INFO cpu), 0 if unknown
	serverCmds  int64         // the commands the real shards ran during the run (INFO commandstats), -1 if unknown
	cacheHits   int64         // reads the client's cache answered during the run (cachingTarget); -1: no cache
	mget        int           // keys per read (1: GETs)
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
	if c.wl.kind == "celebrity" {
		cnt.watch = c.wl.keyNames()[0]
	}
	res := &result{system: system, weights: map[string]float64{}}
	var tg target
	switch system {
	case "redshard", "redshard-autopipeline":
		hot := hotKeyOptions(c.mitigation, fl.opt.HotKeys, c.mitSet)
		if hot != nil && c.staleness > 0 {
			h := *hot
			h.MaxStaleness = c.staleness
			hot = &h
		}
		ap := system == "redshard-autopipeline"
		rfl := fl
		if ap && c.fullDuplex {
			rfl = fl.withFullDuplex()
		}
		t, err := newRedshardTarget(rfl, hot, c.failover, ap, cnt)
		if err != nil {
			return nil, err
		}
		tg = t
		res.setting = "mitigation none"
		if hot != nil {
			res.setting = "mitigation " + hot.Mitigation.String()
			if c.staleness > 0 {
				res.setting += fmt.Sprintf(", MaxStaleness %v", c.staleness)
			}
		}
		if c.failover {
			res.setting += ", failover"
		}
		if ap {
			res.setting += ", AutoPipeline"
		}
	case "goredis-autopipeline-per-shard":
		t, err := newPerShardAPTarget(fl, cnt)
		if err != nil {
			return nil, err
		}
		tg = t
		res.setting = "go-redis's AutoPipeline of each shard's client, keys placed by redshard's ring by hand; no redshard routing, no hot-key mitigation"
	case "rueidis-per-shard":
		t, err := newRueidisPerShardTarget(fl, cnt, false)
		if err != nil {
			return nil, err
		}
		tg = t
		res.setting = "a rueidis client (DisableCache) per shard, keys placed by redshard's ring by hand; no redshard routing, no hot-key mitigation"
	case "rueidis-csc-per-shard":
		t, err := newRueidisPerShardTarget(fl, cnt, true)
		if err != nil {
			return nil, err
		}
		tg = t
		res.setting = fmt.Sprintf("a rueidis client per shard, GETs by DoCache (OPTIN tracking, TTL %v), keys placed by redshard's ring by hand; a miss counts as one command (on the wire: CLIENT CACHING YES, MULTI, PTTL, GET, EXEC)", rueidisCacheTTL)
	case "goredis-csc-per-shard":
		t, err := newGoredisCSCPerShardTarget(fl, cnt)
		if err != nil {
			return nil, err
		}
		tg = t
		res.setting = "a go-redis client per shard with ClientSideCacheConfig (its defaults), RESP3, keys placed by redshard's ring by hand; its cache hits pass the hooks, so they are moved from shard commands to served locally by its CSCStats (the load chart still counts them)"
	case "goredis-autopipeline":
		t, err := newAutoPipelineTarget(fl, cnt)
		if err != nil {
			return nil, err
		}
		tg = t
		res.setting = fmt.Sprintf("one plain redis.Client to %s (%s), its AutoPipeline; no sharding, no hot-key mitigation", t.shard.Name, t.shard.Addr)
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
		if system == "goredis-autopipeline" {
			break // the only shard that takes part
		}
	}
	keys := c.wl.keyNames()
	value := strings.Repeat("v", c.wl.valueSize)
	if c.preload {
		if err := preload(ctx, tg.cmdable(), keys, value); err != nil {
			return nil, err
		}
	}
	cnt.reset()
	// Every run starts from a collected heap: the garbage of the previous
	// run (and of preloading) is not charged to this one.
	runtime.GC()

	stop := make(chan struct{})
	timelineC := sampler(cnt, sampleStep, stop)
	start := time.Now()
	user0, sys0 := processCPU()
	srv0, srvCmds0 := fl.serverStats(ctx)
	cache, _ := tg.(cachingTarget)
	var hits0 int64
	if cache != nil {
		hits0, _ = cache.cacheHits()
	}
	var shardHits0 map[string]int64
	hooked, _ := tg.(hooksSeeHits)
	if hooked != nil {
		shardHits0 = hooked.shardHits()
	}
	run := load(ctx, tg.kv(), &c.wl, keys, value, stop, nil)
	c.events(ctx, start, tg, fl, res)
	close(stop)
	run.wait()
	res.elapsed = time.Since(start)
	user1, sys1 := processCPU()
	res.cpu, res.cpuUser = user1-user0+sys1-sys0, user1-user0
	res.serverCmds = -1
	if srv1, srvCmds1 := fl.serverStats(ctx); srv0 >= 0 || srvCmds0 >= 0 {
		if srv0 >= 0 && srv1 >= srv0 {
			res.serverCPU = srv1 - srv0
		}
		if srvCmds0 >= 0 && srvCmds1 >= srvCmds0 {
			res.serverCmds = srvCmds1 - srvCmds0
		}
	}
	res.tl = <-timelineC
	res.hot = tg.hotStats()
	res.cacheHits = -1
	if cache != nil {
		if hits1, ok := cache.cacheHits(); ok {
			res.cacheHits = hits1 - hits0
		}
	}
	var hitsByShard map[string]int64
	if hooked != nil {
		hitsByShard = hooked.shardHits()
		for name, h := range hitsByShard {
			hitsByShard[name] = h - shardHits0[name]
		}
	}
	// Closing waits for the flights the client runs for callers, so every
	// command they send is counted before the totals are taken.
	closed = true
	if err := tg.close(); err != nil {
		res.runErrors = append(res.runErrors, "close: "+err.Error())
	}
	res.t = run.total()
	res.shards = cnt.snapshot()
	if system == "redshard-autopipeline" || strings.HasPrefix(system, "goredis-autopipeline") {
		// Batches run on the AutoPipeliner's context, not the workers':
		// their commands are untraced. Count everything as load, and no
		// operation as served locally (none is, without mitigation).
		res.setting += " (the GETs and SETs shards got counted as load: batches carry no operation's trace)"
		if c.wl.mget > 1 {
			res.noCheck = "not kept: its MGETs are split into batches that carry no operation, so commands per operation are unknown"
		}
		for i := range res.shards {
			res.shards[i].traced += res.shards[i].batched
			res.shards[i].batched = 0
		}
		switch {
		case res.hot == nil:
			res.t.local = 0
		case res.hot.Mitigation == redshard.LocalCache:
			// The operations no shard saw are the cache's: its hits and
			// the misses that waited for another caller's read.
			res.t.local = res.hot.CacheHits + res.hot.Coalesced
			res.noCheck = "not kept: batches carry no operation's trace; served locally is the cache's count (hits + coalesced reads)"
		default:
			res.t.local = 0 // split reads go to the copies' shards
			res.noCheck = "not kept: batches carry no operation's trace, so which operations reached no shard is unknown"
		}
	}
	if hitsByShard != nil {
		// The hooks counted the cache's hits as commands handed to the
		// shard client: they are the reads served locally.
		for i := range res.shards {
			h := hitsByShard[res.shards[i].name]
			res.shards[i].traced -= h
			res.t.local += h
		}
	}
	for i := range res.shards { // elsewhere: preloading, cleanup, ... (none during a run)
		res.shards[i].untraced += res.shards[i].batched
	}
	for _, s := range res.shards {
		res.untraced += s.untraced
		res.watched += s.watched
		res.watchedMGet += s.watchedMGet
	}
	res.celebrity = c.wl.kind == "celebrity"
	res.mget = max(1, c.wl.mget)
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
