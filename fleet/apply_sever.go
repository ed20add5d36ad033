package fleet

import (
	"context"
	"errors"
	"fmt"
	"github.com/redshard/redshard/internal/parallel"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/connname"
	"github.com/redshard/redshard/internal/fleetseam"
	"github.com/redshard/redshard/internal/rediserr"
	"github.com/redshard/redshard/registry"
)

// severRetry is how often the driver tries again to sever the connections
// of dropped members when a server did not answer.
const severRetry = 250 * time.Millisecond

// sever closes, on every server of prev's and next's rings, every command
// connection of a fleet member that has not acknowledged prev and is not
// joining: a member the fleet dropped (its lease expired, or it came back
// with an older acknowledgement than prev). It runs before next is
// published, the phase that no longer waits for such a member, so what
// such a member sends from then on reaches no server on a connection it
// opened before: a new one must pass the member's admission, which a
// dropped member's fails (internal/member's Admit). Members read just before the
// sever are spared, so a process that joined meanwhile keeps its
// connections; one that is joining has acknowledged nothing and read a
// config no older than prev (it joins before it reads). A member is
// spared by identity: its id and the incarnation its heartbeat carries,
// both in its connections' names (connname.Name), so a dropped process is cut
// off even when a live one reuses its id or has one that looks alike.
//
// A server that cannot be reached is tried again until ctx ends: a dropped
// member's connection to it could carry a write once it answers again.
func (d *driver) sever(ctx context.Context, prev, next registry.Config) error {
	if prev.Version() == (registry.Version{}) {
		return nil // nothing was published: nobody follows yet
	}
	shards, err := d.servers(prev, next)
	if err != nil {
		return err
	}
	for {
		err := d.severOnce(ctx, prev, shards)
		if err == nil {
			return nil
		}
		if rediserr.Is(err) {
			return fmt.Errorf("redshard: apply: severing dropped members' connections before %s: %w "+
				"(the driver needs CLIENT LIST and CLIENT KILL on every server: docs/membership.md, \"Fencing at the data\")", next.Version(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redshard: apply: severing dropped members' connections before %s: %w (%v)", next.Version(), context.Cause(ctx), err)
		case <-time.After(severRetry):
		}
	}
}

func (d *driver) severOnce(ctx context.Context, prev registry.Config, shards []fleetseam.Server) error {
	members, err := d.reg.Members(ctx)
	if err != nil {
		return fmt.Errorf("reading the members: %w", err)
	}
	keep := make(map[connname.Member]bool, len(members))
	for _, m := range members {
		if v := m.Version(); m.Incarnation != "" && (v == (registry.Version{}) || !v.Less(prev.Version())) {
			keep[connname.Member{ID: m.ID, Incarnation: m.Incarnation}] = true
		}
	}
	errs := make([]error, len(shards))
	killed := make([]int, len(shards))
	parallel.Run(len(shards), func(i int) {
		cl := d.dialer().Dial(shards[i])
		defer cl.Close()
		killed[i], errs[i] = severOn(ctx, cl, keep)
		if errs[i] != nil {
			errs[i] = fmt.Errorf("shard %s: %w", shards[i], errs[i])
		}
	})
	for _, n := range killed {
		d.severed += n
	}
	return errors.Join(errs...)
}

// dialer is the client the driver dials the servers with: its own client,
// or, before it has one (restore), one with its options and no registry.
func (d *driver) dialer() fleetseam.Root {
	if d.client != nil {
		return seam.Client(d.client)
	}
	return d.docs
}

// severOn kills, on cl's server, the fleet connections (those whose name
// starts with connname.Prefix) whose (member, incarnation) pair keep does
// not hold, and those whose name connname.Name cannot have made; it returns how
// many it killed.
func severOn(ctx context.Context, cl *redis.Client, keep map[connname.Member]bool) (int, error) {
	list, err := cl.ClientList(ctx).Result()
	if err != nil {
		return 0, err
	}
	var ids []string
	for line := range strings.Lines(list) {
		var id, name string
		for f := range strings.FieldsSeq(line) {
			switch {
			case strings.HasPrefix(f, "id="):
				id = f[len("id="):]
			case strings.HasPrefix(f, "name="):
				name = f[len("name="):]
			}
		}
		if id == "" || !strings.HasPrefix(name, connname.Prefix) {
			continue
		}
		if m, ok := connname.Parse(name); !ok || !keep[m] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	cmds, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.ClientKillByFilter(ctx, "ID", id)
		}
		return nil
	})
	n := 0
	for _, c := range cmds {
		if c.Err() == nil {
			n++
		}
	}
	// A connection that closed meanwhile is an error ("No such client"): gone either way.
	if err != nil && !rediserr.Is(err) {
		return n, err
	}
	return n, nil
}
