package redshard

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
)

// mget answers the hot keys of an MGET with LocalCache as a GET of each
// would be answered (from the cache, or by one shared read of the key that
// fills it) and sends an MGET of the other keys only. It reports whether it
// carried the command out; when it did not (no hot key, not LocalCache, a
// change being handed off, a reply type it cannot fill), the MGET goes its
// usual way. The cached replies are those of GET: a write through the client
// evicts them before it returns, so read-your-writes and MaxStaleness hold
// exactly as for single reads.
func (h *hotPath) mget(ctx context.Context, c *Client, top *topology, cmd redis.Cmder, keys []int) (bool, error) {
	sc, ok := cmd.(*redis.SliceCmd)
	if !ok || h.cache == nil || top.guarded || len(keys) < 2 {
		return false, nil
	}
	args := cmd.Args()
	var hot []int // positions in keys of hot keys on shards that are up
	for j, k := range keys {
		key := command.Arg(args[k])
		// A hot key on a down shard is sent with the rest: the down
		// shard's error, or its stand-in.
		if h.det.IsHot(key) && !top.shards[top.ring.LookupIndex(key)].down.Load() {
			hot = append(hot, j)
		}
	}
	if len(hot) == 0 {
		return false, nil // also for the rest below: it goes its usual way
	}
	vals := make([]interface{}, len(keys))
	isHot := make([]bool, len(keys))
	var misses []*redis.StringCmd
	var missAt []int
	var missShard []*shard
	for _, j := range hot {
		key := command.Arg(args[keys[j]])
		s := top.shards[top.ring.LookupIndex(key)]
		isHot[j] = true
		h.det.Observe(key)
		get := redis.NewStringCmd(ctx, "get", key)
		if h.hit(s.hotState(), key, subKey(replyKind(get), get.Args()), get) {
			vals[j] = mgetValue(get)
			continue
		}
		misses, missAt, missShard = append(misses, get), append(missAt, j), append(missShard, s)
	}
	var rest *redis.SliceCmd
	if hasCold(isHot) {
		restArgs := make([]interface{}, 1, 1+len(keys)-len(hot))
		restArgs[0] = args[0]
		for j, k := range keys {
			if !isHot[j] {
				restArgs = append(restArgs, args[k])
			}
		}
		rest = redis.NewSliceCmd(ctx, restArgs...)
	}
	n := len(misses)
	if rest != nil {
		n++
	}
	parallel(n, func(i int) {
		if i < len(misses) {
			_ = h.cachedRead(ctx, top, missShard[i], misses[i].Args()[1].(string), misses[i])
			return
		}
		// On top, which the caller counts in flight: entering again could
		// route it on a newer ring whose first move waits for this very
		// command. Its error is stored here, as go-redis would.
		info, restKeys, err := command.Lookup(rest.Args(), nil)
		if err == nil {
			err = c.routeOther(ctx, top, rest, info, restKeys, nil, false)
		}
		if err != nil && rest.Err() == nil {
			rest.SetErr(err)
		}
	})
	for i, get := range misses {
		if err := get.Err(); err != nil && err != redis.Nil && !isWrongType(err) {
			cmd.SetErr(err)
			return true, err
		}
		vals[missAt[i]] = mgetValue(get)
	}
	if rest != nil {
		if err := rest.Err(); err != nil {
			cmd.SetErr(err)
			return true, err
		}
		rv, j := rest.Val(), 0
		for p := range vals {
			if !isHot[p] {
				if j < len(rv) {
					vals[p] = rv[j]
				}
				j++
			}
		}
	}
	sc.SetVal(vals)
	return true, nil
}

// hasCold reports whether some key is not served as hot.
func hasCold(isHot []bool) bool {
	for _, h := range isHot {
		if !h {
			return true
		}
	}
	return false
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
