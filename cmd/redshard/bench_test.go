package main

import (
	"bytes"
	"compress/gzip"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redshard/redshard/internal/redistest"
)

var checkLine = regexp.MustCompile(`(?m)^check (\S+): ops (\d+) = shard commands (\d+) \+ served locally (\d+) \+ refused (\d+) - extra (\d+): (\w+)$`)

// accounting is one parsed check line of bench.
type accounting struct {
	system                               string
	ops, commands, local, refused, extra int64
	verdict                              string
}

func parseChecks(t *testing.T, out string) []accounting {
	t.Helper()
	var acc []accounting
	for _, m := range checkLine.FindAllStringSubmatch(out, -1) {
		n := func(i int) int64 {
			v, err := strconv.ParseInt(m[i], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		acc = append(acc, accounting{m[1], n(2), n(3), n(4), n(5), n(6), m[7]})
	}
	if len(acc) == 0 {
		t.Fatalf("no check line in:\n%s", out)
	}
	return acc
}

// shardCommands sums the commands column of the single-run per-shard
// table.
func shardCommands(t *testing.T, out string) int64 {
	t.Helper()
	_, table, ok := strings.Cut(out, "commands handed to each shard's client:\n")
	if !ok {
		t.Fatalf("no per-shard table in:\n%s", out)
	}
	var sum int64
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 6 || !strings.HasPrefix(f[0], "shard-") {
			break
		}
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			t.Fatalf("bad row %q", line)
		}
		sum += n
	}
	return sum
}

func benchArgs(extra ...string) []string {
	return append([]string{"bench", "--duration", "300ms", "--concurrency", "4", "--keys", "2000"}, extra...)
}

func TestBenchCountsAddUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"uniform", nil},
		{"zipf weighted", []string{"--workload", "zipf", "--weights", "1,1,2"}},
		{"celebrity local-cache", []string{"--workload", "celebrity", "--mitigation", "local-cache"}},
		{"celebrity split", []string{"--workload", "celebrity", "--mitigation", "split", "--shards", "4"}},
		{"celebrity MGET local-cache", []string{"--workload", "celebrity", "--mget", "8", "--mitigation", "local-cache", "--shards", "4"}},
		{"add shard", []string{"--add-shard-at", "100ms"}},
		{"kill shard", []string{"--kill-shard-at", "100ms", "--read-ratio", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, benchArgs(tc.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			acc := parseChecks(t, out)[0]
			if acc.ops == 0 || acc.verdict != "ok" || acc.ops != acc.commands+acc.local+acc.refused-acc.extra {
				t.Errorf("accounting does not add up: %+v\n%s", acc, out)
			}
			if sum := shardCommands(t, out); sum != acc.commands {
				t.Errorf("per-shard commands add up to %d, check line says %d", sum, acc.commands)
			}
			if tc.args == nil || tc.name == "zipf weighted" {
				// No mitigation, no membership change: one command per op.
				if acc.local != 0 || acc.refused != 0 || acc.extra != 0 || acc.ops != acc.commands {
					t.Errorf("plain run: want ops = shard commands exactly, got %+v", acc)
				}
			}
			for _, want := range []string{"latency p50", "latency p99", "latency p999", "hit rate", "busiest/mean"} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in output", want)
				}
			}
			switch tc.name {
			case "add shard":
				if !strings.Contains(out, "added shard-3") || !strings.Contains(out, "shard-3 ") {
					t.Errorf("no add event or new shard row in:\n%s", out)
				}
			case "kill shard":
				if !strings.Contains(out, "killed shard-0") {
					t.Errorf("no kill event in:\n%s", out)
				}
			}
		})
	}
}

func TestBenchCompare(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "run")
	code, out, errOut := runCmd(t, benchArgs("--compare", "goredis-ring", "--workload", "zipf", "--png", base+".png")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	acc := parseChecks(t, out)
	if len(acc) != 2 || acc[0].system != "redshard" || acc[1].system != "goredis-ring" {
		t.Fatalf("want a check line per system, got %+v", acc)
	}
	for _, a := range acc {
		if a.verdict != "ok" || a.ops == 0 || a.ops != a.commands+a.local+a.refused-a.extra {
			t.Errorf("%s: accounting does not add up: %+v", a.system, a)
		}
	}
	if !regexp.MustCompile(`shard\s+weight\s+redshard\s+share\s+goredis-ring\s+share`).MatchString(out) {
		t.Errorf("no side-by-side shard table in:\n%s", out)
	}
	for _, name := range []string{base + "-load.png", base + "-latency.png", base + "-throughput.png"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		st, _ := os.Stat(name)
		if err != nil || cfg.Width == 0 || st.Size() > 100<<10 {
			t.Errorf("%s: %v, %dx%d, %d bytes", name, err, cfg.Width, cfg.Height, st.Size())
		}
	}
}

