package redshard

import (
	"context"

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
// SetShards gives them to joining servers in carryFunctions (membership.go).

// libServer is a server that functions are read from or given to: a
// shard and a client of it.
func libServer(s Shard, client *redis.Client) functions.Server {
	return functions.Server{Name: s.Name, Desc: s.String(), Client: client}
}

// giveFunctions gives the servers joining the function libraries the
// servers sources hold (internal/functions: Root.Give); a refusal wraps
// ErrLibrariesDiffer.
func giveFunctions(ctx context.Context, sources, joining []functions.Server) error {
	return functions.Root{Differ: ErrLibrariesDiffer, ListCode: functionListCode, Same: merge.Same}.Give(ctx, sources, joining)
}

// functionListCode returns a FUNCTION LIST WITHCODE command.
func functionListCode(ctx context.Context) *redis.FunctionListCmd {
	return redis.NewFunctionListCmd(ctx, "function", "list", "withcode")
}
