package functions

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/parallel"
	"github.com/redshard/redshard/internal/rediserr"
)

// Server is a server that functions are read from or given to.
type Server struct {
	Name   string        // the shard's name, in messages
	Desc   string        // the shard described (name and address), in messages
	Client *redis.Client // a client of it
}

// Root is what the package needs from the root: its error value and its
// way of reading and comparing FUNCTION LIST WITHCODE replies.
type Root struct {
	// Differ is the error the refusals wrap (the root's
	// ErrLibrariesDiffer).
	Differ error
	// ListCode returns a FUNCTION LIST WITHCODE command.
	ListCode func(ctx context.Context) *redis.FunctionListCmd
	// Same reports whether two replies are equal, whatever order their
	// lists are in.
	Same func(a, b redis.Cmder) bool
}

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
func (r Root) same(l, o libraries) bool {
	if l.empty() || o.empty() {
		return l.empty() && o.empty()
	}
	return r.Same(l.list, o.list)
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

// read asks s for its libraries.
func (r Root) read(ctx context.Context, s Server) (libraries, error) {
	cmd := r.ListCode(ctx)
	if err := s.Client.Process(ctx, cmd); err != nil {
		if unknownCommand(err) {
			return libraries{list: cmd, none: true}, nil
		}
		return libraries{}, fmt.Errorf("reading the function libraries of shard %s: %w", s.Desc, err)
	}
	return libraries{list: cmd}, nil
}

// unknownCommand reports whether err is a server's refusal of a command it
// does not know.
func unknownCommand(err error) bool {
	return rediserr.Is(err) && strings.Contains(strings.ToLower(err.Error()), "unknown command")
}

// Give gives the servers joining the function libraries the servers
// sources hold (those that can be reached: one that cannot is treated as
// down). Those must agree, else an error wrapping Differ. A joining
// server then gets them with FUNCTION RESTORE, unless it holds them
// already; one that holds other libraries is refused too. When the
// sources hold no library (or there is none), nothing is carried and the
// joining servers are not contacted.
func (r Root) Give(ctx context.Context, sources, joining []Server) error {
	if len(sources) == 0 || len(joining) == 0 {
		return nil
	}
	all := make([]libraries, len(sources))
	errs := make([]error, len(sources))
	parallel.Run(len(sources), func(i int) { all[i], errs[i] = r.read(ctx, sources[i]) })
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
		case rediserr.Is(err):
			return err
		}
	}
	sources = readable
	if len(sources) == 0 {
		return nil // none could be read: nothing known to carry
	}
	for i := 1; i < len(sources); i++ {
		if !r.same(libs[0], libs[i]) {
			return fmt.Errorf("%w: shard %s holds %s and shard %s holds %s, so a joining server cannot be given the ring's; "+
				"load the same libraries on every shard (FUNCTION LOAD through the Client), then add the shards",
				r.Differ, sources[0].Name, libs[0].names(), sources[i].Name, libs[i].names())
		}
	}
	if libs[0].empty() {
		return nil
	}
	dump, err := sources[0].Client.FunctionDump(ctx).Result()
	if err != nil {
		return fmt.Errorf("FUNCTION DUMP on shard %s: %w", sources[0].Desc, err)
	}
	errs = make([]error, len(joining))
	parallel.Run(len(joining), func(i int) { errs[i] = r.give(ctx, joining[i], libs[0], dump, sources[0].Name) })
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// give restores dump (the libraries want, read from shard from) on s,
// unless s holds them already; a server that holds other libraries is
// refused.
func (r Root) give(ctx context.Context, s Server, want libraries, dump, from string) error {
	have, err := r.read(ctx, s)
	if err != nil {
		return err
	}
	switch {
	case have.none:
		return fmt.Errorf("%w: joining shard %s has no functions (FUNCTION is unknown to it) and the ring's shards hold %s",
			r.Differ, s.Desc, want.names())
	case r.same(have, want):
		return nil
	case !have.empty():
		return fmt.Errorf("%w: joining shard %s holds %s and the ring's shards hold %s; "+
			"give it the ring's libraries (or none) first", r.Differ, s.Desc, have.names(), want.names())
	}
	if err := s.Client.FunctionRestore(ctx, dump).Err(); err != nil {
		return fmt.Errorf("FUNCTION RESTORE of shard %s's libraries on joining shard %s: %w", from, s.Desc, err)
	}
	got, err := r.read(ctx, s)
	if err != nil {
		return err
	}
	if !r.same(got, want) {
		return fmt.Errorf("%w: joining shard %s holds %s after FUNCTION RESTORE, not the ring's %s (were libraries loaded meanwhile?)",
			r.Differ, s.Desc, got.names(), want.names())
	}
	return nil
}