// TestBenchRounds: --rounds repeats the runs and reports, for each system
// against each compared one, the ratio of every round and their median,
// which is the middle round's ratio; the tables show the last round.
func TestBenchRounds(t *testing.T) {
	code, out, errOut := runCmd(t, benchArgs("--compare", "goredis-ring", "--rounds", "3")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if n := strings.Count(errOut, "running redshard for"); n != 3 {
		t.Errorf("redshard ran %d times; want 3:\n%s", n, errOut)
	}
	if !strings.Contains(out, "round 3 of 3 (the rounds' ratios and medians follow)") {
		t.Errorf("the tables do not say they are the last round's:\n%s", out)
	}
	for _, metric := range []string{"ops/s", "CPU per op"} {
		row := regexp.MustCompile(`(?m)^redshard\s+` + regexp.QuoteMeta(metric) + ` vs goredis-ring((?:\s+\S+){4})$`).FindStringSubmatch(out)
		if row == nil {
			t.Errorf("no %s row with 3 rounds and a median in:\n%s", metric, out)
			continue
		}
		var vals []float64
		for _, c := range strings.Fields(row[1]) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(c, "x"), 64)
			if err != nil || !strings.HasSuffix(c, "x") || v <= 0 {
				t.Fatalf("%s: cell %q is no ratio", metric, c)
			}
			vals = append(vals, v)
		}
		rounds := slices.Clone(vals[:3])
		slices.Sort(rounds)
		if vals[3] != rounds[1] {
			t.Errorf("%s: median %.2f of rounds %v; want %.2f", metric, vals[3], vals[:3], rounds[1])
		}
	}
	if code, _, errOut := runCmd(t, benchArgs("--rounds", "2")...); code == exitOK || !strings.Contains(errOut, "give --compare") {
		t.Errorf("--rounds without --compare: exit %d, %s; want a usage error", code, errOut)
	}
}

// TestBenchProfiles: --cpuprofile and --memprofile write profiles, and
// the CPU profile's samples carry each run's system label, so that one
// system's time can be told from another's.
func TestBenchProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	code, out, errOut := runCmd(t, benchArgs("--compare", "goredis-ring", "--cpuprofile", cpu, "--memprofile", mem)...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, f := range []string{cpu, mem} {
		raw := readGzip(t, f)
		if len(raw) == 0 {
			t.Errorf("%s: empty profile", f)
		}
		if f == cpu {
			// The profile's string table holds the labels' keys and values,
			// each an entry of its own (function names that contain them,
			// runtime.systemstack or github.com/redshard/redshard/..., are
			// other entries).
			for _, want := range []string{"system", "redshard", "goredis-ring"} {
				if !hasProfileString(raw, want) {
					t.Errorf("the CPU profile's string table has no %q", want)
				}
			}
		}
	}
	if code, _, _ := runCmd(t, benchArgs("--memprofile", filepath.Join(dir, "no", "such", "dir"))...); code == exitOK {
		t.Error("--memprofile in a missing directory: exit 0; want a failure before the runs")
	}
}

// hasProfileString reports whether raw, a decompressed pprof profile,
// has s (shorter than 128 bytes) as an entry of its string table: field 6
// of the Profile message, length-delimited (tag 6<<3|2), s's length, s.
func hasProfileString(raw []byte, s string) bool {
	return bytes.Contains(raw, append([]byte{6<<3 | 2, byte(len(s))}, s...))
}

// readGzip returns the decompressed content of the gzip file f (a pprof
// profile).
func readGzip(t *testing.T, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return raw
}

