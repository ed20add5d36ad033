package redshard

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/redshard/redshard/internal/member"
	"github.com/redshard/redshard/ring"
)

// parseRingDoc reads a registry document (LoadConfig's JSON): its shards
// and ring, with the identity of each ring index's server. Only "shards",
// "vnodes_per_weight" and "ring_recipe" are used: def.VnodesPerWeight is
// the client's value for a document that names none; the recipe is the
// document's alone (none: Recipe1). A Sentinel shard's Failover names the
// master and the Sentinels only: a caller that dials the shards gives them
// its connection settings first (Options.withConnection).
func parseRingDoc(doc []byte, def ring.Config) ([]Shard, member.Ring, error) {
	var fc fileConfig
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, member.Ring{}, fmt.Errorf("redshard: registry config: %w", jsonError(doc, err))
	}
	shards := make([]Shard, len(fc.Shards))
	for i, s := range fc.Shards {
		if err := s.check(i); err != nil {
			return nil, member.Ring{}, fmt.Errorf("redshard: registry config: %w", err)
		}
		shards[i] = s.shard()
	}
	rc := def
	if fc.VnodesPerWeight != 0 {
		rc.VnodesPerWeight = fc.VnodesPerWeight
	}
	rc.Recipe = fc.RingRecipe
	valid, r, err := resolveShards(shards, rc)
	if err != nil {
		return nil, member.Ring{}, fmt.Errorf("redshard: registry config: %w", err)
	}
	return valid, member.Ring{R: r, IDs: identities(r, valid)}, nil
}

// identities lists the server identity of each of r's indexes.
func identities(r *ring.Ring, shards []Shard) []string {
	byName := make(map[string]string, len(shards))
	for _, s := range shards {
		byName[s.Name] = s.identity()
	}
	nodes := r.Nodes()
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = byName[n.Name]
	}
	return ids
}
