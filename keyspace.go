package redshard

import (
	"context"
	"github.com/redshard/redshard/internal/parallel"
	"math/rand/v2"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/registry"
)

// ownIndexes are the sets of redshard's own keys that DBSIZE leaves out.
var ownIndexes = []string{InternalIndexKey, registry.RedisIndexKey}

// The keyspace during a membership change. KEYS, SCAN, DBSIZE and
// RANDOMKEY read every server a key may be on: while a change is handed
// off (or, in a fleet, prepared here while another process migrates it:
// walkRings), a key that has not moved yet is still on its previous owner,
// possibly a server the change removed, and a moved one is on its new
// owner (for a moment on both, between settle and release). So, during a
// change, they walk the servers of both rings in two halves:
//
//  1. each server of the previous ring, for the keys that are on their
//     previous owner (or on a removed server: Rebalance will bring them)
//     and not yet on their new owner (an EXISTS there, per page);
//  2. then each server of the new ring, for the keys it holds that it did
//     not hold as their previous owner (those counted in the first half).
//
// With no move running meanwhile, every key counts exactly once. A key
// that moves while the walk runs is counted at least once: if it left its
// previous owner before the first half read it, it was on its new owner
// before the second half began. It may then count twice (in SCAN, as Redis
// allows; KEYS drops the repeat by name). A key whose copy on its previous
// owner was already settled on its new owner and deleted there (the moment
// between settle and release) is counted once, though GET would miss it.
// Outside a change the walk is the ring's shards, every key of each.

// visitRole says which keys of a server a walk counts there.
type visitRole uint8

const (
	visitAll visitRole = iota // no change: every key
	visitOld                  // first half: keys on their previous owner, not yet on their new one
	visitNew                  // second half: keys the server did not hold as their previous owner
)

// visit is one server of a keyspace walk.
type visit struct {
	s    *shard
	role visitRole
	// other is set when the server is in the other ring too: in the first
	// half, its keys that moved here are the second half's; in the second,
	// the keys it held as their previous owner were the first half's.
	other bool
}

// walkRings returns the two rings a keyspace walk of t reads during a
// change, previous then new; from is nil outside a change. A change is
// handed off (from is the handoff's previous ring, to is t) or, in a
// fleet, prepared: t still routes by the previous ring, but a process
// already in Migrate moves keys to the next one (hold.nextTop), so the
// walk reads both there too (docs/membership.md, property 6).
func (t *topology) walkRings() (from, to *topology) {
	if prev := t.previous(); prev != nil {
		return prev, t
	}
	if next := t.prepared(); next != nil {
		return t, next
	}
	return nil, t
}

// walkLen is the number of servers a keyspace walk of t visits.
func (t *topology) walkLen() int {
	if from, to := t.walkRings(); from != nil {
		return len(from.shards) + len(to.shards)
	}
	return len(t.shards)
}

// walkAt returns the i-th server of a keyspace walk of t, i < walkLen().
func (t *topology) walkAt(i int) visit {
	from, to := t.walkRings()
	if from == nil {
		return visit{s: t.shards[i], role: visitAll}
	}
	if i < len(from.shards) {
		s := from.shards[i]
		return visit{s: s, role: visitOld, other: hasBackend(to.shards, s.backend)}
	}
	s := to.shards[i-len(from.shards)]
	return visit{s: s, role: visitNew, other: hasBackend(from.shards, s.backend)}
}

func hasBackend(list []*shard, b *backend) bool {
	return slices.ContainsFunc(list, func(s *shard) bool { return s.backend == b })
}

// count keeps, in place, the keys of a page read on v that the walk
// counts there; redshard's own keys never count. In the first half of a
// change it asks the new owners of the moving keys whether they hold them
// already (one pipeline per owner).
func (t *topology) count(ctx context.Context, v visit, keys []string) ([]string, error) {
	keys = slices.DeleteFunc(keys, isInternalKey)
	from, to := t.walkRings()
	switch {
	case v.role == visitAll || len(keys) == 0:
		return keys, nil
	case v.role == visitNew:
		if !v.other {
			return keys, nil
		}
		return slices.DeleteFunc(keys, func(k string) bool {
			return from.shards[from.ring.LookupIndex(k)].backend == v.s.backend
		}), nil
	}
	// The first half: keep a key on its previous owner (any key, on a
	// removed server) unless its new owner already has it.
	var ask map[*shard][]string
	keys = slices.DeleteFunc(keys, func(k string) bool {
		if v.other && from.shards[from.ring.LookupIndex(k)].backend != v.s.backend {
			return true // not its previous owner: the second half counts it here
		}
		n := to.shards[to.ring.LookupIndex(k)]
		if n.backend == v.s.backend {
			return false
		}
		if ask == nil {
			ask = map[*shard][]string{}
		}
		ask[n] = append(ask[n], k)
		return false
	})
	if len(ask) == 0 {
		return keys, nil
	}
	there := map[string]bool{}
	for n, list := range ask {
		if n.down.Load() {
			return nil, n.downError()
		}
		cmds := make([]*redis.IntCmd, len(list))
		_, err := n.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range list {
				cmds[i] = p.Exists(ctx, k)
			}
			return nil
		})
		if err != nil {
			return nil, wrapShardErr(n.Shard, err)
		}
		for i, k := range list {
			if cmds[i].Val() == 1 {
				there[k] = true
			}
		}
	}
	return slices.DeleteFunc(keys, func(k string) bool { return there[k] }), nil
}

