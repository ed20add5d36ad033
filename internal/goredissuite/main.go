// Command goredissuite runs go-redis v9.23.0's own Ginkgo suites
// (commands_test.go, pipeline_test.go, tx_test.go, pubsub_test.go,
// iterator_test.go) against real redis-server processes it starts itself,
// three ways: through a plain go-redis client (the baseline), and with the
// client replaced by redshard on 1 and on 4 shards, each on RESP2 and
// RESP3. It prints how many specs pass, are refused (ErrNotSharded,
// ErrCrossShard) or fail otherwise, writes the list of non-passing specs,
// and fails when a spec that passes on the plain client fails through
// redshard for a reason other than ErrCrossShard on 4 shards or an entry of
// allowlist.txt.
//
// The suites are used from the module cache, in a temporary module (a copy
// of go-redis with the specs' client constructors rewritten, see
// rewrite.go); nothing of go-redis is copied into this repository, and this
// program uses only the standard library, so the library's go.mod does not
// gain Ginkgo.
//
// Usage, from the repository root:
//
//	go run ./internal/goredissuite [flags]
//
// See docs/conformance.md.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// config is one way of running the suites.
type config struct {
	Name     string // plain-resp3, rs1-resp2, ...
	Shards   int    // 0: the plain go-redis client on one server
	Protocol int    // 2 or 3
	Baseline string // the plain configuration of the same protocol
	// Churn: the membership keeps changing during the run (shim
	// churn_test.go.txt): a 5th server joins and leaves every client's
	// ring every 200 ms, with Rebalance in between.
	Churn bool
}

// hangs lists specs that hang through redshard (a known defect each, named
// in the allow-list): they are skipped in redshard's configurations rather
// than left to eat the time limit, and gated like any failure, so a fix
// shows up as a stale allow-list entry once the spec is removed here.
var hangs = []string{
	// None known. (The two "should reconnect on ReceiveMessage error"
	// specs were here until a subscribing write waited for the shards'
	// confirmation: the reconnected PubSub's message was published before
	// its subscription reached the shard.)
}

var allConfigs = []config{
	{"plain-resp2", 0, 2, "plain-resp2", false},
	{"plain-resp3", 0, 3, "plain-resp3", false},
	{"rs1-resp2", 1, 2, "plain-resp2", false},
	{"rs1-resp3", 1, 3, "plain-resp3", false},
	{"rs4-resp2", 4, 2, "plain-resp2", false},
	{"rs4-resp3", 4, 3, "plain-resp3", false},
	{"rs4churn-resp2", 4, 2, "plain-resp2", true},
	{"rs4churn-resp3", 4, 3, "plain-resp3", true},
}

func main() {
	os.Exit(run())
}

// errMissing marks a missing prerequisite (redis-server, the go-redis
// module): a skip locally, a failure in CI.
var errMissing = errors.New("missing prerequisite")

