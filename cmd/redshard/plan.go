package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/ring"
)

func runPlan(_ context.Context, args []string, stdout, _ io.Writer) error {
	f := newFlags("plan", "(--config FILE | --shard ...) (--add name=host:port[:weight] | --remove name | --weight name=w | --to-config FILE)... [--vnodes N]", `
Plan shows what a change of the shard list would do, without contacting any
server: the fraction of the keys that change owner (exact, from ring.Diff),
the smallest fraction any placement could move for the same change of
weights, a from/to matrix of the moving keys, and the fraction plain
"hash mod N" placement would move for the same change.

A new placement (--to-config with another vnodes_per_weight or ring_recipe)
re-draws the ring and moves most keys; it is planned only with the same
shards, as a change of its own.

The current list comes from --config or --shard; the change from --add,
--remove and --weight (repeatable, applied in order) or from --to-config,
the configuration file of the new list.`)
	src := source{offline: true} // plan contacts no server: it needs no password
	src.register(f, "current shards")
	var changes []change
	registerChanges(f, &changes)
	toConfig := f.String("to-config", "", "configuration `file` of the new shard list (instead of --add/--remove/--weight)")
	applyVnodes := vnodesFlag(f)
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	_, _, p, err := planChange(&src, changes, *toConfig, applyVnodes)
	if err != nil {
		return err
	}
	p.write(stdout)
	return nil
}

// planChange reads the current shard list from src, lets adjust change the
// options (nil: none), applies the --add/--remove/--weight changes or
// --to-config, and plans the move. plan and rebalance share it.
func planChange(src *source, changes []change, toConfig string, adjust func(*redshard.Options) error) (*redshard.Options, []redshard.Shard, *plan, error) {
	opt, err := src.options()
	if err != nil {
		return nil, nil, nil, err
	}
	if adjust != nil {
		if err := adjust(opt); err != nil {
			return nil, nil, nil, err
		}
	}
	to, err := newShardList(src, opt, changes, toConfig)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := makePlan(opt.Shards, to.Shards, placementOf(opt), placementOf(to))
	if err != nil {
		return nil, nil, nil, err
	}
	return opt, to.Shards, p, nil
}

// newShardList applies the --add/--remove/--weight changes to the current
// list, or reads the new list and its placement from toConfig (as src
// reads its files: without secrets when src is offline). A new
// placement (vnodes_per_weight, ring_recipe) comes with the same shards:
// see checkPlacementChange.
func newShardList(src *source, cur *redshard.Options, changes []change, toConfig string) (*redshard.Options, error) {
	switch {
	case toConfig != "" && len(changes) > 0:
		return nil, usagef("give --to-config or --add/--remove/--weight, not both")
	case toConfig != "":
		to, err := src.load(toConfig)
		if err != nil {
			return nil, err
		}
		if err := checkPlacementChange(placementOf(cur), placementOf(to), cur.Shards, to.Shards); err != nil {
			return nil, fmt.Errorf("--to-config %s: %w", toConfig, err)
		}
		return to, nil
	case len(changes) == 0:
		return nil, usagef("no change: give --add, --remove, --weight or --to-config")
	}
	to, err := applyChanges(cur.Shards, changes)
	if err != nil {
		return nil, err
	}
	next := *cur
	next.Shards = to
	if err := next.Validate(); err != nil {
		return nil, usageError{err}
	}
	return &next, nil
}

// plan is the effect of changing a shard list.
type plan struct {
	from, to []redshard.Shard // sorted by name
	fromP    placement        // the placement of from, in effect
	toP      placement        // the placement of to, in effect
	moved    float64          // fraction of the key space whose owner changes
	minimum  float64          // the least any placement following the weights must move
	matrix   map[[2]string]float64
	modN     float64 // fraction that hash mod N would move
}

func makePlan(from, to []redshard.Shard, fromP, toP placement) (*plan, error) {
	oldRing, err := newRing(from, fromP)
	if err != nil {
		return nil, fmt.Errorf("current shards: %w", err)
	}
	newRing, err := newRing(to, toP)
	if err != nil {
		return nil, fmt.Errorf("new shards: %w", err)
	}
	p := &plan{from: sortedShards(from), to: sortedShards(to), fromP: fromP.effective(), toP: toP.effective()}
	moves := ring.Diff(oldRing, newRing)
	for _, m := range moves {
		p.moved += m.Fraction
	}
	p.matrix = ring.Summarize(moves)
	p.minimum = minimumMove(p.from, p.to)
	p.modN = modNMove(p.from, p.to)
	return p, nil
}

