package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// mainEnv, set to 1 in a child's environment, makes the test binary run as
// the redshard command itself (its main: run on the process's arguments,
// stdout and stderr), so tests can signal a whole process.
const mainEnv = "REDSHARD_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// runCmd runs the command line args in-process and returns the exit status
// and what it wrote.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// writeFile writes body to name in a temp directory and returns its path.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTopLevel(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{nil, exitUsage, "", "Commands:"},
		{[]string{"help"}, exitOK, "Commands:", ""},
		{[]string{"--help"}, exitOK, "rebalance", ""},
		{[]string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{[]string{"help", "plan"}, exitOK, "redshard plan", ""},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.inStdout) || !strings.Contains(errOut, tc.inStderr) {
			t.Errorf("redshard %q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				tc.args, code, out, errOut, tc.code, tc.inStdout, tc.inStderr)
		}
	}
}

func TestEverySubcommandHasHelp(t *testing.T) {
	for _, sc := range subcommands {
		for _, h := range []string{"--help", "-h"} {
			code, out, errOut := runCmd(t, sc.name, h)
			if code != exitOK || !strings.Contains(out, "Usage:\n  redshard "+sc.name) || !strings.Contains(out, "Flags:") || errOut != "" {
				t.Errorf("redshard %s %s: exit %d, stdout %q, stderr %q", sc.name, h, code, out, errOut)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"shares"}, "no shards"},
		{[]string{"shares", "--bogus"}, "flag provided but not defined"},
		{[]string{"shares", "--shard", "a"}, "want name=host:port[:weight]"},
		{[]string{"shares", "--shard", "a=h:1:-2"}, "positive number"},
		{[]string{"shares", "--shard", "a=h:1", "--shard", "a=h:2"}, "duplicate shard name"},
		{[]string{"shares", "--shard", "a=h:1", "extra"}, `unexpected argument "extra"`},
		{[]string{"shares", "--shard", "a=h:1", "--config", "x.json"}, "not both"},
		{[]string{"plan", "--shard", "a=h:1"}, "no change"},
		{[]string{"plan", "--shard", "a=h:1", "--remove", "b"}, "no such shard"},
		{[]string{"plan", "--shard", "a=h:1", "--remove", "a"}, "removes every shard"},
		{[]string{"plan", "--shard", "a=h:1", "--add", "a=h:2"}, "already a shard"},
		{[]string{"plan", "--shard", "a=h:1", "--add", "b=h:1"}, "address h:1"},
		{[]string{"plan", "--shard", "a=h:1", "--weight", "a=zero"}, "positive number"},
		{[]string{"rebalance", "--shard", "a=h:1", "--add", "b=h:2", "--batch", "0"}, "--batch"},
		{[]string{"bench", "--workload", "pareto"}, "--workload"},
		{[]string{"bench", "--zipf-s", "0", "--workload", "zipf"}, "--zipf-s 0: must be a number greater than 0"},
		{[]string{"bench", "--zipf-s", "+Inf", "--workload", "zipf"}, "--zipf-s"},
		{[]string{"bench", "--zipf-s", "NaN", "--workload", "zipf"}, "--zipf-s"},
		{[]string{"bench", "--mitigation", "magic"}, "--mitigation"},
		{[]string{"bench", "--compare", "twemproxy"}, "--compare"},
		{[]string{"bench", "--compare", "goredis-ring,twemproxy"}, `unknown system "twemproxy"`},
		{[]string{"bench", "--compare", "goredis-ring,goredis-ring"}, "named twice"},
		{[]string{"bench", "--compare", "goredis-autopipeline", "--add-shard-at", "1s"}, "first shard alone"},
		{[]string{"bench", "--compare", "goredis-ring,goredis-autopipeline", "--kill-shard-at", "1s"}, "first shard alone"},
		{[]string{"bench", "--shards", "2", "--weights", "1,1,2"}, "--weights has 3"},
		// The client-side caches need CLIENT TRACKING, which embedded shards lack.
		{[]string{"bench", "--compare", "rueidis-csc-per-shard"}, "need real servers"},
		{[]string{"bench", "--compare", "goredis-ring,goredis-csc-per-shard"}, "need real servers"},
		{[]string{"bench", "--shard", "a=h:1", "--compare", "goredis-csc-per-shard", "--mget", "4"}, "no --mget"},
		{[]string{"bench", "--shard", "a=h:1", "--compare", "rueidis-csc-per-shard", "--add-shard-at", "1s", "--add-shard", "b=h:2"}, "fixed set of shards"},
		{[]string{"bench", "--compare", "rueidis-csc-per-shard,rueidis-csc-per-shard"}, "named twice"},
		{[]string{"bench", "--shard", "a=h:1", "--kill-shard-at", "1s"}, "embedded"},
		{[]string{"bench", "--shard", "a=h:1", "--add-shard-at", "1s"}, "--add-shard name="},
		{[]string{"bench", "--add-shard", "b=h:2"}, "--add-shard names one"},
		{[]string{"hotkeys", "--mitigation", "none"}, "--mitigation"},
		{[]string{"hotkeys", "--top", "0"}, "--top"},
		// --top beyond what Client.HotKeys returns is refused, not capped.
		{[]string{"hotkeys", "--top", "50"}, "want 1 to 20"},
		// --add-shard-at / --kill-shard-at after the end of the run.
		{[]string{"bench", "--duration", "1s", "--add-shard-at", "2s"}, "the run ends at --duration 1s"},
		{[]string{"bench", "--duration", "1s", "--add-shard-at", "1s"}, "the run ends at --duration 1s"},
		{[]string{"bench", "--duration", "1s", "--kill-shard-at", "5s"}, "--kill-shard-at 5s"},
		// Negative, zero and non-finite numbers.
		{[]string{"bench", "--shards", "-1"}, "--shards -1: want 1 to 64"},
		{[]string{"bench", "--shards", "0"}, "--shards 0: want 1 to 64"},
		{[]string{"bench", "--shards", "65"}, "--shards 65"},
		{[]string{"hotkeys", "--shards", "-1"}, "--shards -1: want 1 to 64"},
		{[]string{"bench", "--duration", "-1s"}, "--duration"},
		{[]string{"bench", "--add-shard-at", "-1s"}, "must not be negative"},
		{[]string{"bench", "--keys", "-5"}, "--keys"},
		{[]string{"bench", "--concurrency", "-1"}, "--concurrency"},
		{[]string{"bench", "--value-size", "-1"}, "--value-size"},
		// Values that exhaust memory before measuring anything.
		{[]string{"bench", "--keys", "10000000000"}, "--keys 10000000000: want 2 to 100000000"},
		{[]string{"bench", "--value-size", "100000000000"}, "--value-size 100000000000: want 0 to 536870912"},
		{[]string{"bench", "--concurrency", "100000000"}, "--concurrency 100000000: want 1 to 10000"},
		{[]string{"bench", "--keys", "100000000", "--value-size", "1000"}, "embedded shards hold the data"},
		{[]string{"hotkeys", "--keys", "10000000000"}, "--keys 10000000000"},
		{[]string{"hotkeys", "--concurrency", "100000000"}, "--concurrency 100000000"},
		{[]string{"bench", "--read-ratio", "-0.1"}, "--read-ratio"},
		{[]string{"bench", "--read-ratio", "NaN"}, "--read-ratio"},
		{[]string{"bench", "--zipf-s", "-2"}, "--zipf-s"},
		{[]string{"bench", "--celebrity-share", "-1"}, "--celebrity-share"},
		{[]string{"bench", "--seed", "-1"}, `invalid value "-1" for flag -seed`},
		{[]string{"bench", "--weights", "1,-1"}, "positive number"},
		{[]string{"bench", "--mget", "1"}, "--mget 1"},
		{[]string{"bench", "--mget", "-2"}, "--mget -2"},
		{[]string{"bench", "--mget", "20", "--keys", "10"}, "--mget 20"},
		{[]string{"hotkeys", "--top", "-3"}, "--top"},
		{[]string{"hotkeys", "--interval", "-1s"}, "--interval"},
		{[]string{"hotkeys", "--interval", "0s"}, "--interval"},
		{[]string{"hotkeys", "--duration", "-1s"}, "--duration"},
		{[]string{"hotkeys", "--window", "-1s"}, "--window"},
		{[]string{"hotkeys", "--min-rate", "-1"}, "--min-rate"},
		{[]string{"hotkeys", "--min-rate", "NaN"}, "--min-rate"},
		{[]string{"hotkeys", "--min-rate", "+Inf"}, "--min-rate"},
		{[]string{"hotkeys", "--min-share", "-0.5"}, "--min-share"},
		{[]string{"hotkeys", "--min-share", "NaN"}, "--min-share"},
		{[]string{"shares", "--shard", "a=h:1", "--vnodes", "-1"}, "--vnodes"},
		{[]string{"rebalance", "--shard", "a=h:1", "--add", "b=h:2", "--batch", "-1"}, "--batch"},
		{[]string{"rebalance", "--shard", "a=h:1", "--add", "b=h:2", "--rate", "-1"}, "--rate"},
		// Rates Rebalance cannot pace are refused before anything runs.
		{[]string{"rebalance", "--shard", "a=h:1", "--add", "b=h:2", "--rate", "+Inf"}, "--rate +Inf"},
		{[]string{"rebalance", "--shard", "a=h:1", "--add", "b=h:2", "--rate", "NaN"}, "--rate NaN"},
		{[]string{"rebalance", "--shard", "a=h:1", "--add", "b=h:2", "--rate", "1e12"}, "--rate 1e+12"},
		{[]string{"rebalance", "--shard", "a=h:1", "--add", "b=h:2", "--rate", "1e-300"}, "--rate 1e-300"},
		{[]string{"rebalance", "--shard", "a=h:1", "--add", "b=h:2", "--batch", "100000000"}, "--batch"},
		// The library's validation (Options.Validate) in place of the tool's.
		{[]string{"shares", "--shard", "a=h:1", "--shard", "b=h:1"}, "duplicate shard address"},
		{[]string{"plan", "--shard", "a=h:1", "--weight", "a=1e300"}, "invalid shard weight"},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "--help") {
			t.Errorf("redshard %q: exit %d, stderr %q (stdout %q); want exit 2 and an error with %q",
				tc.args, code, errOut, out, tc.want)
		}
	}
}

