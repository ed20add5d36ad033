// Package fleetseam is what the fleet driver (package fleet) needs of the
// root package beyond its public API: a registry document read as the
// root reads it, a connection to one of its servers made as the root
// makes them, and the carrying of function libraries to joining servers.
// The root registers its Funcs when it is initialised (Set); the driver
// gets them, typed by the root's Options and Client, with For. Nothing
// else uses this package.
//
// Contract: a Root is made from a *redshard.Options (Funcs.Options:
// connections with those options' settings and no fleet admission, as the
// root dials a server before it follows a registry) or from a
// *redshard.Client (Funcs.Client: connections of that client, admitted by
// its fence like its commands'). This package cannot name the root's
// types (the root imports it), so Funcs is generic over them: the root
// sets Funcs[redshard.Options, redshard.Client] and the driver asks For
// the same instance, so every argument is checked by the compiler; For
// panics if the root registered none of that instance (a programming
// error, seen at the driver's initialisation). Server.Shard is the root's
// own value, read only by the root. Parse reads a
// document as the registry's followers do (strict JSON, the shards
// checked, the ring built with the options' VnodesPerWeight when the
// document names none and the document's own recipe), and returns its
// servers with the options' connection settings. Dial returns a new
// go-redis client that the caller closes. GiveFunctions is SetShards'
// carrying of libraries (ErrLibrariesDiffer when the sources disagree).
//
// Concurrency: the functions and a Root's methods are safe for concurrent
// use; a Root holds no state of its own besides what it was made from.
package fleetseam

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Server is one server of a document.
type Server struct {
	Name string // the shard's name
	ID   string // its identity: its address (canonical), or its Sentinel master
	Desc string // how the root prints it: name and address, never credentials
	// Shard is the root's redshard.Shard, with the connection settings of
	// the options the document was parsed with. Only the root reads it.
	Shard any
}

func (s Server) String() string { return s.Desc }

// Ring is a parsed document: its servers, in the document's order, and
// the identity of the server the ring gives each key.
type Ring struct {
	Servers []Server
	Owner   func(key string) string
}

// Root is the root package's side of the seam.
type Root interface {
	Parse(doc []byte) (Ring, error)
	Dial(s Server) *redis.Client
	GiveFunctions(ctx context.Context, staying, joining []Server) error
}

// Funcs are the root's constructors of a Root: O is the root's Options
// type and C its Client type.
type Funcs[O, C any] struct {
	// Options returns the Root of o.
	Options func(o *O) Root
	// Client returns the Root of c.
	Client func(c *C) Root
}

// funcs holds the Funcs the root set: a Funcs[O, C] for the root's O and C.
var funcs any

// Set registers the root's Funcs. The root calls it when it is
// initialised, before any driver runs.
func Set[O, C any](f Funcs[O, C]) { funcs = f }

// For returns the Funcs the root set for O and C.
func For[O, C any]() Funcs[O, C] {
	f, ok := funcs.(Funcs[O, C])
	if !ok {
		panic(fmt.Sprintf("fleetseam: the root set %T, not %T", funcs, f))
	}
	return f
}
