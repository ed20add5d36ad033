package redshard

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/fleetseam"
	"github.com/redshard/redshard/internal/functions"
)

// The fleet driver's seam (internal/fleetseam): what package fleet needs
// of the root beyond its public API.
func init() {
	fleetseam.Set(fleetseam.Funcs[Options, Client]{
		Options: func(o *Options) fleetseam.Root { return seamOptions(o) },
		Client:  func(c *Client) fleetseam.Root { return seamRoot{c.client} },
	})
}

// seamOptions is the fleetseam.Root of o: its connection settings, with
// no fleet admission.
func seamOptions(o *Options) seamRoot {
	c := &client{shardEnv: shardEnv{cfg: &config{opt: *o}}}
	c.cfg.opt.Registry = nil
	return seamRoot{c}
}

// seamRoot is a fleetseam.Root: c's options and connections.
type seamRoot struct{ c *client }

func (r seamRoot) Parse(doc []byte) (fleetseam.Ring, error) {
	o := &r.c.cfg.opt
	shards, ids, err := parseRingDoc(doc, o.ringConfig())
	if err != nil {
		return fleetseam.Ring{}, err
	}
	shards = o.withConnection(shards)
	out := make([]fleetseam.Server, len(shards))
	for i, s := range shards {
		out[i] = fleetseam.Server{Name: s.Name, ID: s.identity(), Desc: s.String(), Shard: s}
	}
	return fleetseam.Ring{Servers: out, Owner: ids.Owner}, nil
}

func (r seamRoot) Dial(s fleetseam.Server) *redis.Client {
	return r.c.dial(s.Shard.(Shard), connCommand, nil)
}

func (r seamRoot) GiveFunctions(ctx context.Context, staying, joining []fleetseam.Server) error {
	var open []*redis.Client
	defer func() {
		for _, cl := range open {
			_ = cl.Close()
		}
	}()
	servers := func(list []fleetseam.Server) []functions.Server {
		out := make([]functions.Server, len(list))
		for i, s := range list {
			cl := r.Dial(s)
			open = append(open, cl)
			out[i] = libServer(s.Shard.(Shard), cl)
		}
		return out
	}
	return giveFunctions(ctx, servers(staying), servers(joining))
}