// TestBenchCompareAutoPipeline: --compare with a list runs every system in
// one invocation; goredis-autopipeline sends everything to the first shard
// alone, and each run's ops/s and CPU per op are printed as ratios to each
// compared system's.
func TestBenchCompareAutoPipeline(t *testing.T) {
	code, out, errOut := runCmd(t, benchArgs("--shards", "4", "--autopipeline", "--compare", "goredis-ring,goredis-autopipeline")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	acc := parseChecks(t, out)
	var systems []string
	for _, a := range acc {
		systems = append(systems, a.system)
	}
	if want := []string{"redshard", "redshard-autopipeline", "goredis-ring", "goredis-autopipeline"}; !slices.Equal(systems, want) {
		t.Fatalf("systems run: %q, want %q", systems, want)
	}
	ap := acc[3]
	if ap.verdict != "ok" || ap.ops == 0 || ap.local != 0 || ap.refused != 0 {
		t.Errorf("goredis-autopipeline: accounting %+v", ap)
	}
	// The side-by-side table: goredis-autopipeline's column pair is the last.
	_, table, ok := strings.Cut(out, "(share of the run's commands):\n")
	if !ok {
		t.Fatalf("no per-shard table in:\n%s", out)
	}
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 10 || !strings.HasPrefix(f[0], "shard-") {
			break
		}
		n, want := f[8], "0"
		if f[0] == "shard-0" {
			want = strconv.FormatInt(ap.commands, 10)
		}
		if n != want {
			t.Errorf("goredis-autopipeline sent %s commands to %s, want %s (the first shard alone)", n, f[0], want)
		}
	}
	if !strings.Contains(out, "one plain redis.Client to shard-0 (") {
		t.Errorf("no description of the one-server run in:\n%s", out)
	}
	for _, ref := range []string{"goredis-ring", "goredis-autopipeline"} {
		for _, metric := range []string{"ops/s vs ", "CPU per op vs "} {
			row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric+ref) + `((?:\s+\S+){4})$`).FindStringSubmatch(out)
			if row == nil {
				t.Errorf("no %q row with a cell per run in:\n%s", metric+ref, out)
				continue
			}
			cells := strings.Fields(row[1])
			self := map[string]int{"goredis-ring": 2, "goredis-autopipeline": 3}[ref]
			for i, c := range cells {
				if !regexp.MustCompile(`^\d+\.\d\dx$`).MatchString(c) || i == self && c != "1.00x" {
					t.Errorf("%s%s: cell %d is %q", metric, ref, i, c)
				}
			}
		}
	}
}

