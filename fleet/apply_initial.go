package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/redshard/redshard/internal/parallel"
	"strings"

	"github.com/redshard/redshard"
)

// initialSample bounds how many keys apply's first-publish check reads
// from each server (SCAN, COUNT 100 a call).
const initialSample = 1000

// initialMisplacedMin is how many sampled keys must be misplaced for the
// check to refuse. Servers may hold a few keys of other applications
// (placed by no ring, so mostly "misplaced"), which a fleet keeps and
// never moves (examples/fleet's TestFollowKeepsOtherKeys); a data set
// written under another ring misplaces about half its keys or more, and
// is caught once it holds a few dozen keys.
const initialMisplacedMin = 16

// checkInitialPlacement runs before apply publishes doc as epoch 1 on an
// empty registry. The servers may already hold data, placed by another
// ring (another ring_recipe or vnodes_per_weight, or other shards): epoch
// 1 would then announce "no key moves" and the fleet would read most keys
// as missing. It samples up to initialSample keys of each of doc's servers
// (redshard's internal keys left out) and refuses, saying what to do, when
// at least initialMisplacedMin sampled keys are on a server doc's ring
// does not give them to. Servers whose data doc places are accepted, and
// so are empty ones and ones with a few other keys.
func (d *driver) checkInitialPlacement(ctx context.Context, doc json.RawMessage) error {
	r, err := d.docs.Parse(doc)
	if err != nil {
		return err
	}
	shards := r.Servers
	name := make(map[string]string, len(shards))
	for _, s := range shards {
		name[s.ID] = s.Name
	}
	type sample struct {
		keys, misplaced int
		example, owner  string
	}
	found := make([]sample, len(shards))
	errs := make([]error, len(shards))
	parallel.Run(len(shards), func(i int) {
		cl := d.docs.Dial(shards[i])
		defer cl.Close()
		me, f := shards[i].ID, &found[i]
		var cursor uint64
		for f.keys < initialSample {
			keys, next, err := cl.Scan(ctx, cursor, "", 100).Result()
			if err != nil {
				errs[i] = fmt.Errorf("shard %s: %w", shards[i], err)
				return
			}
			for _, k := range keys {
				if strings.HasPrefix(k, redshard.InternalKeyPrefix) {
					continue
				}
				f.keys++
				if o := r.Owner(k); o != me {
					f.misplaced++
					if f.example == "" {
						f.example, f.owner = k, name[o]
					}
				}
			}
			if next == 0 {
				return
			}
			cursor = next
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redshard: apply: the registry is empty; sampling the servers' keys before the first publish: %w", err)
	}
	var bad []string
	sampled, misplaced := 0, 0
	for i, f := range found {
		sampled += f.keys
		misplaced += f.misplaced
		if f.misplaced > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d of %d (%q belongs on %s)", shards[i].Name, f.misplaced, f.keys, f.example, f.owner))
		}
	}
	if misplaced < initialMisplacedMin {
		return nil
	}
	return fmt.Errorf("%w: the registry is empty and the servers already hold data that this document's ring does not place where it is: "+
		"%d of %d sampled keys are on another server than their owner (%s). Publishing it would read those keys as missing. "+
		"Apply first the document the data was placed by (the same shards, ring_recipe and vnodes_per_weight as the clients that wrote it), "+
		"then this one as a change, which moves the keys; or empty the servers of the keys if they are not the fleet's",
		redshard.ErrMisplacedData, misplaced, sampled, strings.Join(bad, "; "))
}
