package hot

import (
	"context"
	"errors"
	"github.com/redshard/redshard/internal/parallel"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
)

// MGet answers the hot keys of an MGET with LocalCache as a GET of each
// would be answered (from the cache, or by one shared read of the key that
// fills it) and sends an MGET of the other keys only. It reports whether it
// carried the command out; when it did not (no hot key, not LocalCache, a
// change being handed off, a reply type it cannot fill), the MGET goes its
// usual way. The cached replies are those of GET: a write through the client
// evicts them before it returns, so read-your-writes and MaxStaleness hold
// exactly as for single reads.
func (h *Path) MGet(ctx context.Context, top Topology, cmd redis.Cmder, keys []int) (bool, error) {
	sc, ok := cmd.(*redis.SliceCmd)
	if !ok || h.cache == nil || top.Guarded() || len(keys) < 2 {
		return false, nil
	}
	args := cmd.Args()
	// One pass finds the hot keys and their shards; each key is hashed for
	// the ring once, and a hit costs a cache lookup, no command.
	var buf [16]mgetHot
	hot := buf[:0]
	for j, k := range keys {
		key := command.Arg(args[k])
		if !h.det.IsHot(key) {
			continue
		}
		// A hot key on a down shard is sent with the rest: the down
		// shard's error, or its stand-in.
		if s := top.Shard(top.Owner(key)); !s.Down() {
			hot = append(hot, mgetHot{j: j, key: key, s: s})
		}
	}
	if len(hot) == 0 {
		return false, nil // also for the rest below: it goes its usual way
	}
	vals := make([]interface{}, len(keys))
	var misses []int // positions in hot of the keys the cache missed
	for i := range hot {
		m := &hot[i]
		h.det.ObserveHot(m.key) // found hot above: counted without a lock
		m.hs = m.s.HotState()
		if r, ok := h.lookup(m.hs, m.key, getSubKey); ok {
			vals[m.j] = r.mgetValue()
			continue
		}
		misses = append(misses, i)
	}
	if len(misses) == 0 && len(hot) == len(keys) {
		sc.SetVal(vals)
		return true, nil
	}
	return true, h.mgetRest(ctx, top, sc, keys, vals, slices.Clone(hot), misses)
}

// mgetRest finishes a hot MGET whose cache lookups are done: it reads the
// misses (positions in hot) and sends the keys that are not hot as one
// MGET, in parallel.
func (h *Path) mgetRest(ctx context.Context, top Topology, sc *redis.SliceCmd,
	keys []int, vals []interface{}, hot []mgetHot, misses []int) error {
	args := sc.Args()
	var rest *redis.SliceCmd
	if len(hot) < len(keys) {
		restArgs := make([]interface{}, 1, 1+len(keys)-len(hot))
		restArgs[0] = args[0]
		next := 0 // the next hot key, in keys' order
		for j, k := range keys {
			if next < len(hot) && hot[next].j == j {
				next++
				continue
			}
			restArgs = append(restArgs, args[k])
		}
		rest = redis.NewSliceCmd(ctx, restArgs...)
	}
	n := len(misses)
	if rest != nil {
		n++
	}
	gets := make([]*redis.StringCmd, len(misses))
	parallel.Run(n, func(i int) {
		if i < len(misses) {
			m := &hot[misses[i]]
			gets[i] = redis.NewStringCmd(ctx, "get", m.key)
			_ = h.missedRead(ctx, top, m.s, m.hs, m.key, getSubKey, gets[i])
			return
		}
		// On top, which the caller counts in flight: entering again could
		// route it on a newer ring whose first move waits for this very
		// command. Its error is stored here, as go-redis would.
		if err := h.env.Route(ctx, top, rest); err != nil && rest.Err() == nil {
			rest.SetErr(err)
		}
	})
	for i, get := range gets {
		if err := get.Err(); err != nil && err != redis.Nil && !isWrongType(err) {
			sc.SetErr(err)
			return err
		}
		vals[hot[misses[i]].j] = mgetValue(get)
	}
	if rest != nil {
		if err := rest.Err(); err != nil {
			sc.SetErr(err)
			return err
		}
		rv, j, next := rest.Val(), 0, 0
		for p := range vals {
			if next < len(hot) && hot[next].j == p {
				next++
				continue
			}
			if j < len(rv) {
				vals[p] = rv[j]
			}
			j++
		}
	}
	sc.SetVal(vals)
	return nil
}

// mgetHot is a hot key of an MGET: its position in the keys, its owner.
type mgetHot struct {
	j   int
	key string
	s   Backend
	hs  *Shard
}

// mgetValue is what MGET replies for a key whose GET reply is r: the
// string, or nil for a missing key.
func (r *reply) mgetValue() interface{} {
	if r.err != nil {
		return nil
	}
	return r.val // a string, which needs no copy
}

// mgetValue is what MGET replies for a key whose GET gave get: the string,
// or nil for a missing key or one that holds another type.
func mgetValue(get *redis.StringCmd) interface{} {
	if get.Err() != nil {
		return nil
	}
	return get.Val()
}

// isWrongType reports whether err is the server's WRONGTYPE error, which
// GET gives for a key MGET reports as nil.
func isWrongType(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(err.Error(), "WRONGTYPE")
}
