package main

import (
	"fmt"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/ring"
)

// placement is how a ring places keys, as a file or a registry document
// names it: the recipe ("ring_recipe") and the points per unit of weight
// ("vnodes_per_weight"); 0 leaves either to its default.
type placement struct {
	recipe, vnodes int
}

// placementOf is the placement opt asks for.
func placementOf(opt *redshard.Options) placement {
	return placement{recipe: opt.RingRecipe, vnodes: opt.VnodesPerWeight}
}

// config is the ring configuration of p.
func (p placement) config() *ring.Config {
	return &ring.Config{Recipe: p.recipe, VnodesPerWeight: p.vnodes}
}

// effective is p with its defaults filled in: two placements that place
// every key alike are equal once effective.
func (p placement) effective() placement {
	if p.recipe == 0 {
		p.recipe = ring.Recipe1
	}
	if p.vnodes == 0 {
		p.vnodes = ring.DefaultVnodesPerWeight
		if p.recipe == ring.Recipe2 {
			p.vnodes = ring.DefaultVnodesPerWeight2
		}
	}
	return p
}

// describeVnodes prints p's points per unit of weight as the value in
// effect ("8192 (the default)", "512").
func (p placement) describeVnodes() string {
	if p.vnodes == 0 {
		return fmt.Sprintf("%d (the default)", p.effective().vnodes)
	}
	return fmt.Sprint(p.vnodes)
}

// String describes p as the ring lines of plan and status print it:
// "8192 (the default) points per unit of weight", and the recipe after
// it when it is not Recipe1, the placement of every ring before recipes.
func (p placement) String() string {
	s := p.describeVnodes() + " points per unit of weight"
	if r := p.effective().recipe; r != ring.Recipe1 {
		s += fmt.Sprintf(", placement Recipe%d", r)
	}
	return s
}

// checkPlacementChange refuses to combine a change of placement with a
// change of the shard list: a new placement re-draws the whole ring and
// moves most keys, so it is a change of its own (docs/operations.md, "The
// ring's placement recipe").
func checkPlacementChange(from, to placement, fromShards, toShards []redshard.Shard) error {
	if from.effective() == to.effective() || sameShards(fromShards, toShards) {
		return nil
	}
	return fmt.Errorf("the placement changes (%s, to %s) and so do the shards: a new placement moves most keys by itself; "+
		"change the placement alone first (same shards), then the shards in a change of their own", from, to)
}
