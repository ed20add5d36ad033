package redshard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/beacons"
	"github.com/redshard/redshard/registry"
)

// A registry may be behind the fleet at any time, whoever reads it: it can
// lose its data, or be restored from an older copy, while the servers'
// beacons and the live processes remember newer configs. A process that
// has acknowledged something newer sees it in its periodic read of the
// registry (follower.poll); one that has not, a process that starts or
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
func (f *follower) beaconsAhead(ctx context.Context, cfg registry.Config) error {
	ctx, cancel := context.WithTimeout(ctx, f.ttl/4)
	defer cancel()
	found, readErr := readBeacons(ctx, &f.c.cfg.opt, cfg)
	for _, b := range found {
		if behind(cfg, b.Config) && !nextPhase(cfg, b.Config) {
			return fmt.Errorf("%w: it holds %s (%s), but the beacon of shard %s says the fleet has followed %s (%s): it lost that config or was restored from an older copy; "+
				"this process is fenced until the registry holds it again (run redshard apply to restore it from the servers' beacons)",
				ErrRegistryBehind, cfg.Version(), orNone(cfg.ID()), b.Server, b.Config.Version(), orNone(b.Config.ID()))
		}
	}
	if readErr != nil {
		return fmt.Errorf("redshard: comparing the registry's %s with the servers' beacons, which say whether it is behind the fleet: %w; fenced until every beacon has been read", cfg.Version(), readErr)
	}
	return nil
}

// fenceAtStart compares first, the config a starting process read, with
// the beacons (beaconsAhead) and fences top, its first topology, not yet
// published, if they do not show first to be current; FleetStatus.Err
// says why.
func (f *follower) fenceAtStart(top *topology, first registry.Config) {
	err := f.beaconsAhead(f.ctx, first)
	if err == nil {
		return
	}
	f.setErr(err)
	top.fence = &fence{f: f, known: first.Version(), knownID: first.ID(), rc: f.c.cfg.opt.ringConfig(),
		cache: &beaconCache{}, reason: err.Error(), cause: err}
}

// registryBehind reports whether err says the registry is behind.
func registryBehind(err error) bool { return errors.Is(err, ErrRegistryBehind) }

// beaconConfig is what one server's beacon says.
type beaconConfig = beacons.Found[Shard]

// readBeacons reads the beacon of every server of the configs' documents,
// each on a connection of its own made with o's connection settings (and
// no fleet admission), within ctx. It returns the beacons it read (a
// server with none is left out) and, joined, the errors of the servers it
// could not read.
func readBeacons(ctx context.Context, o *Options, cfgs ...registry.Config) ([]beaconConfig, error) {
	shards, err := configServers(o, cfgs...)
	if err != nil {
		return nil, err
	}
	dialer := &client{cfg: &config{opt: *o}}
	dialer.cfg.opt.Registry = nil
	return beacons.Read(ctx, shards, func(s Shard) *redis.Client { return dialer.dial(s, connCommand, nil) })
}

// configServers lists, once each by identity, the servers of the configs'
// documents, with o's connection settings.
func configServers(o *Options, cfgs ...registry.Config) ([]Shard, error) {
	rc := o.ringConfig()
	var shards []Shard
	for _, cfg := range cfgs {
		for _, doc := range []json.RawMessage{cfg.Doc, cfg.PrevDoc} {
			if len(doc) == 0 {
				continue
			}
			s, _, err := parseRingDoc(doc, rc)
			if err != nil {
				return nil, err
			}
			for _, sh := range o.withConnection(s) {
				if !containsIdentity(shards, sh) {
					shards = append(shards, sh)
				}
			}
		}
	}
	return shards, nil
}

// nextPhase reports whether b, a beacon, is the config a driver publishes
// next after cur, what the registry holds (registry.CheckTransition; not a
// restore, and not the first config of an empty registry).
func nextPhase(cur, b registry.Config) bool { return beacons.NextPhase(cur, b) }

// containsIdentity reports whether list holds a server with s's identity
// (its address, or its Sentinel master).
func containsIdentity(list []Shard, s Shard) bool {
	for _, o := range list {
		if o.identity() == s.identity() {
			return true
		}
	}
	return false
}
