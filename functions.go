package redshard

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/functions"
	"github.com/redshard/redshard/internal/merge"
)

// Functions follow the ring: a server that joins it (SetShards) gets,
// before it owns a key, the function libraries the current shards agree
// on, so that FCALL, FUNCTION LIST and FUNCTION DUMP keep working on every
// key. What is not carried over: scripts loaded with SCRIPT LOAD (a server
// cannot dump them; EVALSHA of one on the new server gets NOSCRIPT, which
// go-redis's Script.Run answers by sending the script with EVAL), and the
// servers' configuration and users (CONFIG SET, ACL SETUSER): configuring a
// new server like the others is the operator's job.

// libServer is a server that functions are read from or given to: a
// shard and a client of it.
func libServer(s Shard, client *redis.Client) functions.Server {
	return functions.Server{Name: s.Name, Desc: s.String(), Client: client}
}

// carryFunctions is SetShards' part of functions that follow the ring: it
// gives the servers of next that are not in old (joining) the function
// libraries of old's shards, before next is published. The libraries are
// read from the shards that stay on the ring (all of old's when none
// stays), skipping those marked down (see giveFunctions).
func carryFunctions(ctx context.Context, old, next *topology, joining []*shard) error {
	if len(joining) == 0 {
		return nil
	}
	var sources []functions.Server
	for _, s := range old.shards {
		if !s.down.Load() && slices.ContainsFunc(next.shards, func(n *shard) bool { return n.backend == s.backend }) {
			sources = append(sources, libServer(s.Shard, s.client))
		}
	}
	if len(sources) == 0 {
		for _, s := range old.shards {
			if !s.down.Load() {
				sources = append(sources, libServer(s.Shard, s.client))
			}
		}
	}
	to := make([]functions.Server, len(joining))
	for i, s := range joining {
		to[i] = libServer(s.Shard, s.client)
	}
	return giveFunctions(ctx, sources, to)
}

// giveFunctions gives the servers joining the function libraries the
// servers sources hold (internal/functions: Root.Give); a refusal wraps
// ErrLibrariesDiffer.
func giveFunctions(ctx context.Context, sources, joining []functions.Server) error {
	return functions.Root{Differ: ErrLibrariesDiffer, ListCode: functionListCode, Same: merge.Same}.Give(ctx, sources, joining)
}
