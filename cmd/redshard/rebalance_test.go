package main

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/redshardtest"
)

// miniFleet is a set of miniredis shards started by a test.
type miniFleet struct {
	mini   map[string]*redshardtest.Server
	shards []redshard.Shard
}

func startMiniFleet(t *testing.T, names ...string) *miniFleet {
	t.Helper()
	f := &miniFleet{mini: map[string]*redshardtest.Server{}}
	for _, n := range names {
		m := redshardtest.NewServer(t)
		f.mini[n] = m
		f.shards = append(f.shards, redshard.Shard{Name: n, Addr: m.Addr(), Weight: 1})
	}
	return f
}

// flags returns --shard flags for the named shards.
func (f *miniFleet) flags(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, "--shard", n+"="+f.mini[n].Addr())
	}
	return out
}

// preload writes n keys through a redshard client over the named shards.
func (f *miniFleet) preload(t *testing.T, n int, names ...string) {
	t.Helper()
	var shards []redshard.Shard
	for _, s := range f.shards {
		if slices.Contains(names, s.Name) {
			shards = append(shards, s)
		}
	}
	c, err := redshard.NewClient(&redshard.Options{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for i := range n {
		ttl := time.Duration(0)
		if i%10 == 0 {
			ttl = time.Hour
		}
		if err := c.Set(ctx, fmt.Sprintf("user:%d", i), fmt.Sprintf("value-%d", i), ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// placement returns the keys of every shard.
func (f *miniFleet) placement() map[string][]string {
	out := map[string][]string{}
	for n, m := range f.mini {
		keys := m.Keys()
		slices.Sort(keys)
		out[n] = keys
	}
	return out
}

// checkOwners checks that every key lives only on its owner under the
// ring of the named shards, that there are n keys, and that values and
// TTLs came along.
func (f *miniFleet) checkOwners(t *testing.T, n int, names ...string) {
	t.Helper()
	var shards []redshard.Shard
	for _, s := range f.shards {
		if slices.Contains(names, s.Name) {
			shards = append(shards, s)
		}
	}
	r, err := newRing(shards, placement{})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for name, m := range f.mini {
		for _, k := range m.Keys() {
			total++
			if owner := r.Lookup(k); owner != name {
				t.Errorf("key %s is on %s, its owner is %s", k, name, owner)
				continue
			}
			i, _ := strconv.Atoi(strings.TrimPrefix(k, "user:"))
			if v, _ := m.Get(k); v != fmt.Sprintf("value-%d", i) {
				t.Errorf("key %s = %q", k, v)
			}
			if ttl := m.TTL(k); (i%10 == 0) != (ttl > 0) {
				t.Errorf("key %s has TTL %v", k, ttl)
			}
		}
	}
	if total != n {
		t.Errorf("%d keys on the shards, want %d", total, n)
	}
}

var reportLine = regexp.MustCompile(`(?m)^(scanned|moved|skipped|failed)\s+(\d+)`)

// reportCounts parses the counts of the rebalance report.
func reportCounts(t *testing.T, out string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, m := range reportLine.FindAllStringSubmatch(out, -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(counts) != 4 {
		t.Fatalf("no report in output:\n%s", out)
	}
	return counts
}

func TestRebalanceAdd(t *testing.T) {
	const n = 3000
	f := startMiniFleet(t, "s0", "s1", "s2", "s3")
	f.preload(t, n, "s0", "s1", "s2")
	before := f.placement()

	// Without --yes: the plan, exit 1, nothing moved.
	args := append(append([]string{"rebalance"}, f.flags("s0", "s1", "s2")...), "--add", "s3="+f.mini["s3"].Addr())
	code, out, errOut := runCmd(t, args...)
	if code != exitFail || !strings.Contains(out, "keys that change owner") || !strings.Contains(errOut, "--yes") {
		t.Fatalf("without --yes: exit %d, stdout %q, stderr %q; want the plan, exit 1 and a hint about --yes", code, out, errOut)
	}
	if after := f.placement(); !maps.EqualFunc(before, after, slices.Equal) {
		t.Fatal("rebalance without --yes changed the shards")
	}

	code, out, errOut = runCmd(t, append(args, "--yes")...)
	if code != exitOK {
		t.Fatalf("rebalance --yes: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	f.checkOwners(t, n, "s0", "s1", "s2", "s3")
	c := reportCounts(t, out)
	moved := len(f.mini["s3"].Keys())
	if c["moved"] != moved || c["failed"] != 0 || moved == 0 {
		t.Errorf("report %v, but %d keys are on the new shard", c, moved)
	}
	if !strings.Contains(out, "verification: every key is on its owner") {
		t.Errorf("no verification line in:\n%s", out)
	}
	if !strings.Contains(errOut, "keys") { // the progress bar
		t.Errorf("no progress bar on stderr: %q", errOut)
	}

	// Running it again (resuming) moves nothing more and changes nothing.
	placed := f.placement()
	code, out, _ = runCmd(t, append(args, "--yes", "--no-progress")...)
	if c := reportCounts(t, out); code != exitOK || c["moved"] != 0 || c["failed"] != 0 {
		t.Errorf("second run: exit %d, report %v", code, c)
	}
	if after := f.placement(); !maps.EqualFunc(placed, after, slices.Equal) {
		t.Error("second run changed the shards")
	}
}

func TestRebalanceRemove(t *testing.T) {
	const n = 2000
	f := startMiniFleet(t, "s0", "s1", "s2")
	f.preload(t, n, "s0", "s1", "s2")
	code, out, errOut := runCmd(t, append(append([]string{"rebalance", "--no-progress", "--yes", "--batch", "100"},
		f.flags("s0", "s1", "s2")...), "--remove", "s1")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if keys := f.mini["s1"].Keys(); len(keys) != 0 {
		t.Errorf("%d keys left on the removed shard", len(keys))
	}
	delete(f.mini, "s1")
	f.checkOwners(t, n, "s0", "s2")
}

func TestRebalanceBadConfig(t *testing.T) {
	f := startMiniFleet(t, "s0", "s1")
	f.preload(t, 500, "s0")
	before := f.placement()
	bad := writeFile(t, "fleet.json", fmt.Sprintf(`{"shards": [{"name": "s0", "addr": %q}], "handoff_window": "soon"}`, f.mini["s0"].Addr()))
	code, out, errOut := runCmd(t, "rebalance", "--config", bad, "--add", "s1="+f.mini["s1"].Addr(), "--yes")
	if code != exitFail || out != "" || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "handoff_window") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and an error naming the file and the field", code, out, errOut)
	}
	if after := f.placement(); !maps.EqualFunc(before, after, slices.Equal) {
		t.Error("a failed rebalance changed the shards")
	}
}

func TestRebalanceUnreachableShard(t *testing.T) {
	f := startMiniFleet(t, "s0", "s1")
	f.preload(t, 200, "s0")
	before := f.placement()
	gone := miniredis.RunT(t)
	addr := gone.Addr()
	gone.Close()
	code, _, errOut := runCmd(t, append(append([]string{"rebalance", "--yes"}, f.flags("s0")...), "--add", "s2="+addr)...)
	if code != exitFail || !strings.Contains(errOut, "not reachable") || !strings.Contains(errOut, "nothing moved") {
		t.Errorf("exit %d, stderr %q; want exit 1 and a clear error", code, errOut)
	}
	if after := f.placement(); !maps.EqualFunc(before, after, slices.Equal) {
		t.Error("rebalance to an unreachable shard changed the shards")
	}
}

func TestRebalanceSameListNothingToDo(t *testing.T) {
	f := startMiniFleet(t, "s0", "s1")
	f.preload(t, 200, "s0", "s1")
	cfg := writeFile(t, "fleet.json", fmt.Sprintf(`{"shards": [{"name": "s0", "addr": %q}, {"name": "s1", "addr": %q, "weight": 1}]}`,
		f.mini["s0"].Addr(), f.mini["s1"].Addr()))
	// The same shards in another order, weight 1 spelt out or left out.
	reordered := writeFile(t, "reordered.json", fmt.Sprintf(`{"shards": [{"name": "s1", "addr": %q}, {"name": "s0", "addr": %q, "weight": 1}]}`,
		f.mini["s1"].Addr(), f.mini["s0"].Addr()))
	for _, args := range [][]string{
		{"--config", cfg, "--to-config", cfg, "--yes"},
		{"--config", cfg, "--to-config", reordered, "--yes"},
		{"--config", cfg, "--to-config", cfg}, // without --yes too
		{"--config", cfg, "--weight", "s0=1", "--yes"},
	} {
		// Commands sent to the shards: none (a full scan would be many).
		before := f.mini["s0"].CommandCount() + f.mini["s1"].CommandCount()
		code, out, errOut := runCmd(t, append([]string{"rebalance"}, args...)...)
		after := f.mini["s0"].CommandCount() + f.mini["s1"].CommandCount()
		if code != exitOK || !strings.Contains(out, "nothing to do") || strings.Contains(out, "rebalance report") || after != before {
			t.Errorf("rebalance %q: exit %d, %d commands sent, stdout %q, stderr %q; want exit 0, \"nothing to do\" and no command",
				args, code, after-before, out, errOut)
		}
	}
	// A different address is a change (SetShards must run), and so is a
	// weight.
	moved := miniredis.RunT(t)
	for _, args := range [][]string{
		{"--config", cfg, "--weight", "s0=2"},
		{"--shard", "s0=" + f.mini["s0"].Addr(), "--shard", "s1=" + moved.Addr(), "--to-config", cfg},
	} {
		code, out, _ := runCmd(t, append([]string{"rebalance"}, args...)...)
		if code != exitFail || strings.Contains(out, "nothing to do") {
			t.Errorf("rebalance %q: exit %d, stdout %q; want the plan and a request for --yes", args, code, out)
		}
	}
}

func TestProgressText(t *testing.T) {
	p := redshard.RebalanceProgress{Total: 10000}
	for _, tc := range []struct {
		scanned int64
		elapsed time.Duration
		want    string
	}{
		{0, 0, "moved 0 (0 B), failed 0"},
		{0, time.Second, "moved 0 (0 B), failed 0"},
		{500, 0, "moved 0 (0 B), failed 0"},
		{500, 2 * time.Second, "moved 0 (0 B), failed 0, 250 keys/s, 38s left"},
		{10000, 4 * time.Second, "moved 0 (0 B), failed 0, 2500 keys/s"},
		{3, time.Hour, "moved 0 (0 B), failed 0, 0.00083 keys/s, 3332h20m0s left"},
		{5, 2 * time.Second, "moved 0 (0 B), failed 0, 2.5 keys/s, 1h6m38s left"},
	} {
		p.Scanned = tc.scanned
		if got := progressText(p, p.Total, tc.elapsed); got != tc.want {
			t.Errorf("progressText(scanned %d, %v) = %q, want %q", tc.scanned, tc.elapsed, got, tc.want)
		}
	}
}

func TestProgressBarFirstFrame(t *testing.T) {
	var buf strings.Builder
	at := time.Unix(0, 0)
	b := &progressBar{w: &buf, now: func() time.Time { return at }, start: at}
	b.update(redshard.RebalanceProgress{Total: 1000})
	at = at.Add(2 * time.Second)
	b.update(redshard.RebalanceProgress{Total: 1000, Scanned: 1000, Moved: 10, Bytes: 2048})
	b.finish(true)
	out := buf.String()
	for _, bad := range []string{"/hr", "/min", "keys/hr"} {
		if strings.Contains(out, bad) {
			t.Errorf("progress bar shows %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "500 keys/s") || !strings.Contains(out, "moved 10 (2.0 KiB)") {
		t.Errorf("progress bar without rate or moved keys:\n%q", out)
	}
}
