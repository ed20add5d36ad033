package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

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
	Name     string       `json:"name"`
	Addr     string       `json:"addr,omitempty"`
	Sentinel *docSentinel `json:"sentinel,omitempty"` // instead of addr
	Weight   float64      `json:"weight,omitempty"`
}

// docSentinel is a Sentinel-managed shard's master and Sentinels. The
// Sentinels' credentials, like the servers', stay with each process
// (sentinel_username, sentinel_password_env).
type docSentinel struct {
	Master string   `json:"master"`
	Addrs  []string `json:"addrs"`
}

// encodeRingDoc returns the registry document of opt's ring: its shards
// sorted by name, each with its effective weight, and a Sentinel shard's
// Sentinels sorted, so that the same ring always gives the same document
// whatever the order of the file. A Sentinel shard is published as its
// master's name and its Sentinels' addresses: nothing else of its
// FailoverOptions (no password) leaves the process.
func encodeRingDoc(opt *redshard.Options) (json.RawMessage, error) {
	d := ringDoc{VnodesPerWeight: opt.VnodesPerWeight}
	if opt.RingRecipe != ring.Recipe1 {
		d.RingRecipe = opt.RingRecipe // Recipe1 spelt out is the document it always was
	}
	for _, s := range sortedShards(opt.Shards) {
		ds := docShard{Name: s.Name, Addr: s.Addr, Weight: weightOf(s)}
		if f := s.Failover; f != nil {
			if s.Addr != "" {
				return nil, fmt.Errorf("shard %s: both an address and a Sentinel master: give one", s.Name)
			}
			ds.Sentinel = &docSentinel{Master: f.MasterName, Addrs: slices.Sorted(slices.Values(f.SentinelAddrs))}
		}
		d.Shards = append(d.Shards, ds)
	}
	return json.Marshal(d)
}

// decodeRingDoc reads a registry document's ring and placement. Fields
// other than shards, vnodes_per_weight and ring_recipe are ignored, as
// the clients ignore them. A Sentinel shard's Failover holds its master
// and Sentinels only.
func decodeRingDoc(doc json.RawMessage) ([]redshard.Shard, placement, error) {
	var d ringDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, placement{}, fmt.Errorf("the registry's document: %w", err)
	}
	shards := make([]redshard.Shard, len(d.Shards))
	for i, s := range d.Shards {
		shards[i] = redshard.Shard{Name: s.Name, Addr: s.Addr, Weight: s.Weight}
		if s.Sentinel != nil {
			shards[i].Failover = &redis.FailoverOptions{MasterName: s.Sentinel.Master, SentinelAddrs: s.Sentinel.Addrs}
		}
	}
	slices.SortFunc(shards, func(a, b redshard.Shard) int { return cmp.Compare(a.Name, b.Name) })
	return shards, placement{recipe: d.RingRecipe, vnodes: d.VnodesPerWeight}, nil
}

// where names the server a shard is, for a table's addr column: its
// address, or its Sentinel master.
func where(s redshard.Shard) string {
	if s.Failover != nil {
		return fmt.Sprintf("sentinel master %q", s.Failover.MasterName)
	}
	return s.Addr
}

// whereChange describes how the server of a shard that keeps its name
// changes from a to b ("addr x -> y", "sentinels [..] -> [..]"), or is
// empty when it does not.
func whereChange(a, b redshard.Shard) string {
	switch {
	case a.Failover == nil && b.Failover == nil:
		if a.Addr == b.Addr {
			return ""
		}
		return fmt.Sprintf("addr %s -> %s", a.Addr, b.Addr)
	case a.Failover != nil && b.Failover != nil && a.Failover.MasterName == b.Failover.MasterName:
		if sameFailover(a.Failover, b.Failover) {
			return ""
		}
		return fmt.Sprintf("sentinels %s -> %s", strings.Join(a.Failover.SentinelAddrs, ","), strings.Join(b.Failover.SentinelAddrs, ","))
	}
	return fmt.Sprintf("%s -> %s", where(a), where(b))
}
