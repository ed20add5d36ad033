package redshard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Moving a key from its previous owner P to its new owner N, the one step
// that handoff and Rebalance share (docs/membership.md states the protocol
// and why it holds):
//
//  1. take: on P, DUMP and PTTL in one script. P keeps the key.
//  2. settle: on N, one script: if the change's settled set already names
//     the key, refuse (someone moved it in this change, and what N holds or
//     lacks since is newer: a stale copy must not come back); else add the
//     key to the set, and RESTORE the value unless N already has the key
//     (written on N in this change, so newer).
//  3. release: on P, delete the key if it still holds what was taken (a
//     compare-and-delete); if it changed, something wrote to P after the
//     change began and the key is reported as failed, never deleted.
//
// A key taken by two movers is settled by the first; the second is
// refused in step 2 and its step 3 deletes nothing new. Since the settled
// set is on N and the refusal is atomic there, this holds for movers in
// different processes too.

// settledPrefix names the settled set of a change on each new owner:
// settledPrefix + change id. It is one of redshard's internal keys.
const settledPrefix = "redshard:settled:"

// settledTTL is a backstop: a settled set outlives an abandoned change by
// at most this long. A completed change deletes its sets.
const settledTTL = 7 * 24 * time.Hour

// InternalKeyPrefix starts the name of every key redshard stores for
// itself: split copies of hot keys, GetOrLoad leases, and the settled sets
// of membership changes. Such keys are hidden from KEYS, SCAN and RANDOMKEY
// through the client, never moved by Rebalance as user data, and expire or
// are deleted on their own. Do not use keys with this prefix for data.
const InternalKeyPrefix = "redshard:"

// isInternalKey reports whether key is one of redshard's own.
func isInternalKey(key string) bool { return strings.HasPrefix(key, InternalKeyPrefix) }

// InternalIndexKey names a set, on each server, of the internal keys
// redshard created there: DBSIZE through the client subtracts those still
// alive, at the cost of the index's size rather than a scan of the key
// space. A key that misses the index (its SADD failed) is counted by
// DBSIZE until it expires. A tool that deletes internal keys should remove
// them from the index too.
const InternalIndexKey = InternalKeyPrefix + "index"

const internalIndex = InternalIndexKey

// indexInternal records an internal key in its server's index; cmd is the
// command that creates it, sent in the same pipeline. The index expires a
// while after the last key was added (its members expire long before).
func indexInternal(ctx context.Context, cl *redis.Client, cmd redis.Cmder, key string) error {
	_, _ = cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		_ = p.Process(ctx, cmd)
		p.SAdd(ctx, internalIndex, key)
		p.PExpire(ctx, internalIndex, settledTTL)
		return nil
	})
	return cmd.Err()
}

// deleteInternal deletes an internal key and its index entry.
func deleteInternal(ctx context.Context, cl *redis.Client, key string) error {
	_, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.SRem(ctx, internalIndex, key)
		return nil
	})
	return err
}

var (
	// takeScript returns a key's DUMP and PTTL, or false when it is absent.
	takeScript = redis.NewScript(`
local d = redis.call('DUMP', KEYS[1])
if not d then return false end
return {d, redis.call('PTTL', KEYS[1])}`)

	// settleScript: KEYS = key, settled set, index; ARGV = ttl ms (0: none), dump,
	// set ttl ms. Returns 0 restored, 1 kept the newer value on N, 2 refused
	// (already settled in this change).
	settleScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[2], KEYS[1]) == 1 then return 2 end
local kept = 1
if redis.call('EXISTS', KEYS[1]) == 0 then
	local r = redis.pcall('RESTORE', KEYS[1], ARGV[1], ARGV[2])
	if type(r) == 'table' and r.err then return r end
	kept = 0
end
if redis.call('HSET', KEYS[2], KEYS[1], '1') == 1 and redis.call('PTTL', KEYS[2]) < 0 then
	redis.call('PEXPIRE', KEYS[2], ARGV[3])
	redis.call('SADD', KEYS[3], KEYS[2])
	redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return kept`)

	// settleAbsentScript marks a key settled on N without a value: its
	// previous owner is lost (failover), so whatever it held must never be
	// moved here later. KEYS = key, settled set; ARGV = set ttl ms.
	settleAbsentScript = redis.NewScript(`
if redis.call('HSET', KEYS[2], KEYS[1], '1') == 1 and redis.call('PTTL', KEYS[2]) < 0 then
	redis.call('PEXPIRE', KEYS[2], ARGV[1])
	redis.call('SADD', KEYS[3], KEYS[2])
	redis.call('PEXPIRE', KEYS[3], ARGV[1])
