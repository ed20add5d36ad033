package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/beacons"
	"github.com/redshard/redshard/internal/fleetseam"
	"github.com/redshard/redshard/registry"
)

// A registry can forget: FLUSHALL, a restart without persistence, a
// failover to an empty replica, an etcd restored from an old snapshot.
// The fleet has not forgotten: every server of the rings holds the beacon
// of the last phase published (writeBeacons) and every live member reports
// the config it acknowledged (registry.Member.Config). Before it publishes
// anything, the driver compares the registry with both, and if the
// registry is behind it publishes, over what the registry holds, the
// config the fleet last followed (registry.Restore), then goes on from
// there as from any config. docs/membership.md, "A registry that forgets".

// restore checks cur, what the registry holds, against the beacons of the
// servers of cur's documents and of doc, and against the live members; it
// returns the config to go on from: cur, or the restored config it
// published over cur.
func (d *driver) restore(ctx context.Context, cur registry.Config, doc json.RawMessage) (registry.Config, error) {
	lost, how, err := d.lost(ctx, cur, doc)
	if err != nil || how == "" {
		return cur, err
	}
	restored := registry.Restore(lost, how)
	// lost's beacons go on the servers before lost is published (run), so
	// lost may never have been published, nor the sever before it run:
	// sever as its publish would have (members that acknowledged the
	// phase before it, or are joining, are spared).
	prev := before(lost.Version())
	if err := d.sever(ctx, registry.Config{Epoch: prev.Epoch, Phase: prev.Phase}, lost); err != nil {
		return cur, err
	}
	if err := d.reg.Publish(ctx, cur, restored); err != nil {
		return cur, fmt.Errorf("redshard: apply: restoring the registry to %s: %w", lost.Version(), err)
	}
	d.rep.Restored = how
	return restored, nil
}

// RegistryBehind reports whether Apply of doc would first restore the
// registry: ok is set, with the config the fleet follows (lost, read
// back from the servers' beacons), when the registry holds an older config
// than the fleet, or none. It changes nothing. It fails with
// redshard.ErrRegistryBehind when the registry is behind but cannot be restored
// from what the servers and the members say.
func RegistryBehind(ctx context.Context, reg registry.Registry, doc json.RawMessage, opt *redshard.Options) (lost registry.Config, ok bool, err error) {
	d := &driver{reg: reg, rep: &ApplyReport{}}
	if opt != nil {
		d.base = *opt
	}
	d.docs = seam.Options(&d.base)
	cur, err := reg.Get(ctx)
	if err != nil {
		return registry.Config{}, false, fmt.Errorf("redshard: reading the registry: %w", err)
	}
	lost, how, err := d.lost(ctx, cur, doc)
	return lost, err == nil && how != "", err
}