func TestParseShardSpec(t *testing.T) {
	for _, tc := range []struct {
		spec         string
		name, addr   string
		weight       float64
		wantErrMatch string
	}{
		{"a=10.0.0.1:6379", "a", "10.0.0.1:6379", 1, ""},
		{"a=10.0.0.1:6379:2.5", "a", "10.0.0.1:6379", 2.5, ""},
		{"cache-b=redis.internal:7000:3", "cache-b", "redis.internal:7000", 3, ""},
		{"v6=[::1]:6379", "v6", "[::1]:6379", 1, ""},
		{"v6=[::1]:6379:2", "v6", "[::1]:6379", 2, ""},
		{"=h:1", "", "", 0, "want name="},
		{"a=h", "", "", 0, "want host:port"},
		{"a=h:0", "", "", 0, "bad port"},
		{"a=h:1:0", "", "", 0, "positive"},
		{"a=h:1:NaN", "", "", 0, "positive"},
	} {
		s, err := parseShardSpec(tc.spec)
		if tc.wantErrMatch != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrMatch) {
				t.Errorf("parseShardSpec(%q) = %v, %v; want an error with %q", tc.spec, s, err, tc.wantErrMatch)
			}
			continue
		}
		if err != nil || s.Name != tc.name || s.Addr != tc.addr || s.Weight != tc.weight {
			t.Errorf("parseShardSpec(%q) = %+v, %v; want %s %s %g", tc.spec, s, err, tc.name, tc.addr, tc.weight)
		}
	}
}