func run() int {
	var (
		only      = flag.String("configs", "", "comma-separated configurations to run (default all: plain-resp2,plain-resp3,rs1-resp2,rs1-resp3,rs4-resp2,rs4-resp3,rs4churn-resp2,rs4churn-resp3); the plain baselines they need are added")
		parallel  = flag.Int("parallel", 2, "configurations run at the same time")
		allowFile = flag.String("allowlist", "", "allow-list file (default internal/goredissuite/allowlist.txt of the repository)")
		outDir    = flag.String("out", filepath.Join(os.TempDir(), "redshard-goredissuite"), "directory for the reports: table.md, nonpassing.txt, per-configuration ginkgo JSON reports and logs")
		keep      = flag.Bool("keep", false, "keep the temporary module (its path is printed)")
		update    = flag.Bool("update-allowlist", false, "rewrite the allow-list to excuse exactly the current failures (reasons generated), then exit 0")
		timeout   = flag.Duration("timeout", 10*time.Minute, "time limit of one configuration's run")
		binary    = flag.String("redis-server", "redis-server", "redis-server binary")
		period    = flag.Duration("churn-period", 200*time.Millisecond, "time between two membership changes in the rs4churn-* configurations (each change's Rebalance runs half of it later)")
	)
	flag.Parse()
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "goredissuite: %6.1fs "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	fail := func(err error) int {
		if errors.Is(err, errMissing) && os.Getenv("CI") == "" {
			fmt.Fprintf(os.Stderr, "goredissuite: SKIP (CI would fail): %v\n", err)
			return 0
		}
		fmt.Fprintf(os.Stderr, "goredissuite: FAIL: %v\n", err)
		return 1
	}

	configs, err := selectConfigs(*only)
	if err != nil {
		return fail(err)
	}
	repo, err := repoRoot()
	if err != nil {
		return fail(err)
	}
	if *allowFile == "" {
		*allowFile = filepath.Join(repo, "internal", "goredissuite", "allowlist.txt")
	}
	bin, err := exec.LookPath(*binary)
	if err != nil {
		return fail(fmt.Errorf("%w: redis-server: %v", errMissing, err))
	}
	version, err := serverVersion(bin)
	if err != nil {
		return fail(err)
	}
	texts, err := readRefusalTexts(repo)
	if err != nil {
		return fail(err)
	}
	src, err := findGoRedis(repo)
	if err != nil {
		return fail(fmt.Errorf("%w: %v", errMissing, err))
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return fail(err)
	}

	work, err := os.MkdirTemp("", "redshard-goredissuite-")
	if err != nil {
		return fail(err)
	}
	if *keep {
		logf("temporary module kept in %s", work)
	} else {
		defer os.RemoveAll(work)
	}
	mod := filepath.Join(work, "go-redis")
	logf("copying go-redis %s from %s into %s", goRedisVersion, src, mod)
	st, err := prepareModule(src, mod, repo)
	if err != nil {
		return fail(err)
	}
	// The rewrite is checked against what it is documented to do, so a
	// new layout of the suite shows up here, not as a silently plain run.
	if st.Constructors < len(specFiles) || st.Types < len(specFiles) || st.Dropped != len(mainDrops)+2 {
		return fail(fmt.Errorf("rewrite did not find what it expects in go-redis %s: %+v", goRedisVersion, st))
	}
	logf("rewrote %d redis.NewClient calls and %d *redis.Client types, dropped %d declarations of main_test.go", st.Constructors, st.Types, st.Dropped)
	logf("building the test binaries")
	bins, err := buildSuites(mod, configs)
	if err != nil {
		return fail(err)
	}
	testBinary := func(c config) string { return bins[binaryFor(c).name] }

	logf("running %d configurations, %d at a time, on redis-server %s", len(configs), *parallel, version)
	results := map[string][]spec{}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, max(1, *parallel))
	var wg sync.WaitGroup
	for _, c := range configs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t0 := time.Now()
			testBin := testBinary(c)
			specs, err := runConfig(c, testBin, bin, mod, work, *outDir, "", nil, version, *timeout, *period, texts)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
				return
			}
			results[c.Name] = specs
			var n counts
			for _, s := range specs {
				n.add(s)
			}
			logf("%s done in %.0fs: %d passed, %d refused, %d other failed", c.Name, time.Since(t0).Seconds(), n.Passed, n.NotSharded+n.CrossShard, n.Other)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fail(errors.Join(errs...))
	}

	var table strings.Builder
	fmt.Fprintf(&table, "go-redis %s suites (%s) on redis-server %s, %s\n\n", goRedisVersion, strings.Join(specFiles, ", "), version, time.Now().UTC().Format("2006-01-02"))
	printTables(&table, configs, results)
	fmt.Print(table.String())
	if err := os.WriteFile(filepath.Join(*outDir, "table.md"), []byte(table.String()), 0o644); err != nil {
		return fail(err)
	}
	nonPassing := filepath.Join(*outDir, "nonpassing.txt")
	flaky := map[string]bool{}
	defer func() {
		if err := writeNonPassing(nonPassing, configs, results, flaky, texts); err != nil {
			fmt.Fprintf(os.Stderr, "goredissuite: %v\n", err)
		}
	}()
	fmt.Printf("\nnon-passing specs, per configuration: %s\n", nonPassing)

	if *update {
		unexcused, _, _ := gate(configs, results, nil)
		if err := writeAllowList(*allowFile, allowListFor(unexcused, texts)); err != nil {
			return fail(err)
		}
		fmt.Printf("allow-list %s rewritten: %d failures excused\n", *allowFile, len(unexcused))
		return 0
	}
	allow, err := readAllowList(*allowFile)
	if err != nil {
		return fail(err)
	}
	unexcused, excused, accepted := gate(configs, results, allow)
	// The suite has timing-bound specs (1s receive timeouts, blocking pops)
	// and specs that leave state behind when they fail: an unexcused
	// failure is run again, alone, on fresh servers. One that passes then is
	// reported as flaky and not gated; one that fails again fails the gate.
	// Not in a churn configuration: what churn breaks depends on when the
	// ring changes, so a failure there that passes alone is no less real
	// (lost data would look just like that); it is gated as it is.
	if len(unexcused) > 0 {
		logf("running %d unexcused failures again, alone", len(unexcused))
		var still []gateFailure
		for _, c := range configs {
			if c.Churn {
				for _, f := range unexcused {
					if f.Config == c.Name {
						still = append(still, f)
					}
				}
				continue
			}
			var focus []string
			for _, f := range unexcused {
				if f.Config == c.Name {
					focus = append(focus, fmt.Sprintf("%s:%d", f.Spec.File, f.Spec.Line))
				}
			}
			if focus == nil {
				continue
			}
			again, err := runConfig(c, testBinary(c), bin, mod, work, *outDir, "-rerun", focus, version, *timeout, *period, texts)
			if err != nil {
				return fail(fmt.Errorf("%s, run again: %w", c.Name, err))
			}
			passed := map[string]bool{}
			for _, s := range again {
				passed[s.Key] = s.Class == classPassed
			}
			for _, f := range unexcused {
				if f.Config != c.Name {
					continue
				}
				if passed[f.Spec.Key] {
					flaky[c.Name+" | "+f.Spec.Key] = true
				} else {
					still = append(still, f)
				}
			}
		}
		if len(flaky) > 0 {
			fmt.Printf("\n%d specs failed in the run and passed when run again alone (flaky, not gated; see %s)\n", len(flaky), nonPassing)
		}
		unexcused = still
	}
	var stale, quiet []*allowEntry
	used := 0
	var steady []config
	for _, c := range configs {
		if !c.Churn {
			steady = append(steady, c)
		}
	}
	for _, e := range allow {
		switch {
		case e.used:
			used++
		case e.appliesTo(steady):
			stale = append(stale, e)
		case e.appliesTo(configs):
			// Under churn a failure depends on when the ring changes: an
			// entry that excused nothing this time is not stale for that.
			quiet = append(quiet, e)
		}
	}
	var gt strings.Builder
	printGateTable(&gt, configs, results, accepted, excused, unexcused, flaky)
	fmt.Print("\n" + gt.String())
	if f, err := os.OpenFile(filepath.Join(*outDir, "table.md"), os.O_APPEND|os.O_WRONLY, 0); err == nil {
		fmt.Fprint(f, "\n"+gt.String())
		f.Close()
	}
	crossShard, change := 0, 0
	for _, f := range accepted {
		if f.Spec.Class == classChange {
			change++
		} else {
			crossShard++
		}
	}
	fmt.Printf("\ngate: %d ErrCrossShard on 4 shards and %d change refusals under churn (accepted), %d failures excused by %d allow-list entries, %d unexcused\n",
		crossShard, change, len(excused), used, len(unexcused))
	if len(stale) > 0 {
		fmt.Printf("%d allow-list entries were not needed (stale; remove them):\n", len(stale))
		for _, e := range stale {
			fmt.Printf("  %s:%d: %s | %s\n", filepath.Base(*allowFile), e.Line, strings.Join(e.Patterns, ","), e.Spec)
		}
	}
	if len(quiet) > 0 {
		fmt.Printf("%d allow-list entries of churn configurations only excused nothing in this run (timing-dependent; not stale for that):\n", len(quiet))
		for _, e := range quiet {
			fmt.Printf("  %s:%d: %s | %s\n", filepath.Base(*allowFile), e.Line, strings.Join(e.Patterns, ","), e.Spec)
		}
	}
	logf("wall time %.0fs", time.Since(start).Seconds())
	if len(unexcused) > 0 {
		fmt.Printf("\nFAIL: %d specs pass on the plain client and fail through redshard, not excused (ErrCrossShard on 4 shards, or %s):\n", len(unexcused), *allowFile)
		for _, f := range unexcused {
			fmt.Printf("  %s | %s | %s\n", f.Config, f.Spec.Key, texts.reason(f.Spec.Class, f.Spec.Message))
		}
		return 1
	}
	fmt.Println("\nPASS")
	return 0
}