// lost returns the config the fleet follows when the registry, holding
// cur, is behind it, with an account of how it was found; how is empty
// when the registry is not behind.
func (d *driver) lost(ctx context.Context, cur registry.Config, doc json.RawMessage) (lost registry.Config, how string, err error) {
	found, err := d.readBeacons(ctx, cur, registry.Config{Doc: doc})
	if err != nil {
		return lost, "", err
	}
	members, err := d.reg.Members(ctx)
	if err != nil {
		return lost, "", fmt.Errorf("redshard: apply: reading the members: %w", err)
	}
	var top *beacons.Found[fleetseam.Server]
	for i := range found {
		b := &found[i]
		switch {
		case top == nil || top.Config.Version().Less(b.Config.Version()):
			top = b
		case top.Config.Version() == b.Config.Version() && top.Config.ID() != b.Config.ID():
			return lost, "", fmt.Errorf("%w: the beacons of %s and %s name two configs at %s (%s and %s); the servers belong to two fleets, or a registry that lost its data was given a new config: resolve it by hand (docs/operations.md)",
				redshard.ErrRegistryBehind, top.Server, b.Server, b.Config.Version(), top.Config.ID(), b.Config.ID())
		}
	}
	// A driver writes each phase's beacons just before it publishes the
	// phase, and may have stopped in between: beacons one legal step ahead
	// of the registry, of a config no member reports, are not a loss (run
	// goes on from cur and publishes that phase itself, sever first). A
	// member that reports it shows it was published: a loss.
	pending := top != nil && beacons.NextPhase(cur, top.Config) && !reported(members, top.Config)
	if top == nil || pending || !beacons.Behind(cur, top.Config) {
		if _, astray := registry.AckedConfig(members, cur); len(astray) > 0 {
			return lost, "", fmt.Errorf("%w: it holds %s, but member %s reports %s (%s) and no server's beacon holds that config: it cannot be restored from them",
				redshard.ErrRegistryBehind, cur.Version(), astray[0].ID, astray[0].Version(), beacons.OrNone(astray[0].Config))
		}
		return lost, "", nil
	}
	lost = top.Config
	for _, m := range members {
		if lost.Version().Less(m.Version()) {
			return registry.Config{}, "", fmt.Errorf("%w: member %s reports %s, newer than every beacon (%s on %s): not restoring",
				redshard.ErrRegistryBehind, m.ID, m.Version(), lost.Version(), top.Server)
		}
	}
	if !cur.Version().Less(lost.Version()) {
		return registry.Config{}, "", fmt.Errorf("%w: it holds %s (%s), and the servers' beacons hold %s of another config (%s); resolve it by hand (docs/operations.md)",
			redshard.ErrRegistryBehind, cur.Version(), beacons.OrNone(cur.ID()), lost.Version(), lost.ID())
	}
	how = fmt.Sprintf("the registry held %s; restored %s from the beacons of %d servers (the newest on %s) and %d live members",
		cur.Version(), lost.Version(), len(found), top.Server, len(members))
	return lost, how, nil
}

// readBeacons reads the beacon of every server of the configs' documents.
// A server that cannot be read fails the call: the config it holds could
// be the newest.
func (d *driver) readBeacons(ctx context.Context, cfgs ...registry.Config) ([]beacons.Found[fleetseam.Server], error) {
	servers, err := d.servers(cfgs...)
	if err != nil {
		return nil, err
	}
	list, err := beacons.Read(ctx, servers, d.docs.Dial)
	if err != nil {
		return nil, fmt.Errorf("redshard: apply: reading the servers' beacons: %w", err)
	}
	return list, nil
}

// reported reports whether a member acknowledged cfg.
func reported(members []registry.Member, cfg registry.Config) bool {
	for _, m := range members {
		if m.Version() == cfg.Version() && m.Config == cfg.ID() {
			return true
		}
	}
	return false
}

// before is the version of the phase a driver publishes before a phase at
// v: for Stable, Commit (a Stable after an abort or the first one has no
// Commit before it; Commit is the later bound, so a sever that spares
// members from it on spares too few rather than too many).
func before(v registry.Version) registry.Version {
	switch v.Phase {
	case registry.Prepare:
		return registry.Version{Epoch: v.Epoch - 1, Phase: registry.Stable}
	case registry.Migrate:
		return registry.Version{Epoch: v.Epoch, Phase: registry.Prepare}
	case registry.Commit:
		return registry.Version{Epoch: v.Epoch, Phase: registry.Migrate}
	}
	return registry.Version{Epoch: v.Epoch, Phase: registry.Commit}
}

// astrayError is what awaitAcks returns for members that report a config
// the registry does not hold.
func astrayError(cfg registry.Config, astray []registry.Member) error {
	var b strings.Builder
	for i, m := range astray {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s on %s (%s)", m.ID, m.Version(), beacons.OrNone(m.Config))
	}
	return fmt.Errorf("%w: it holds %s (%s) but members report another config: %s; run apply again to restore it from the servers' beacons",
		redshard.ErrRegistryBehind, cfg.Version(), beacons.OrNone(cfg.ID()), b.String())
}
