package beacons

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/redshard/redshard/internal/parallel"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/registry"
)

const (
	// Key holds, on every server of a change, the registry config the
	// driver last published (JSON). It is one of redshard's internal keys
	// (the root's InternalKeyPrefix + "beacon").
	Key = "redshard:beacon"
	// Fresh is how long a fenced process trusts a beacon it read; a
	// driver waits twice as long after writing beacons before it lets
	// keys move (fleet.Apply).
	Fresh = 250 * time.Millisecond
)

// Found is what one server's beacon says.
type Found[S any] struct {
	Server S
	Config registry.Config
}

// Read reads the beacon of every server, each on a client of its own
// that dial returns (and Read closes), within ctx. It returns the beacons
// it read (a server with none is left out), in the order of servers, and,
// joined, the errors of the servers it could not read.
func Read[S fmt.Stringer](ctx context.Context, servers []S, dial func(S) *redis.Client) ([]Found[S], error) {
	out := make([]*Found[S], len(servers))
	errs := make([]error, len(servers))
	parallel.Run(len(servers), func(i int) {
		cl := dial(servers[i])
		defer cl.Close()
		data, err := cl.Get(ctx, Key).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			errs[i] = fmt.Errorf("shard %s: %w", servers[i], err)
		default:
			var cfg registry.Config
			if err := json.Unmarshal(data, &cfg); err != nil {
				errs[i] = fmt.Errorf("shard %s: beacon: %w", servers[i], err)
				return
			}
			out[i] = &Found[S]{servers[i], cfg}
		}
	})
	var list []Found[S]
	for _, b := range out {
		if b != nil {
			list = append(list, *b)
		}
	}
	return list, errors.Join(errs...)
}

// NextPhase reports whether b, a beacon, is the config a driver publishes
// next after cur, what the registry holds (registry.CheckTransition; not a
// restore, and not the first config of an empty registry).
func NextPhase(cur, b registry.Config) bool {
	return cur.Version() != (registry.Version{}) && b.Restored == "" && registry.CheckTransition(cur, b) == nil
}

// Behind reports whether the registry's cfg is behind applied, what a
// client follows (or a beacon holds): older, or the same version of
// another config.
func Behind(cfg, applied registry.Config) bool {
	if cfg.Version().Less(applied.Version()) {
		return true
	}
	return cfg.Version() == applied.Version() && cfg.ID() != applied.ID()
}

// OrNone is how the fleet's messages print a config's ID: "none" for the
// empty registry's.
func OrNone(id string) string {
	if id == "" {
		return "none"
	}
	return id
}
