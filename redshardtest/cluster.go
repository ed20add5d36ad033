package redshardtest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redshard/redshard"
)

// Cluster is a redshard Client over Servers of its own, one per shard. Its
// fields are set by StartCluster or NewCluster and are not to be changed.
// Close is safe for concurrent use; the Client is, as always.
type Cluster struct {
	// Client is the redshard client over every shard.
	Client *redshard.Client
	// Shards are the client's shards: shard-0, shard-1, ..., with the
	// weights asked for, each on its server.
	Shards []redshard.Shard
	// Servers[i] serves Shards[i].
	Servers []*Server

	closeOnce sync.Once
	closeErr  error
}

// StartCluster starts one Server per weight and a Client over them: shard i
// is named shard-i. opt is the template of the client's options (nil: the
// defaults), its Shards replaced; it must not name a Registry. The caller
// closes the Cluster (Close); NewCluster is the same for a test.
func StartCluster(opt *redshard.Options, weights ...float64) (*Cluster, error) {
	if len(weights) == 0 {
		return nil, errors.New("redshardtest: StartCluster: no weights, so no shard")
	}
	c := &Cluster{}
	servers, shards, err := startShards(weights)
	c.Servers, c.Shards = servers, shards
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	o := redshard.Options{}
	if opt != nil {
		o = *opt
	}
	o.Shards = shards
	c.Client, err = redshard.NewClient(&o)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redshardtest: StartCluster: %w", err)
	}
	return c, nil
}

// NewCluster is StartCluster for a test: the Cluster is closed when t's
// test ends (t.Cleanup), and a failure to start it fails t (Fatalf).
func NewCluster(t TB, opt *redshard.Options, weights ...float64) *Cluster {
	t.Helper()
	c, err := StartCluster(opt, weights...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Server returns the server of the named shard, or nil.
func (c *Cluster) Server(name string) *Server {
	for i, s := range c.Shards {
		if s.Name == name {
			return c.Servers[i]
		}
	}
	return nil
}

// Close closes the client, then the servers. Later calls return the first
// call's result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		if c.Client != nil {
			c.closeErr = c.Client.Close()
		}
		for _, s := range c.Servers {
			s.Close()
		}
	})
	return c.closeErr
}

// startShards starts one Server per weight and returns them with their
// shards, shard-0, shard-1, ...; on an error, it returns those it started.
func startShards(weights []float64) ([]*Server, []redshard.Shard, error) {
	var servers []*Server
	var shards []redshard.Shard
	for i, w := range weights {
		s, err := StartServer()
		if err != nil {
			return servers, shards, err
		}
		servers = append(servers, s)
		shards = append(shards, redshard.Shard{Name: "shard-" + strconv.Itoa(i), Addr: s.Addr(), Weight: w})
	}
	return servers, shards, nil
}
