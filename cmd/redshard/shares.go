package main

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/ring"
)

func runShares(_ context.Context, args []string, stdout, _ io.Writer) error {
	f := newFlags("shares", "(--config FILE | --shard name=host:port[:weight] ...) [--vnodes N]", `
Shares prints, for each shard, its weight, its ideal share of the keys
(weight / total weight), the share of the hash space the ring really gives
it (ring.Shares, exact), and the deviation of the real share from the ideal
one, relative to the ideal share. No server is contacted.

More points per unit of weight (--vnodes, vnodes_per_weight in the config)
bring the shares closer to the weights at the cost of memory and build time;
try a few values here. Every client of a fleet must use the same value.`)
	src := source{offline: true} // shares contacts no server: it needs no password
	src.register(f, "shards")
	applyVnodes := vnodesFlag(f)
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	opt, err := src.options()
	if err != nil {
		return err
	}
	if err := applyVnodes(opt); err != nil {
		return err
	}
	r, err := newRing(opt.Shards, placementOf(opt))
	if err != nil {
		return err
	}
	writeShares(stdout, r, opt.Shards)
	return nil
}

// writeShares prints the shares table of ring r built from shards.
func writeShares(w io.Writer, r *ring.Ring, shards []redshard.Shard) {
	addr := map[string]string{}
	for _, s := range shards {
		addr[s.Name] = where(s)
	}
	nodes := r.Nodes()
	var total float64
	points := 0
	for _, n := range nodes {
		total += n.Weight
		points += int(math.Round(n.Weight * float64(r.VnodesPerWeight())))
	}
	fmt.Fprintf(w, "%d shards, total weight %g, %d points per unit of weight (%d points)\n\n",
		len(nodes), total, r.VnodesPerWeight(), points)

	shares := r.Shares()
	t := &table{align: "ll"}
	t.add("shard", "addr", "weight", "ideal", "actual", "deviation")
	worst, worstName := 0.0, ""
	for _, n := range nodes {
		ideal := n.Weight / total
		actual := shares[n.Name]
		dev := actual/ideal - 1
		if math.Abs(dev) >= math.Abs(worst) {
			worst, worstName = dev, n.Name
		}
		t.add(n.Name, addr[n.Name], fmt.Sprintf("%g", n.Weight), pct(ideal), pct(actual), signedPct(dev))
	}
	t.write(w)
	fmt.Fprintf(w, "\nlargest deviation: %s (%s)\n", signedPct(worst), worstName)
}
