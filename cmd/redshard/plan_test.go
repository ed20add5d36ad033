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
	p, err := makePlan(from, to, placement{}, placement{})
	if err != nil {
		t.Fatal(err)
	}
	oldRing, _ := newRing(from, placement{})
	newRing, _ := newRing(to, placement{})
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
	grown := writeFile(t, "grown.json", strings.Replace(fleetConfig, `]}`, `, {"name": "cache-d", "addr": "10.0.0.4:6379"}]}`, 1))

	// A new vnodes_per_weight with the same shards is a change of
	// placement: planned, and the file without it uses the default, 8192:
	// say so, not "0".
	code, out, errOut := runCmd(t, "plan", "--config", cur, "--to-config", same)
	want := fmt.Sprintf("ring:    16 points per unit of weight, to %d points per unit of weight: a new placement", ring.DefaultVnodesPerWeight)
	if code != exitOK || !strings.Contains(out, want) {
		t.Errorf("exit %d, stderr %q, output:\n%s\nwant the plan with %q", code, errOut, out, want)
	}
	// With other shards as well it is refused: two changes in one.
	code, _, errOut = runCmd(t, "plan", "--config", cur, "--to-config", grown)
	if want := "the placement changes (16 points per unit of weight, to 8192"; code != exitFail || !strings.Contains(errOut, want) {
		t.Errorf("new placement and new shards: exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
	// The default spelt out is the same ring as the default left out.
	code, out, errOut = runCmd(t, "plan", "--config", same, "--to-config", explicit)
	if code != exitOK || !strings.Contains(out, "ring:    8192 points per unit of weight\n") {
		t.Errorf("explicit default: exit %d, stderr %q, output:\n%s\nwant the plan of an unchanged placement", code, errOut, out)
	}
}

func TestPlanToConfigRecipe(t *testing.T) {
	cur := writeFile(t, "cur.json", fleetConfig)
	next := writeFile(t, "next.json", strings.Replace(fleetConfig, `]}`, `], "ring_recipe": 2}`, 1))
	code, out, errOut := runCmd(t, "plan", "--config", cur, "--to-config", next)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := fmt.Sprintf("ring:    %d points per unit of weight, to %d points per unit of weight, placement Recipe2: a new placement",
		ring.DefaultVnodesPerWeight, ring.DefaultVnodesPerWeight2)
	if !strings.Contains(out, want) {
		t.Errorf("output:\n%s\nwant %q", out, want)
	}
	// The moved fraction is ring.Diff's between the two recipes.
	nodes := []ring.Node{{Name: "cache-a", Weight: 1}, {Name: "cache-b", Weight: 2}, {Name: "cache-c", Weight: 1}}
	r1, _ := ring.New(nodes, nil)
	r2, _ := ring.New(nodes, &ring.Config{Recipe: ring.Recipe2})
	moved := 0.0
	for _, m := range ring.Diff(r1, r2) {
		moved += m.Fraction
	}
	if moved < 0.5 {
		t.Fatalf("Recipe1 to Recipe2 moves %v of the keys; expected most", moved)
	}
	if strings.Contains(out, "hash mod N") {
		t.Errorf("output:\n%s\nhash mod N has no placement to change: no line for it", out)
	}
	if w := pct(moved); !strings.Contains(out, w) {
		t.Errorf("output:\n%s\nwant the moved fraction %s", out, w)
	}
	// rebalance cannot switch a client's placement: it says what can.
	code, _, errOut = runCmd(t, "rebalance", "--config", cur, "--to-config", next)
	if code != exitFail || !strings.Contains(errOut, "redshard apply") {
		t.Errorf("rebalance to a new recipe: exit %d, stderr %q; want exit 1 pointing to redshard apply", code, errOut)
	}
	// The registry document names Recipe2, and only Recipe2.
	for _, tc := range []struct {
		recipe int
		want   string
	}{{0, ""}, {ring.Recipe1, ""}, {ring.Recipe2, `"ring_recipe":2`}} {
		doc, err := encodeRingDoc(&redshard.Options{Shards: []redshard.Shard{{Name: "a", Addr: "h:1"}}, RingRecipe: tc.recipe})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(doc), "ring_recipe"); got != (tc.want != "") || !strings.Contains(string(doc), tc.want) {
			t.Errorf("recipe %d: document %s", tc.recipe, doc)
		}
		_, p, err := decodeRingDoc(doc)
		if err != nil || p.effective().recipe != max(tc.recipe, ring.Recipe1) {
			t.Errorf("recipe %d: decoded %+v, %v", tc.recipe, p, err)
		}
	}
}

// TestPlanNeedsNoPassword: plan and shares contact no server, so a file
// whose password_env and sentinel_password_env name unset variables (and
// holds a Sentinel shard) is planned as it is; they used to fail until
// REDIS_PASSWORD and SENTINEL_PASSWORD were set. rebalance, which
// connects, still needs them.
func TestPlanNeedsNoPassword(t *testing.T) {
	const secrets = `"password_env": "REDSHARD_TEST_UNSET_PASSWORD", "sentinel_password_env": "REDSHARD_TEST_UNSET_SENTINEL_PASSWORD"`
	cur := writeFile(t, "cur.json", `{"shards": [
  {"name": "cache-a", "addr": "10.0.0.1:6379"},
  {"name": "cache-s", "sentinel": {"master": "mymaster", "addrs": ["10.0.0.9:26379"]}}
], `+secrets+`}`)
	to := writeFile(t, "to.json", `{"shards": [
  {"name": "cache-a", "addr": "10.0.0.1:6379"},
  {"name": "cache-s", "sentinel": {"master": "mymaster", "addrs": ["10.0.0.9:26379"]}},
  {"name": "cache-d", "addr": "10.0.0.4:6379"}
], `+secrets+`}`)
	for _, args := range [][]string{
		{"plan", "--config", cur, "--add", "cache-d=10.0.0.4:6379"},
		{"plan", "--config", cur, "--to-config", to},
		{"shares", "--config", cur},
	} {
		code, out, errOut := runCmd(t, args...)
		if code != exitOK || errOut != "" || !strings.Contains(out, "cache-s") {
			t.Errorf("%s: exit %d, stderr %q, stdout\n%s\nwant the plan of cache-s", strings.Join(args, " "), code, errOut, out)
		}
	}
	code, _, errOut := runCmd(t, "rebalance", "--config", cur, "--add", "cache-d=10.0.0.4:6379")
	if code == exitOK || !strings.Contains(errOut, "REDSHARD_TEST_UNSET_PASSWORD") {
		t.Errorf("rebalance: exit %d, stderr %q; want the unset password variable named", code, errOut)
	}
}