// withSubcommand adds sc to the subcommands for the rest of the test.
func withSubcommand(t *testing.T, sc subcommand) {
	t.Helper()
	saved := subcommands
	subcommands = append(slices.Clone(subcommands), sc)
	t.Cleanup(func() { subcommands = saved })
}

func TestPanicExitsOne(t *testing.T) {
	withSubcommand(t, subcommand{name: "crash", run: func(context.Context, []string, io.Writer, io.Writer) error {
		var m map[string]int
		m["x"]++ // a bug: assignment to a nil map
		return nil
	}})
	// A worker goroutine's panic is carried to run as well.
	withSubcommand(t, subcommand{name: "crash-worker", run: func(ctx context.Context, _ []string, _, _ io.Writer) error {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		defer c.Close()
		c.AddHook(panicHook{})
		w := workload{kind: "uniform", keys: 10, concurrency: 2, readRatio: 1}
		r := load(ctx, c, &w, w.keyNames(), "v", make(chan struct{}), nil)
		r.wait()
		return nil
	}})
	for _, name := range []string{"crash", "crash-worker"} {
		code, _, errOut := runCmd(t, name)
		if code != exitFail || !strings.Contains(errOut, "panic:") || !strings.Contains(errOut, "goroutine") ||
			strings.Contains(errOut, "--help") {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 with the panic and its stack", name, code, errOut)
		}
	}
}

