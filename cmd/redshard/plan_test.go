package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/ring"
)

var fleetFlags = []string{
	"--shard", "cache-a=10.0.0.1:6379",
	"--shard", "cache-b=10.0.0.2:6379:2",
	"--shard", "cache-c=10.0.0.3:6379",
}

const fleetConfig = `{"shards": [
  {"name": "cache-a", "addr": "10.0.0.1:6379", "weight": 1},
  {"name": "cache-b", "addr": "10.0.0.2:6379", "weight": 2},
  {"name": "cache-c", "addr": "10.0.0.3:6379"}
]}`

func TestShares(t *testing.T) {
	code, out, errOut := runCmd(t, append([]string{"shares"}, fleetFlags...)...)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	golden(t, "shares.golden", out)

	// The same fleet from a configuration file prints the same table.
	cfg := writeFile(t, "fleet.json", fleetConfig)
	code, fromFile, errOut := runCmd(t, "shares", "--config", cfg)
	if code != exitOK || fromFile != out {
		t.Errorf("shares --config: exit %d, stderr %q, output\n%s\nwant\n%s", code, errOut, fromFile, out)
	}

	code, out, _ = runCmd(t, append([]string{"shares", "--vnodes", "16"}, fleetFlags...)...)
	if code != exitOK {
		t.Fatalf("--vnodes 16: exit %d", code)
	}
	golden(t, "shares-vnodes16.golden", out)
}

func TestSharesBadConfig(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"shards": [{"name": "a", "addr": "h:1",}]}`, "malformed JSON at line 1"},
		{`{"shards": [{"name": "a", "addr": "h:1"}], "vnodes": 5}`, `unknown field "vnodes"`},
		{`{"shards": []}`, "no shards"},
	} {
		path := writeFile(t, "bad.json", tc.body)
		code, out, errOut := runCmd(t, "shares", "--config", path)
		if code != exitFail || out != "" || !strings.Contains(errOut, path) || !strings.Contains(errOut, tc.want) {
			t.Errorf("shares --config %s: exit %d, stdout %q, stderr %q; want exit 1 and an error naming the file with %q",
				tc.body, code, out, errOut, tc.want)
		}
	}
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"plan-add.golden", []string{"--add", "cache-d=10.0.0.4:6379"}},
		{"plan-remove.golden", []string{"--remove", "cache-a"}},
		{"plan-mixed.golden", []string{"--weight", "cache-a=2", "--add", "cache-d=10.0.0.4:6379:2", "--remove", "cache-c"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			code, out, errOut := runCmd(t, append(append([]string{"plan"}, fleetFlags...), tc.args...)...)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, tc.golden, out)
		})
	}

	// --to-config gives the same plan as the equivalent flags.
	to := writeFile(t, "to.json", strings.Replace(fleetConfig, `{"name": "cache-c", "addr": "10.0.0.3:6379"}`,
		`{"name": "cache-c", "addr": "10.0.0.3:6379"}, {"name": "cache-d", "addr": "10.0.0.4:6379"}`, 1))
	_, viaFile, errOut := runCmd(t, append(append([]string{"plan"}, fleetFlags...), "--to-config", to)...)
	_, viaFlags, _ := runCmd(t, append(append([]string{"plan"}, fleetFlags...), "--add", "cache-d=10.0.0.4:6379")...)
	if viaFile != viaFlags {
		t.Errorf("--to-config output (stderr %q):\n%s\ndiffers from --add:\n%s", errOut, viaFile, viaFlags)
	}
}

// TestPlanMovesMatchKeys checks the plan's fractions against real keys.
func TestPlanMovesMatchKeys(t *testing.T) {
	from := []redshard.Shard{{Name: "a", Addr: "h:1", Weight: 1}, {Name: "b", Addr: "h:2", Weight: 2}, {Name: "c", Addr: "h:3", Weight: 1}}
	to := []redshard.Shard{{Name: "a", Addr: "h:1", Weight: 1}, {Name: "b", Addr: "h:2", Weight: 2}, {Name: "c", Addr: "h:3", Weight: 1}, {Name: "d", Addr: "h:4", Weight: 1}}
	p, err := makePlan(from, to, 0)
	if err != nil {
		t.Fatal(err)
	}
	oldRing, _ := newRing(from, 0)
	newRing, _ := newRing(to, 0)
	const n = 200000
	moved, modN := 0, 0
	for i := range n {
		k := fmt.Sprintf("key:%d", i)
		if oldRing.Lookup(k) != newRing.Lookup(k) {
			moved++
		}
		h := xxhash.Sum64String(k)
		if from[h%uint64(len(from))].Name != to[h%uint64(len(to))].Name {
			modN++
		}
	}
	// Binomial standard error at n = 200k is about 0.1%; allow 5 of them.
	for _, c := range []struct {
		what        string
		plan, count float64
	}{{"ring", p.moved, float64(moved) / n}, {"mod N", p.modN, float64(modN) / n}} {
		if d := c.plan - c.count; d > 0.005 || d < -0.005 {
			t.Errorf("%s: plan says %.4f move, %d sampled keys say %.4f", c.what, c.plan, n, c.count)
		}
	}
	if d := p.minimum - 0.2; d > 1e-12 || d < -1e-12 {
		t.Errorf("minimum = %v, want 0.2 (weight 1 of 5)", p.minimum)
	}
}

func TestPlanToConfigVnodes(t *testing.T) {
	cur := writeFile(t, "cur.json", strings.Replace(fleetConfig, `]}`, `], "vnodes_per_weight": 16}`, 1))
	same := writeFile(t, "same.json", fleetConfig)
	explicit := writeFile(t, "explicit.json", strings.Replace(fleetConfig, `]}`, fmt.Sprintf(`], "vnodes_per_weight": %d}`, ring.DefaultVnodesPerWeight), 1))

	// The file without vnodes_per_weight uses the default, 8192: say so,
	// not "0".
	code, _, errOut := runCmd(t, "plan", "--config", cur, "--to-config", same)
	want := fmt.Sprintf("vnodes_per_weight %d (the default) differs from the current 16", ring.DefaultVnodesPerWeight)
	if code != exitFail || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
	// The default spelt out is the same ring as the default left out.
	if code, _, errOut := runCmd(t, "plan", "--config", same, "--to-config", explicit); code != exitOK {
		t.Errorf("explicit default: exit %d, stderr %q; want the plan", code, errOut)
	}
}