func sortedShards(s []redshard.Shard) []redshard.Shard {
	out := slices.Clone(s)
	slices.SortFunc(out, func(a, b redshard.Shard) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// idealShares maps each shard to weight / total weight.
func idealShares(shards []redshard.Shard) map[string]float64 {
	var total float64
	for _, s := range shards {
		total += weightOf(s)
	}
	out := map[string]float64{}
	for _, s := range shards {
		out[s.Name] = weightOf(s) / total
	}
	return out
}

// minimumMove is the fraction of keys any placement that gives every shard
// exactly its weight share must move: half the total change of the shares.
func minimumMove(from, to []redshard.Shard) float64 {
	a, b := idealShares(from), idealShares(to)
	var sum float64
	for name, s := range a {
		sum += math.Abs(s - b[name])
	}
	for name, s := range b {
		if _, ok := a[name]; !ok {
			sum += s
		}
	}
	return sum / 2
}

// modNMove is the fraction of keys whose owner changes when a key goes to
// shard hash(key) mod N of the list sorted by name, and N changes from
// len(from) to len(to). Weights are ignored (mod N has no weights). It is
// exact for a uniform hash: hash mod lcm(N, M) is uniform, and the owner
// before and after depends only on it.
func modNMove(from, to []redshard.Shard) float64 {
	n, m := len(from), len(to)
	l := n / gcd(n, m) * m
	changed := 0
	for r := 0; r < l; r++ {
		if from[r%n].Name != to[r%m].Name {
			changed++
		}
	}
	return float64(changed) / float64(l)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (p *plan) write(w io.Writer) {
	weight := func(shards []redshard.Shard) (t float64) {
		for _, s := range shards {
			t += weightOf(s)
		}
		return t
	}
	fmt.Fprintf(w, "current: %d shards, total weight %g\n", len(p.from), weight(p.from))
	fmt.Fprintf(w, "new:     %d shards, total weight %g\n", len(p.to), weight(p.to))
	if p.fromP == p.toP {
		fmt.Fprintf(w, "ring:    %s\n\n", p.fromP)
	} else {
		fmt.Fprintf(w, "ring:    %s, to %s: a new placement, which moves most keys\n\n", p.fromP, p.toP)
	}

	t := &table{align: "llrrl"}
	t.add("shard", "addr", "weight", "ideal share", "change")
	before, after := idealShares(p.from), idealShares(p.to)
	all := sortedShards(append(slices.Clone(p.to), p.from...))
	seen := map[string]bool{}
	for _, s := range all {
		if seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		old := slices.IndexFunc(p.from, func(x redshard.Shard) bool { return x.Name == s.Name })
		cur := slices.IndexFunc(p.to, func(x redshard.Shard) bool { return x.Name == s.Name })
		switch {
		case old < 0:
			t.add(s.Name, where(p.to[cur]), fmt.Sprintf("%g", weightOf(p.to[cur])), pct(after[s.Name]), "added")
		case cur < 0:
			t.add(s.Name, where(p.from[old]), fmt.Sprintf("%g", weightOf(p.from[old])), pct(before[s.Name]), "removed")
		default:
			wo, wn := weightOf(p.from[old]), weightOf(p.to[cur])
			what := ""
			if wo != wn {
				what = fmt.Sprintf("weight %g -> %g", wo, wn)
			}
			if c := whereChange(p.from[old], p.to[cur]); c != "" {
				what += fmt.Sprintf(" %s (keys stay)", c)
			}
			share := pct(after[s.Name])
			if before[s.Name] != after[s.Name] {
				share = pct(before[s.Name]) + " -> " + share
			}
			t.add(s.Name, where(p.to[cur]), fmt.Sprintf("%g", wn), share, strings.TrimSpace(what))
		}
	}
	t.write(w)

	fmt.Fprintf(w, "\nkeys that change owner: %s of the key space (least possible with shares exactly proportional to weights: %s)\n",
		pct(p.moved), pct(p.minimum))
	if len(p.matrix) > 0 {
		fmt.Fprintln(w, "\nmoving keys, as a share of all keys (rows: current owner, columns: new owner):")
		var rows, cols []string
		for k := range p.matrix {
			if !slices.Contains(rows, k[0]) {
				rows = append(rows, k[0])
			}
			if !slices.Contains(cols, k[1]) {
				cols = append(cols, k[1])
			}
		}
		slices.Sort(rows)
		slices.Sort(cols)
		m := &table{}
		m.add(append([]string{"from \\ to"}, cols...)...)
		for _, r := range rows {
			cells := []string{r}
			for _, c := range cols {
				if f, ok := p.matrix[[2]string{r, c}]; ok {
					cells = append(cells, pct(f))
				} else {
					cells = append(cells, ".")
				}
			}
			m.add(cells...)
		}
		m.write(w)
	}
	if p.fromP == p.toP { // hash mod N has no placement to change
		fmt.Fprintf(w, "\nhash mod N (shards sorted by name, weights ignored) would move %s of the keys for the same change\n", pct(p.modN))
	}
}
