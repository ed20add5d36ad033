package fleet

import (
	"context"
	"fmt"

	"github.com/redshard/redshard/internal/fleetseam"
	"github.com/redshard/redshard/registry"
)

// carryFunctions is apply's part of functions that follow the ring: before
// the change from cur to doc is prepared, the servers doc adds get the
// libraries of cur's servers that stay (all of cur's when none stays), as
// Client.SetShards gives them (the root's giveFunctions). On an error nothing is published.
func (d *driver) carryFunctions(ctx context.Context, cur registry.Config, doc []byte) error {
	if len(cur.Doc) == 0 {
		return nil
	}
	fromRing, err := d.docs.Parse(cur.Doc)
	if err != nil {
		return err
	}
	toRing, err := d.docs.Parse(doc)
	if err != nil {
		return err
	}
	from, to := fromRing.Servers, toRing.Servers
	var joining, staying []fleetseam.Server
	for _, s := range to {
		if fleetseam.ContainsID(from, s) {
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
	// On the driver's own connections (fleetseam.Root.GiveFunctions is
	// the root's giveFunctions, SetShards' carrying).
	if err := seam.Client(d.client).GiveFunctions(ctx, staying, joining); err != nil {
		return fmt.Errorf("redshard: apply: giving the joining servers the fleet's functions (nothing published): %w", err)
	}
	return nil
}
