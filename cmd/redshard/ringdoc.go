package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/ring"
)

// ringDoc is the part of a configuration file that a registry publishes:
// the ring (shards, vnodes_per_weight and ring_recipe), in the JSON
// LoadConfig reads.
// Connection settings (password_env, tls, timeouts, ...) stay with each
// process: they are not the fleet's to agree on.
type ringDoc struct {
	Shards          []docShard `json:"shards"`
	VnodesPerWeight int        `json:"vnodes_per_weight,omitempty"`
	RingRecipe      int        `json:"ring_recipe,omitempty"` // left out for Recipe1, as before recipes
}

type docShard struct {
	Name   string  `json:"name"`
	Addr   string  `json:"addr"`
	Weight float64 `json:"weight,omitempty"`
}

// encodeRingDoc returns the registry document of opt's ring: its shards
// sorted by name, each with its effective weight, so that the same ring
// always gives the same document whatever the order of the file.
func encodeRingDoc(opt *redshard.Options) (json.RawMessage, error) {
	d := ringDoc{VnodesPerWeight: opt.VnodesPerWeight}
	if opt.RingRecipe != ring.Recipe1 {
		d.RingRecipe = opt.RingRecipe // Recipe1 spelt out is the document it always was
	}
	for _, s := range sortedShards(opt.Shards) {
		if s.Failover != nil {
			return nil, fmt.Errorf("shard %s: a Sentinel-managed shard cannot be published to a registry (the document holds addresses only)", s.Name)
		}
		d.Shards = append(d.Shards, docShard{Name: s.Name, Addr: s.Addr, Weight: weightOf(s)})
	}
	return json.Marshal(d)
}

// decodeRingDoc reads a registry document's ring and placement. Fields
// other than shards, vnodes_per_weight and ring_recipe are ignored, as
// the clients ignore them.
func decodeRingDoc(doc json.RawMessage) ([]redshard.Shard, placement, error) {
	var d ringDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, placement{}, fmt.Errorf("the registry's document: %w", err)
	}
	shards := make([]redshard.Shard, len(d.Shards))
	for i, s := range d.Shards {
		shards[i] = redshard.Shard{Name: s.Name, Addr: s.Addr, Weight: s.Weight}
	}
	slices.SortFunc(shards, func(a, b redshard.Shard) int { return cmp.Compare(a.Name, b.Name) })
	return shards, placement{recipe: d.RingRecipe, vnodes: d.VnodesPerWeight}, nil
}
