package redshard

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/registry"
)

// carryFunctions is apply's part of functions that follow the ring: before
// the change from cur to doc is prepared, the servers doc adds get the
// libraries of cur's servers that stay (all of cur's when none stays), as
// SetShards gives them (giveFunctions). On an error nothing is published.
func (d *driver) carryFunctions(ctx context.Context, cur registry.Config, doc []byte) error {
	if len(cur.Doc) == 0 {
		return nil
	}
	from, _, err := parseRingDoc(cur.Doc, d.base.ringConfig())
	if err != nil {
		return err
	}
	to, _, err := parseRingDoc(doc, d.base.ringConfig())
	if err != nil {
		return err
	}
	from, to = d.base.withConnection(from), d.base.withConnection(to)
	var joining, staying []Shard
	for _, s := range to {
		if containsIdentity(from, s) {
			staying = append(staying, s)
		} else {
			joining = append(joining, s)
		}
	}
	if len(joining) == 0 {
		return nil
	}
	if len(staying) == 0 {
		staying = from
	}
	var open []*redis.Client
	defer func() {
		for _, cl := range open {
			_ = cl.Close()
		}
	}()
	servers := func(list []Shard) []libServer {
		out := make([]libServer, len(list))
		for i, s := range list {
			cl := d.client.dial(s, connCommand, nil)
			open = append(open, cl)
			out[i] = libServer{s, cl}
		}
		return out
	}
	if err := giveFunctions(ctx, servers(staying), servers(joining)); err != nil {
		return fmt.Errorf("redshard: apply: giving the joining servers the fleet's functions (nothing published): %w", err)
	}
	return nil
}