// keysDuringChange answers KEYS pattern during a change: KEYS on every
// server of the previous ring, then on every server of the new ring (one
// in both is asked twice, so that a key moving meanwhile is not missed),
// each counted as the walk counts, repeats dropped by name.
func (t *topology) keysDuringChange(ctx context.Context, pattern string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	from, _ := t.walkRings()
	for _, half := range [2]struct{ from, to int }{{0, len(from.shards)}, {len(from.shards), t.walkLen()}} {
		servers := make([]visit, half.to-half.from)
		for i := range servers {
			servers[i] = t.walkAt(half.from + i)
		}
		replies := make([][]string, len(servers))
		if err := askEach(servers, func(i int, v visit) error {
			keys, err := v.s.client.Keys(ctx, pattern).Result()
			if err != nil {
				return wrapShardErr(v.s.Shard, err)
			}
			replies[i], err = t.count(ctx, v, keys)
			return err
		}); err != nil {
			return nil, err
		}
		for _, keys := range replies {
			for _, k := range keys {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// askEach asks the servers of a keyspace walk at once (ask(i, servers[i])),
// a down one answering its downError instead, and returns the first error
// in the servers' order.
func askEach(servers []visit, ask func(i int, v visit) error) error {
	errs := make([]error, len(servers))
	parallel.Run(len(servers), func(i int) {
		if v := servers[i]; v.s.down.Load() {
			errs[i] = v.s.downError()
		} else {
			errs[i] = ask(i, v)
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// dbsizeScanCount is the COUNT of the SCAN that counts keys during a change.
const dbsizeScanCount = 1000

// dbsizeDuringChange answers DBSIZE during a change: the keys a full walk
// counts (see above), by SCAN. It costs a SCAN of every server (twice for
// one in both rings), O(keys) rather than DBSIZE's O(1), plus an EXISTS
// per key not yet moved; a membership change is when the exact count
// needs it, and it is the count only then.
func (t *topology) dbsizeDuringChange(ctx context.Context) (int64, error) {
	var n int64
	for i := range t.walkLen() {
		v := t.walkAt(i)
		if v.s.down.Load() {
			return 0, v.s.downError()
		}
		var cur uint64
		for {
			keys, next, err := v.s.client.Scan(ctx, cur, "", dbsizeScanCount).Result()
			if err != nil {
				return 0, wrapShardErr(v.s.Shard, err)
			}
			if keys, err = t.count(ctx, v, keys); err != nil {
				return 0, err
			}
			n += int64(len(keys))
			if cur = next; cur == 0 {
				break
			}
		}
	}
	return n, nil
}

// randomKeySources lists the shards RANDOMKEY may pick a key from, in a
// random order: during a change, the removed servers too, and in a fleet's
// Prepare the next ring's servers (a process in Migrate moves keys there).
func (t *topology) randomKeySources() []*shard {
	src := t.shards
	switch next := t.prepared(); {
	case t.previous() != nil:
		src = t.sources()
	case next != nil:
		src = slices.Clone(t.sources())
		for _, s := range next.shards {
			if !hasBackend(src, s.backend) {
				src = append(src, s)
			}
		}
	}
	out := make([]*shard, len(src))
	for i, j := range rand.Perm(len(src)) {
		out[i] = src[j]
	}
	return out
}

// dbsizeOwnScript is DBSIZE without redshard's own keys, outside a change:
// DBSIZE less the live keys of each index in KEYS (the internal keys'
// InternalIndexKey and the registries' registry.RedisIndexKey) and the
// indexes themselves. Entries whose key is gone are dropped. It costs the
// indexes' size, not a scan of the key space; a "redshard:" key in no
// index (its SADD failed, or written by hand) is counted.
const dbsizeOwnScript = `
local n = redis.call('DBSIZE')
for i = 1, #KEYS do
	if redis.call('EXISTS', KEYS[i]) == 1 then
		local own = 1
		for _, k in ipairs(redis.call('SMEMBERS', KEYS[i])) do
			if redis.call('EXISTS', k) == 1 then own = own + 1 else redis.call('SREM', KEYS[i], k) end
		end
		if redis.call('EXISTS', KEYS[i]) == 0 then own = own - 1 end
		n = n - own
	end
end
return n`