// appliesTo reports whether the entry names a configuration of this run
// (an entry for configurations not run is not stale).
func (e *allowEntry) appliesTo(configs []config) bool {
	for _, c := range configs {
		for _, p := range e.Patterns {
			if ok, _ := filepath.Match(p, c.Name); ok {
				return true
			}
		}
	}
	return false
}

// selectConfigs parses -configs, adding the baselines the chosen
// configurations are compared with.
func selectConfigs(only string) ([]config, error) {
	if only == "" {
		return allConfigs, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, c := range allConfigs {
			if c.Name == n {
				want[n], want[c.Baseline], found = true, true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown configuration %q", n)
		}
	}
	var out []config
	for _, c := range allConfigs {
		if want[c.Name] {
			out = append(out, c)
		}
	}
	return out, nil
}

// repoRoot is the directory of redshard's go.mod, found from the working
// directory upwards.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module "+redshardModule+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run from inside the redshard repository (no go.mod of %s above the working directory)", redshardModule)
		}
		dir = parent
	}
}

// runConfig starts the configuration's servers, runs its test binary with
// a JSON report, stops the servers and returns the specs' outcomes.
//
// tag is added to the report's and log's names; focus, when not nil, is the
// file:line locations of the specs to run (default: every spec of
// specFiles).
func runConfig(c config, testBin, redisBin, mod, work, outDir, tag string, focus []string, version string, timeout, period time.Duration, texts refusalTexts) ([]spec, error) {
	n := max(1, c.Shards)
	if c.Churn {
		n++ // the server that joins and leaves
	}
	sdir := filepath.Join(work, "servers-"+c.Name+tag)
	var addrs []string
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for range n {
		s, err := startServer(redisBin, sdir)
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
		addrs = append(addrs, s.Addr)
	}
	report := filepath.Join(outDir, c.Name+tag+".json")
	logFile := filepath.Join(outDir, c.Name+tag+".log")
	_ = os.Remove(report)
	log, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	dead, err := freePort() // the MIGRATE spec's target: nothing listens there
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(testBin,
		"-test.run", "^TestGinkgoSuite$",
		"-test.timeout", (timeout + time.Minute).String(),
		"-ginkgo.timeout", timeout.String(),
		// A fixed seed: the same order of the top-level containers on every
		// run, so a failure caused by an earlier spec reproduces.
		"-ginkgo.seed", "1",
		"-ginkgo.no-color",
		"-ginkgo.json-report", report,
	)
	if focus == nil {
		focus = specFiles
	}
	for _, f := range focus {
		cmd.Args = append(cmd.Args, "-ginkgo.focus-file", f)
	}
	if c.Shards > 0 {
		for _, h := range hangs {
			cmd.Args = append(cmd.Args, "-ginkgo.skip", regexp.QuoteMeta(h))
		}
	}
	cmd.Dir = mod // some specs read files relative to the package
	shardAddrs := addrs
	if c.Churn {
		shardAddrs = addrs[:c.Shards]
		cmd.Env = append(cmd.Env, "GOREDISSUITE_CHURN_ADDR="+addrs[c.Shards], "GOREDISSUITE_CHURN_PERIOD="+period.String())
	}
	cmd.Env = append(append(os.Environ(), cmd.Env...),
		"GOREDISSUITE_ADDRS="+strings.Join(shardAddrs, ","),
		"GOREDISSUITE_PROTOCOL="+strconv.Itoa(c.Protocol),
		"GOREDISSUITE_DEAD_PORT="+strconv.Itoa(dead),
		"REDIS_VERSION="+version,
	)
	cmd.Stdout, cmd.Stderr = log, log
	runErr := cmd.Run() // non-zero when specs fail, which is what is measured
	spans, err := itSpans(mod, specFiles)
	if err != nil {
		return nil, err
	}
	specs, err := readReport(report, texts, spans)
	if err != nil {
		return nil, fmt.Errorf("no report (%v; see %s): %w", runErr, logFile, err)
	}
	if !beforeSuitePassed(report) {
		return nil, fmt.Errorf("the suite's BeforeSuite failed; see %s", logFile)
	}
	if c.Shards == 0 && tag == "" {
		passed := 0
		for _, s := range specs {
			if s.Class == classPassed {
				passed++
			}
		}
		if passed == 0 {
			return nil, fmt.Errorf("no spec passed on the plain client; see %s", logFile)
		}
	}
	return specs, nil
}

// writeAllowList replaces the entries of the allow-list with entries,
// keeping its leading comment block (the file's documentation).
func writeAllowList(file, entries string) error {
	var head strings.Builder
	if data, err := os.ReadFile(file); err == nil {
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if !strings.HasPrefix(line, "#") && strings.TrimSpace(line) != "" {
				break
			}
			head.WriteString(line)
		}
	}
	h := strings.TrimRight(head.String(), "\n")
	if h != "" {
		h += "\n\n"
	}
	return os.WriteFile(file, []byte(h+entries), 0o644)
}