type panicHook struct{}

func (panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (panicHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error { panic("hook bug") }
}
func (panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestRedisLogQuietUnlessVerbose(t *testing.T) {
	// A subcommand whose client cannot dial: go-redis logs the failure.
	gone := miniredis.RunT(t)
	addr := gone.Addr()
	gone.Close()
	withSubcommand(t, subcommand{name: "dial", run: func(ctx context.Context, args []string, stdout, _ io.Writer) error {
		f := newFlags("dial", "", "")
		if err := f.parse(args, stdout); err != nil {
			return err
		}
		for range 3 {
			c := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1})
			_ = c.Ping(ctx).Err()
			c.Close()
		}
		return nil
	}})
	code, _, errOut := runCmd(t, "dial")
	if code != exitOK || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "failed to dial") ||
		!strings.Contains(errOut, "and 2 more") || !strings.Contains(errOut, "--verbose") {
		t.Errorf("quiet: exit %d, stderr %q; want one summary line counting 3 log lines", code, errOut)
	}
	code, _, errOut = runCmd(t, "dial", "--verbose")
	if code != exitOK || strings.Count(errOut, "failed to dial") != 3 || strings.Contains(errOut, "more (--verbose") {
		t.Errorf("--verbose: exit %d, stderr %q; want the 3 log lines", code, errOut)
	}
}

// TestUsageLineListsEveryFlag: each subcommand's usage line names every
// flag of its FlagSet (--verbose, which every subcommand has, is in the
// top-level help), unless it ends in "[flags]", which says that more follow.
func TestUsageLineListsEveryFlag(t *testing.T) {
	for _, sc := range subcommands {
		code, out, _ := runCmd(t, sc.name, "--help")
		if code != exitOK {
			t.Fatalf("redshard %s --help: exit %d", sc.name, code)
		}
		lines := strings.Split(out, "\n")
		if len(lines) < 2 || lines[0] != "Usage:" {
			t.Fatalf("redshard %s --help starts %q", sc.name, lines[:min(2, len(lines))])
		}
		usage := lines[1]
		if strings.HasSuffix(usage, " [flags]") {
			continue
		}
		var flags []string
		for _, l := range lines {
			if name, ok := strings.CutPrefix(l, "  -"); ok {
				flags = append(flags, strings.Fields(name)[0])
			}
		}
		if len(flags) == 0 {
			t.Fatalf("redshard %s --help lists no flags:\n%s", sc.name, out)
		}
		for _, name := range flags {
			if name == "verbose" {
				continue
			}
			if !strings.Contains(usage+" ", "--"+name+" ") && !strings.Contains(usage, "--"+name+"=") && !strings.Contains(usage, "--"+name+"]") && !strings.Contains(usage, "--"+name+")") {
				t.Errorf("redshard %s: usage line %q does not list --%s", sc.name, usage, name)
			}
		}
	}
}

// TestBenchCompareHelpNamesEverySystem: --compare's help lists every system
// --compare accepts.
func TestBenchCompareHelpNamesEverySystem(t *testing.T) {
	_, out, _ := runCmd(t, "bench", "--help")
	_, help, ok := strings.Cut(out, "  -compare systems\n")
	if !ok {
		t.Fatalf("no -compare in bench --help:\n%s", out)
	}
	help, _, _ = strings.Cut(help, "\n  -")
	for _, sys := range compareSystems {
		if !strings.Contains(help, sys+" (") {
			t.Errorf("--compare's help does not describe %s: %q", sys, help)
		}
	}
}