end
return 0`)

	// casDelete deletes a key only if it still holds the serialized value
	// that was taken, so a write that reached the old owner meanwhile is
	// not lost. It returns 1 when it deleted the key, 0 when the key is
	// gone (another mover released it), -1 when the key holds another
	// value.
	casDelete = redis.NewScript(`
local d = redis.call('DUMP', KEYS[1])
if not d then return 0 end
if d == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return -1`)
)

// migration is what happened to one key.
type migration struct {
	moved   bool  // restored on the new owner (or a newer value was already there) and deleted from the old
	absent  bool  // not on the previous owner (never was, expired, or already moved)
	settled bool  // another mover had settled it; the old copy was released
	bytes   int   // size of the serialized value
	err     error // the key stays where it was
}

// moveKeys moves keys from one server to their owners under the protocol
// above, pipelined: take on from; settle on each owner (grouped); release
// on from. A key whose step fails keeps its old copy and has err set. The
// error is for the batch as a whole (from unreachable).
func moveKeys(ctx context.Context, from *redis.Client, keys []string, settled string, owner func(string) *redis.Client) ([]migration, error) {
	res := make([]migration, len(keys))
	takes := runScript(ctx, from, takeScript, len(keys), func(i int) ([]string, []any) {
		return []string{keys[i]}, nil
	})
	if len(keys) == 0 {
		return res, nil
	}
	if err := takes[0].Err(); err != nil && err != redis.Nil && !isRedisError(err) {
		return nil, err
	}
	dumps := make([]string, len(keys))
	ttls := make([]int64, len(keys))
	byOwner := map[*redis.Client][]int{}
	for i, k := range keys {
		vals, err := takes[i].Slice()
		switch {
		case err == redis.Nil:
			res[i].absent = true
			continue
		case err != nil:
			res[i].err = fmt.Errorf("take %q: %w", k, err)
			continue
		case len(vals) != 2:
			res[i].err = fmt.Errorf("take %q: unexpected reply %v", k, vals)
			continue
		}
		d, _ := vals[0].(string)
		ms, _ := vals[1].(int64)
		if ms == -2 { // expired between the two calls: cannot happen in one script, but be safe
			res[i].absent = true
			continue
		}
		dumps[i], ttls[i] = d, max(ms, 0)
		to := owner(k)
		byOwner[to] = append(byOwner[to], i)
	}

	var wg sync.WaitGroup
	for to, idx := range byOwner {
		wg.Go(func() {
			cmds := runScript(ctx, to, settleScript, len(idx), func(j int) ([]string, []any) {
				i := idx[j]
				return []string{keys[i], settled, internalIndex}, []any{ttls[i], dumps[i], settledTTL.Milliseconds()}
			})
			for j, i := range idx {
				n, err := cmds[j].Int64()
				switch {
				case err != nil:
					res[i].err = fmt.Errorf("settle %q: %w", keys[i], err)
				case n == 2:
					res[i].settled = true
				default:
					res[i].moved, res[i].bytes = true, len(dumps[i])
				}
			}
		})
	}
	wg.Wait()

	var release []int
	for i := range keys {
		if res[i].err == nil && (res[i].moved || res[i].settled) {
			release = append(release, i)
		}
	}
	dels := runScript(ctx, from, casDelete, len(release), func(j int) ([]string, []any) {
		i := release[j]
		return []string{keys[i]}, []any{dumps[i]}
	})
	for j, i := range release {
		n, err := dels[j].Int64()
		switch {
		case err != nil:
			res[i].err = fmt.Errorf("release %q on its previous owner: %w", keys[i], err)
			res[i].moved = false
		case n < 0 && res[i].moved:
			// P's copy changed after the take: a write reached the old
			// owner during the change. Keep it, and say so. (Gone, 0, is
			// fine: another mover of the key released it.)
			res[i].err = fmt.Errorf("release %q: the previous owner's copy changed during the move; it was kept there", keys[i])
			res[i].moved = false
		}
	}
	return res, nil
}

// runScript runs script n times in one pipeline on cl, with the keys and
// arguments of call i, by EVALSHA, and again by EVAL for the calls that met
// a server without the script (NOSCRIPT).
func runScript(ctx context.Context, cl *redis.Client, script *redis.Script, n int, args func(i int) ([]string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	if n == 0 {
		return cmds
	}
	_, _ = cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			k, a := args(i)
			cmds[i] = script.EvalSha(ctx, p, k, a...)
		}
		return nil
	})
	var retry []int
	for i, c := range cmds {
		if isNoScript(c.Err()) {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		_, _ = cl.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range retry {
				k, a := args(i)
				cmds[i] = script.Eval(ctx, p, k, a...)
			}
			return nil
		})
	}
	return cmds
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
