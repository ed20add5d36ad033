package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/registry"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("status", "--registry URL [--registry-timeout D]", `
Status prints what a fleet's registry holds: the current config (its epoch,
its phase, the change in flight with its id, driver and start, and the
shards with their weights; during a change, what the change does to each
shard), and every live process of the fleet (the members heartbeating into
the registry: id, host, pid, the epoch and phase it has acknowledged,
whether it has fenced itself, and how long ago its last heartbeat was sent,
by its own clock). A process not yet on the current phase is marked late:
the change waits for it (redshard apply shows the same).

The URL is redis://host:port/NAME (the password, if any, comes from
$REDSHARD_REGISTRY_PASSWORD) or etcd://host:port/PREFIX. A registry that
does not answer within --registry-timeout (5s) is an error naming it.`)
	regFlag := registryFlag(f)
	regTimeout := registryTimeoutFlag(f)
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	u, err := registryArg(*regFlag)
	if err != nil {
		return err
	}
	if err := registryTimeoutArg(*regTimeout); err != nil {
		return err
	}
	reg, closeReg, err := openRegistry(u, stderr)
	if err != nil {
		return err
	}
	defer closeReg()
	rctx, cancel := context.WithTimeout(ctx, *regTimeout)
	defer cancel()
	cfg, err := reg.Get(rctx)
	if err != nil {
		return registryErr(rctx, u, *regTimeout, "reading the config", err)
	}
	members, err := reg.Members(rctx)
	if err != nil {
		return registryErr(rctx, u, *regTimeout, "reading the members", err)
	}
	return writeStatus(stdout, u, cfg, members, time.Now())
}

// writeStatus prints a registry's config and members as of now.
func writeStatus(w io.Writer, u registryURL, cfg registry.Config, members []registry.Member, now time.Time) error {
	fmt.Fprintf(w, "registry: %s\n", u)
	late, astray := registry.AckedConfig(members, cfg)
	switch {
	case cfg.Version() == (registry.Version{}) && len(astray) > 0:
		fmt.Fprintln(w, "config:   none, yet live processes follow one: the registry lost its data (redshard apply restores it from the servers' beacons)")
	case cfg.Version() == (registry.Version{}):
		fmt.Fprintln(w, "config:   none published yet (redshard apply --config FILE publishes the first, as epoch 1)")
	default:
		shards, pl, err := decodeRingDoc(cfg.Doc)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "config:   epoch %d, %s", cfg.Epoch, cfg.Phase)
		if cfg.InFlight() {
			fmt.Fprintf(w, " (a change is in flight: %s)", phaseMeaning(cfg.Phase))
		}
		fmt.Fprintln(w)
		if cfg.InFlight() {
			fmt.Fprintf(w, "change:   %s, from epoch %d, driven by %s\n", cfg.Change, cfg.PrevEpoch, cfg.Driver)
		}
		if !cfg.Since.IsZero() {
			fmt.Fprintf(w, "since:    %s (%s ago)\n", cfg.Since.UTC().Format(time.RFC3339), age(now.Sub(cfg.Since)))
		}
		fmt.Fprintf(w, "ring:     %d shards, %s\n\n", len(shards), pl)
		var prev []redshard.Shard
		if cfg.InFlight() {
			if prev, _, err = decodeRingDoc(cfg.PrevDoc); err != nil {
				return err
			}
		}
		writeShardChanges(w, prev, shards, cfg.InFlight())
	}

	fmt.Fprintln(w)
	n := fmt.Sprintf("%d live %s", len(members), plural(len(members), "process", "processes"))
	switch {
	case len(members) == 0:
		fmt.Fprintln(w, "no live process (none has sent a heartbeat within its member TTL)")
		return nil
	case len(astray) > 0:
		fmt.Fprintf(w, "%s, %d AHEAD OF THE REGISTRY (on a config it does not hold: it lost its data or was restored from an older copy; redshard apply restores it from the servers' beacons), %d late\n",
			n, len(astray), len(late))
	case len(late) == 0:
		fmt.Fprintf(w, "%s, all on %s\n", n, cfg.Version())
	default:
		fmt.Fprintf(w, "%s, %d late (not yet on %s)\n", n, len(late), cfg.Version())
	}
	t := &table{align: "llrrlll"}
	t.add("id", "host", "pid", "epoch", "phase", "fenced", "heartbeat", "")
	for _, m := range members {
		mark := ""
		isMember := func(l registry.Member) bool { return l.ID == m.ID }
		switch {
		case slices.ContainsFunc(late, isMember):
			mark = "late"
		case slices.ContainsFunc(astray, isMember):
			mark = "AHEAD"
		}
		fenced := "no"
		if m.Fenced {
			fenced = "FENCED"
		}
		seen := "-"
		if !m.Seen.IsZero() {
			seen = age(now.Sub(m.Seen)) + " ago"
		}
		pid := "-"
		if m.PID != 0 {
			pid = fmt.Sprint(m.PID)
		}
		phase := string(m.Phase)
		if phase == "" {
			phase = "-"
		}
		t.add(m.ID, m.Host, pid, fmt.Sprint(m.Epoch), phase, fenced, seen, mark)
	}
	t.write(w)
	return nil
}

// writeShardChanges prints the shards of a config; during a change (prev
// set), with what the change does to each, the removed ones included.
func writeShardChanges(w io.Writer, prev, next []redshard.Shard, inFlight bool) {
	t := &table{align: "llrl"}
	if inFlight {
		t.add("shard", "addr", "weight", "change")
	} else {
		t.add("shard", "addr", "weight")
	}
	all := sortedShards(append(slices.Clone(next), prev...))
	seen := map[string]bool{}
	find := func(list []redshard.Shard, name string) (redshard.Shard, bool) {
		i := slices.IndexFunc(list, func(s redshard.Shard) bool { return s.Name == name })
		if i < 0 {
			return redshard.Shard{}, false
		}
		return list[i], true
	}
	for _, s := range all {
		if seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		n, inNext := find(next, s.Name)
		if !inFlight {
			t.add(n.Name, where(n), fmt.Sprintf("%g", weightOf(n)))
			continue
		}
		p, inPrev := find(prev, s.Name)
		switch {
		case !inPrev:
			t.add(n.Name, where(n), fmt.Sprintf("%g", weightOf(n)), "added")
		case !inNext:
			t.add(p.Name, where(p), fmt.Sprintf("%g", weightOf(p)), "removed")
		default:
			what := ""
			if weightOf(p) != weightOf(n) {
				what = fmt.Sprintf("weight %g -> %g", weightOf(p), weightOf(n))
			}
			if c := whereChange(p, n); c != "" {
				if what != "" {
					what += ", "
				}
				what += c
			}
			t.add(n.Name, where(n), fmt.Sprintf("%g", weightOf(n)), what)
		}
	}
	t.write(w)
}

// phaseMeaning says in a few words what a phase of a change does.
func phaseMeaning(p registry.Phase) string {
	switch p {
	case registry.Prepare:
		return "processes learn the new ring, keys stay where they are"
	case registry.Migrate:
		return "moved keys are handed over, Rebalance moves the rest"
	case registry.Commit:
		return "every key has moved, the previous owners are being released"
	}
	return string(p)
}

// age rounds a duration for display: 3ms, 450ms, 4.2s, 12s, 3m10s.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
