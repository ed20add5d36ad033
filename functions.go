package redshard

import (
	"context"
	"fmt"
	"github.com/redshard/redshard/internal/parallel"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

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

// libraries is what one server says of its function libraries: its
// FUNCTION LIST WITHCODE reply, or none (a server that has no functions:
// Redis before 7.0, miniredis).
type libraries struct {
	list *redis.FunctionListCmd
	none bool // the server does not know FUNCTION
}

// empty reports whether the server holds no library.
func (l libraries) empty() bool { return l.none || len(l.list.Val()) == 0 }

// same reports whether two servers hold the same libraries with the same
// code, whatever order they list them in.
func (l libraries) same(o libraries) bool {
	if l.empty() || o.empty() {
		return l.empty() && o.empty()
	}
	return merge.Same(l.list, o.list)
}

// names lists the libraries, for messages.
func (l libraries) names() string {
	if l.empty() {
		return "none"
	}
	var out []string
	for _, lib := range l.list.Val() {
		out = append(out, lib.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// libServer is a server that functions are read from or given to: a
// shard and a client of it.
type libServer struct {
	Shard
	client *redis.Client
}

// readLibraries asks s for its libraries.
func readLibraries(ctx context.Context, s libServer) (libraries, error) {
	cmd := functionListCode(ctx)
	if err := s.client.Process(ctx, cmd); err != nil {
		if unknownCommand(err) {
			return libraries{list: cmd, none: true}, nil
		}
		return libraries{}, fmt.Errorf("reading the function libraries of shard %s: %w", s.Shard, err)
	}
	return libraries{list: cmd}, nil
}

// unknownCommand reports whether err is a server's refusal of a command it
// does not know.
func unknownCommand(err error) bool {
	return isRedisError(err) && strings.Contains(strings.ToLower(err.Error()), "unknown command")
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
	var sources []libServer
	for _, s := range old.shards {
		if !s.down.Load() && slices.ContainsFunc(next.shards, func(n *shard) bool { return n.backend == s.backend }) {
			sources = append(sources, libServer{s.Shard, s.client})
		}
	}
	if len(sources) == 0 {
		for _, s := range old.shards {
			if !s.down.Load() {
				sources = append(sources, libServer{s.Shard, s.client})
			}
		}
	}
	to := make([]libServer, len(joining))
	for i, s := range joining {
		to[i] = libServer{s.Shard, s.client}
	}
	return giveFunctions(ctx, sources, to)
}

// giveFunctions gives the servers joining the function libraries the
// servers sources hold (those that can be reached: one that cannot is
// treated as down). Those must agree, else ErrLibrariesDiffer. A
// joining server then gets them with FUNCTION RESTORE, unless it holds
// them already; one that holds other libraries is refused too. When the
// sources hold no library (or there is none), nothing is carried and the
// joining servers are not contacted.
func giveFunctions(ctx context.Context, sources, joining []libServer) error {
	if len(sources) == 0 || len(joining) == 0 {
		return nil
	}
	all := make([]libraries, len(sources))
	errs := make([]error, len(sources))
	parallel.Run(len(sources), func(i int) { all[i], errs[i] = readLibraries(ctx, sources[i]) })
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("reading the function libraries of the current shards: %w", context.Cause(ctx))
	}
	// A server that cannot be reached counts as down (not yet marked): its
	// libraries are not read. One that answers with an error refuses.
	var libs []libraries
	readable := sources[:0:0]
	for i, err := range errs {
		switch {
		case err == nil:
			libs, readable = append(libs, all[i]), append(readable, sources[i])
		case isRedisError(err):
			return err
		}
	}
	sources = readable
	if len(sources) == 0 {
		return nil // none could be read: nothing known to carry
	}
	for i := 1; i < len(sources); i++ {
		if !libs[0].same(libs[i]) {
			return fmt.Errorf("%w: shard %s holds %s and shard %s holds %s, so a joining server cannot be given the ring's; "+
				"load the same libraries on every shard (FUNCTION LOAD through the Client), then add the shards",
				ErrLibrariesDiffer, sources[0].Name, libs[0].names(), sources[i].Name, libs[i].names())
		}
	}
	if libs[0].empty() {
		return nil
	}
	dump, err := sources[0].client.FunctionDump(ctx).Result()
	if err != nil {
		return fmt.Errorf("FUNCTION DUMP on shard %s: %w", sources[0].Shard, err)
	}
	errs = make([]error, len(joining))
	parallel.Run(len(joining), func(i int) { errs[i] = giveLibraries(ctx, joining[i], libs[0], dump, sources[0].Name) })
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// giveLibraries restores dump (the libraries want, read from shard from)
// on s, unless s holds them already; a server that holds other libraries
// is refused.
func giveLibraries(ctx context.Context, s libServer, want libraries, dump, from string) error {
	have, err := readLibraries(ctx, s)
	if err != nil {
		return err
	}
	switch {
	case have.none:
		return fmt.Errorf("%w: joining shard %s has no functions (FUNCTION is unknown to it) and the ring's shards hold %s",
			ErrLibrariesDiffer, s.Shard, want.names())
	case have.same(want):
		return nil
	case !have.empty():
		return fmt.Errorf("%w: joining shard %s holds %s and the ring's shards hold %s; "+
			"give it the ring's libraries (or none) first", ErrLibrariesDiffer, s.Shard, have.names(), want.names())
	}
	if err := s.client.FunctionRestore(ctx, dump).Err(); err != nil {
		return fmt.Errorf("FUNCTION RESTORE of shard %s's libraries on joining shard %s: %w", from, s.Shard, err)
	}
	got, err := readLibraries(ctx, s)
	if err != nil {
		return err
	}
	if !got.same(want) {
		return fmt.Errorf("%w: joining shard %s holds %s after FUNCTION RESTORE, not the ring's %s (were libraries loaded meanwhile?)",
			ErrLibrariesDiffer, s.Shard, got.names(), want.names())
	}
	return nil
}