// TestBenchCompareAutoPipelineRealShards: on real shards, the one-server run
// uses the first shard given, and the workload's keys are deleted from every
// shard at the end, other keys kept.
func TestBenchCompareAutoPipelineRealShards(t *testing.T) {
	f := startMiniFleet(t, "a", "b")
	if err := f.mini["a"].Set("other:key", "kept"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, append(benchArgs("--prefix", "t:", "--compare", "goredis-autopipeline", "--compare-first"), f.flags("b", "a")...)...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	acc := parseChecks(t, out)
	if len(acc) != 2 || acc[0].system != "goredis-autopipeline" || acc[1].system != "redshard" {
		t.Fatalf("want goredis-autopipeline first, then redshard: %+v", acc)
	}
	if !strings.Contains(out, "one plain redis.Client to b ("+f.mini["b"].Addr()+")") {
		t.Errorf("the one-server run is not on the first shard given (b):\n%s", out)
	}
	for n, m := range f.mini {
		for _, k := range m.Keys() {
			if k != "other:key" {
				t.Errorf("shard %s kept bench key %q after the run", n, k)
			}
		}
	}
	if v, _ := f.mini["a"].Get("other:key"); v != "kept" {
		t.Errorf("a key outside --prefix was touched: %q", v)
	}
}

func TestBenchRealShards(t *testing.T) {
	// "Real" shards given by address: the test's own miniredis servers.
	f := startMiniFleet(t, "a", "b", "c")
	if err := f.mini["a"].Set("other:key", "kept"); err != nil {
		t.Fatal(err)
	}
	// redshard's record of someone else's change (a settled set): kept,
	// while the one of the run's own change goes.
	f.mini["c"].HSet("redshard:settled:theirs", "other:key", "1")
	code, out, errOut := runCmd(t, append(benchArgs("--prefix", "t:", "--add-shard-at", "100ms", "--add-shard", "c="+f.mini["c"].Addr(),
		"--compare", "goredis-ring"), f.flags("a", "b")...)...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, acc := range parseChecks(t, out) {
		if acc.verdict != "ok" || acc.ops != acc.commands+acc.local+acc.refused-acc.extra {
			t.Errorf("accounting: %+v", acc)
		}
	}
	if !strings.Contains(out, "2 real shards") || strings.Count(out, "added c (") != 2 {
		t.Errorf("no shard description or add events in:\n%s", out)
	}
	for n, m := range f.mini {
		for _, k := range m.Keys() {
			if k != "other:key" && k != "redshard:settled:theirs" {
				t.Errorf("shard %s kept bench key %q after the run", n, k)
			}
		}
	}
	if v, _ := f.mini["a"].Get("other:key"); v != "kept" {
		t.Errorf("a key outside --prefix was touched: %q", v)
	}
	if !f.mini["c"].Exists("redshard:settled:theirs") {
		t.Error("another change's settled set was deleted")
	}
}

func TestHotkeys(t *testing.T) {
	code, out, errOut := runCmd(t, "hotkeys", "--workload", "celebrity", "--celebrity-share", "0.5",
		"--duration", "400ms", "--interval", "200ms", "--concurrency", "4", "--keys", "1000", "--top", "3", "--window", "1s")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	_, final, ok := strings.Cut(out, "[final, ")
	if !ok {
		t.Fatalf("no final table in:\n%s", out)
	}
	lines := strings.Split(final, "\n")
	if len(lines) < 3 {
		t.Fatalf("final table too short:\n%s", final)
	}
	if f := strings.Fields(lines[2]); len(f) < 6 || f[0] != "1" || f[1] != "bench:celebrity" {
		t.Errorf("first row of the final table is %q, want the celebrity key first\n%s", lines[2], out)
	}
}

func TestBenchRealShardsCleanup(t *testing.T) {
	// A split run leaves copies of the hot key on other shards; cleanup
	// removes them with the workload's keys, and only them: not other
	// keys under the prefix, nor keys that match it as a glob.
	f := startMiniFleet(t, "a", "b", "c")
	for _, k := range []string{"t[1]x:key:1", "t1:key:1", "t[1]:mine", "redshard:copy:abc:other"} {
		if err := f.mini["a"].Set(k, "kept"); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCmd(t, append(benchArgs("--prefix", "t[1]:", "--workload", "celebrity", "--celebrity-share", "0.6",
		"--mitigation", "split"), f.flags("a", "b", "c")...)...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var left []string
	for _, m := range f.mini {
		left = append(left, m.Keys()...)
	}
	slices.Sort(left)
	if want := []string{"redshard:copy:abc:other", "t1:key:1", "t[1]:mine", "t[1]x:key:1"}; !slices.Equal(left, want) {
		t.Errorf("keys left after the run: %q, want only %q", left, want)
	}
}

func TestBenchBadPNGPathFailsFirst(t *testing.T) {
	// A --png path that cannot be created fails before the run: the
	// duration is long enough that running first would time the test out.
	bad := filepath.Join(t.TempDir(), "no-such-dir", "run.png")
	code, out, errOut := runCmd(t, "bench", "--duration", "1h", "--png", bad)
	if code != exitFail || !strings.Contains(errOut, "--png") || !strings.Contains(errOut, "no-such-dir") ||
		strings.Contains(errOut, "running") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming the file before any run", code, out, errOut)
	}
}

func TestBenchKillShardQuiet(t *testing.T) {
	// Failed dials to the killed shard are go-redis log lines: without
	// --verbose they are at most one summary line on stderr.
	code, out, errOut := runCmd(t, benchArgs("--kill-shard-at", "100ms", "--read-ratio", "1")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if !strings.HasPrefix(l, "bench: running") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 1 || (len(lines) == 1 && !strings.Contains(lines[0], "--verbose shows every line")) {
		t.Errorf("stderr beyond the progress lines: %q", lines)
	}
}

func TestRealShardsRefuseExistingKeys(t *testing.T) {
	// A workload key already on a server is someone's data: bench and
	// hotkeys refuse to overwrite (and then delete) it.
	for _, cmd := range []string{"bench", "hotkeys"} {
		t.Run(cmd, func(t *testing.T) {
			f := startMiniFleet(t, "a", "b")
			if err := f.mini["b"].Set("t:key:7", "theirs"); err != nil {
				t.Fatal(err)
			}
			args := append([]string{cmd, "--prefix", "t:", "--keys", "100", "--duration", "200ms"}, f.flags("a", "b")...)
			if cmd == "hotkeys" {
				args = append(args, "--interval", "100ms")
			}
			code, out, errOut := runCmd(t, args...)
			if code != exitFail || !strings.Contains(errOut, "already holds") || !strings.Contains(errOut, `"t:key:7"`) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming the key", code, out, errOut)
			}
			if v, _ := f.mini["b"].Get("t:key:7"); v != "theirs" || len(f.mini["a"].Keys())+len(f.mini["b"].Keys()) != 1 {
				t.Errorf("the servers changed: t:key:7 = %q, keys %q %q", v, f.mini["a"].Keys(), f.mini["b"].Keys())
			}
		})
	}
}

func TestHotkeysRealShardsCleanup(t *testing.T) {
	f := startMiniFleet(t, "a", "b", "c")
	if err := f.mini["a"].Set("t:mine", "kept"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, append([]string{"hotkeys", "--prefix", "t:", "--keys", "500", "--duration", "300ms",
		"--interval", "100ms", "--concurrency", "4", "--workload", "celebrity", "--celebrity-share", "0.6", "--mitigation", "split"},
		f.flags("a", "b", "c")...)...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var left []string
	for _, m := range f.mini {
		left = append(left, m.Keys()...)
	}
	if !slices.Equal(left, []string{"t:mine"}) {
		t.Errorf("keys left after the run: %q, want only t:mine", left)
	}
}

// TestBenchComparePerShardAutoPipeline: the hand-sharded AutoPipeline run
// places every key where redshard does, so its per-shard command counts
// follow the ring's shares and its accounting adds up.
func TestBenchComparePerShardAutoPipeline(t *testing.T) {
	code, out, errOut := runCmd(t, benchArgs("--shards", "4", "--compare", "goredis-autopipeline-per-shard")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	acc := parseChecks(t, out)
	if len(acc) != 2 || acc[1].system != "goredis-autopipeline-per-shard" {
		t.Fatalf("want redshard and goredis-autopipeline-per-shard, got %+v", acc)
	}
	if a := acc[1]; a.verdict != "ok" || a.ops == 0 || a.ops != a.commands {
		t.Errorf("goredis-autopipeline-per-shard: accounting %+v", a)
	}
	_, table, ok := strings.Cut(out, "(share of the run's commands):\n")
	if !ok {
		t.Fatalf("no per-shard table in:\n%s", out)
	}
	shards := 0
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 6 || !strings.HasPrefix(f[0], "shard-") {
			break
		}
		shards++
		if f[4] == "0" {
			t.Errorf("goredis-autopipeline-per-shard sent nothing to %s:\n%s", f[0], out)
		}
	}
	if shards != 4 {
		t.Errorf("per-shard table has %d shards:\n%s", shards, out)
	}
	for _, args := range [][]string{{"--mget", "4"}, {"--add-shard-at", "100ms"}} {
		code, _, errOut := runCmd(t, benchArgs(append(args, "--compare", "goredis-autopipeline-per-shard")...)...)
		if code != exitUsage || !strings.Contains(errOut, "goredis-autopipeline-per-shard") {
			t.Errorf("%v with goredis-autopipeline-per-shard: exit %d, %s", args, code, errOut)
		}
	}
}

// TestBenchFullDuplex: --fullduplex runs the auto-pipelined redshard with
// go-redis's full-duplex AutoPipeliner per shard, with its accounting
// intact, and is refused without --autopipeline.
func TestBenchFullDuplex(t *testing.T) {
	code, out, errOut := runCmd(t, benchArgs("--shards", "2", "--autopipeline", "--fullduplex")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	acc := parseChecks(t, out)
	if len(acc) != 2 || acc[1].system != "redshard-autopipeline" || acc[1].verdict != "ok" || acc[1].ops == 0 {
		t.Fatalf("want redshard and an ok redshard-autopipeline, got %+v", acc)
	}
	code, _, errOut = runCmd(t, benchArgs("--shards", "2", "--fullduplex")...)
	if code != exitUsage || !strings.Contains(errOut, "--fullduplex needs --autopipeline") {
		t.Fatalf("--fullduplex alone: exit %d, %s", code, errOut)
	}
}

// TestBenchCompareRueidisPerShard: the hand-sharded rueidis run places
// every key where redshard does, counts each command on its shard, and is
// refused where it cannot shard (MGET, a shard added in the run).
func TestBenchCompareRueidisPerShard(t *testing.T) {
	code, out, errOut := runCmd(t, benchArgs("--shards", "2", "--compare", "rueidis-per-shard")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	acc := parseChecks(t, out)
	if len(acc) != 2 || acc[1].system != "rueidis-per-shard" {
		t.Fatalf("want redshard and rueidis-per-shard, got %+v", acc)
	}
	if a := acc[1]; a.verdict != "ok" || a.ops == 0 || a.ops != a.commands {
		t.Errorf("rueidis-per-shard: accounting %+v", a)
	}
	for _, args := range [][]string{{"--mget", "4"}, {"--add-shard-at", "100ms"}} {
		code, _, errOut := runCmd(t, benchArgs(append(args, "--compare", "rueidis-per-shard")...)...)
		if code != exitUsage || !strings.Contains(errOut, "rueidis-per-shard") {
			t.Errorf("%v with rueidis-per-shard: exit %d, %s", args, code, errOut)
		}
	}
}

// TestBenchCompareClientSideCaches: on real servers, rueidis's and
// go-redis's client-side caches per shard run in the same invocation as
// redshard's LocalCache, and every run with a cache reports the share of
// its GETs the cache answered, with the counts it comes from: for the two
// peers, exactly the operations the accounting line says were served
// locally.
func TestBenchCompareClientSideCaches(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	code, out, errOut := runCmd(t, "bench", "--duration", "1s", "--concurrency", "4", "--keys", "2000", "--prefix", "t:",
		"--workload", "zipf", "--zipf-s", "1.2", "--mitigation", "local-cache",
		"--compare", "rueidis-csc-per-shard,goredis-csc-per-shard", "--shard", "a="+a.Addr(), "--shard", "b="+b.Addr())
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	acc := parseChecks(t, out)
	var systems []string
	for _, a := range acc {
		systems = append(systems, a.system)
		if a.verdict != "ok" || a.ops == 0 {
			t.Errorf("%s: accounting %+v", a.system, a)
		}
	}
	if want := []string{"redshard", "rueidis-csc-per-shard", "goredis-csc-per-shard"}; !slices.Equal(systems, want) {
		t.Fatalf("systems run: %q, want %q", systems, want)
	}
	row := regexp.MustCompile(`(?m)^GETs served locally\s.*$`).FindString(out)
	reads := regexp.MustCompile(`(?m)^reads\s.*$`).FindString(out)
	shares := regexp.MustCompile(`(\d+\.\d{3}) \((\d+)/(\d+)\)`).FindAllStringSubmatch(row, -1)
	if len(shares) != 3 || reads == "" {
		t.Fatalf("want a share per system in %q (reads %q):\n%s", row, reads, out)
	}
	readCells := strings.Fields(reads)[1:]
	for i, m := range shares {
		share, _ := strconv.ParseFloat(m[1], 64)
		hits, _ := strconv.ParseInt(m[2], 10, 64)
		keys, _ := strconv.ParseInt(m[3], 10, 64)
		if share < 0 || share > 1 || strconv.FormatInt(keys, 10) != readCells[i] {
			t.Errorf("%s: share %s (%d/%d), reads %s", systems[i], m[1], hits, keys, readCells[i])
		}
		if i > 0 {
			// The peers' caches answered the repeated reads of the
			// Zipf head, and each such read reached no shard.
			if hits == 0 || hits != acc[i].local {
				t.Errorf("%s: %d cache hits, %d operations served locally", systems[i], hits, acc[i].local)
			}
		}
	}
	// The servers ran at least the commands the shard clients were handed
	// (a rueidis miss is five: CLIENT CACHING YES, MULTI, PTTL, GET, EXEC).
	row = regexp.MustCompile(`(?m)^server commands per op\s.*$`).FindString(out)
	cmds := regexp.MustCompile(`(\d+\.\d\d) \((\d+)\)`).FindAllStringSubmatch(row, -1)
	if len(cmds) != 3 {
		t.Fatalf("want server commands per op of each system in %q", row)
	}
	for i, m := range cmds {
		if n, _ := strconv.ParseInt(m[2], 10, 64); n < acc[i].commands || n == 0 {
			t.Errorf("%s: the servers ran %d commands, the shard clients were handed %d", systems[i], n, acc[i].commands)
		}
	}
	for _, s := range []*redistest.Server{a, b} {
		if n := s.Client(t).DBSize(t.Context()).Val(); n != 0 {
			t.Errorf("%s holds %d keys after the run", s.Addr(), n)
		}
	}
}
