package member

import (
	"context"
	"fmt"

	"github.com/redshard/redshard/internal/beacons"
	"github.com/redshard/redshard/registry"
)

// A registry may be behind the fleet at any time, whoever reads it: it can
// lose its data, or be restored from an older copy, while the servers'
// beacons and the live processes remember newer configs. A process that
// has acknowledged something newer sees it in its periodic read of the
// registry (Follower.poll); one that has not, a process that starts or
// catches up just then, would follow the old config as if it were current,
// its writes landing where the rest of the fleet never looks. So a process
// compares the config it is about to follow with the beacons of the
// servers it is about to use, when it starts and at every catch-up (the
// path that ends a fence), and follows it trusted only if every beacon was
// read and none is ahead of it (docs/membership.md, "What fencing at the
// data relies on"). Otherwise it is fenced: it serves the keys the beacons
// say no change moves away from the server it would use and refuses the
// rest, with ErrFenced and the reason (ErrRegistryBehind when a beacon is
// ahead), until a catch-up finds the registry and the beacons agree. It is
// never refused a start: a restore that an operator has yet to run (apply)
// stops only the keys it must. Once trusted, the command path pays nothing
// for this.

// beaconsAhead compares cfg, the registry's config a process follows or is
// about to follow, with the beacons of the servers of cfg's documents,
// reading them within ctx (and at most a quarter lease). It returns nil
// when every beacon was read and none is ahead of cfg; an error wrapping
// ErrRegistryBehind when one is (newer, or the same version of another
// config, and not just the phase a driver is about to publish after cfg);
// and another error when a server's beacon could not be read (a server
// that is down may hold the one that is ahead).
func (f *Follower) beaconsAhead(ctx context.Context, cfg registry.Config) error {
	ctx, cancel := context.WithTimeout(ctx, f.ttl/4)
	defer cancel()
	found, readErr := f.host.Beacons(ctx, cfg)
	for _, b := range found {
		if beacons.Behind(cfg, b.Config) && !beacons.NextPhase(cfg, b.Config) {
			return fmt.Errorf("%w: it holds %s (%s), but the beacon of shard %s says the fleet has followed %s (%s): it lost that config or was restored from an older copy; "+
				"this process is fenced until the registry holds it again (run redshard apply to restore it from the servers' beacons)",
				ErrRegistryBehind, cfg.Version(), beacons.OrNone(cfg.ID()), b.Server, b.Config.Version(), beacons.OrNone(b.Config.ID()))
		}
	}
	if readErr != nil {
		return fmt.Errorf("redshard: comparing the registry's %s with the servers' beacons, which say whether it is behind the fleet: %w; fenced until every beacon has been read", cfg.Version(), readErr)
	}
	return nil
}

// StartFence compares first, the config a starting process read, with the
// beacons (beaconsAhead) and returns the fence of the first topology: nil
// if they show first to be current; otherwise Status.Err says why.
func (f *Follower) StartFence(first registry.Config) *Fence {
	err := f.beaconsAhead(f.ctx, first)
	if err == nil {
		return nil
	}
	f.setErr(err)
	return &Fence{f: f, known: first.Version(), knownID: first.ID(), cache: &beaconCache{}, reason: err.Error(), cause: err}
}
