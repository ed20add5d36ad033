// Package fleetseam is what the fleet driver (package fleet) needs of the
// root package beyond its public API: a registry document read as the
// root reads it, a connection to one of its servers made as the root
// makes them, and the carrying of function libraries to joining servers.
// The root fills in Options and Client when it is initialised; the
// driver calls them. Nothing else uses this package.
//
// Contract: a Root is made from a *redshard.Options (Options: connections
// with those options' settings and no fleet admission, as the root dials
// a server before it follows a registry) or from a *redshard.Client
// (Client: connections of that client, admitted by its fence like its
// commands'). The argument is typed any because the root cannot be named
// here (it imports this package); any other type panics. Parse reads a
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

// Set by the root package when it is initialised.
var (
	// Options returns the Root of a *redshard.Options.
	Options func(opt any) Root
	// Client returns the Root of a *redshard.Client.
	Client func(c any) Root
)
