package keymove

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/rediserr"
)

// SettledTTL is a backstop: a settled set outlives an abandoned change by
// at most this long (a completed change deletes its sets), and the index
// it is recorded in as long after its last addition.
const SettledTTL = 7 * 24 * time.Hour

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
	// moved here later. KEYS = key, settled set, index; ARGV = set ttl ms.
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

// Result is what happened to one key. At most one of Moved, Absent and
// Settled is set, and none when Err is not nil.
type Result struct {
	Moved   bool  // restored on the new owner (or a newer value was already there) and deleted from the old
	Absent  bool  // not on the previous owner (never was, expired, or already moved)
	Settled bool  // another mover had settled it; the old copy was released
	Bytes   int   // size of the serialized value (Moved)
	Err     error // the key stays where it was
}

// Move moves keys from one server to their owners under the protocol
// (see the package doc), pipelined: take on from; settle on each owner
// (grouped, concurrently); release on from. settled names the change's
// settled set on the owners, and index the set that records a new settled
// set on its server (it expires with it, after SettledTTL). owner returns
// a key's new owner; it is called from Move's goroutine only. A key whose
// step fails keeps its old copy and has Err set; the error is for the
// batch as a whole (from unreachable), with no results.
func Move(ctx context.Context, from *redis.Client, keys []string, settled, index string, owner func(string) *redis.Client) ([]Result, error) {
	res := make([]Result, len(keys))
	takes := runScript(ctx, from, takeScript, len(keys), func(i int) ([]string, []any) {
		return []string{keys[i]}, nil
	})
	if len(keys) == 0 {
		return res, nil
	}
	if err := takes[0].Err(); err != nil && err != redis.Nil && !rediserr.Is(err) {
		return nil, err
	}
	dumps := make([]string, len(keys))
	ttls := make([]int64, len(keys))
	byOwner := map[*redis.Client][]int{}
	for i, k := range keys {
		vals, err := takes[i].Slice()
		switch {
		case err == redis.Nil:
			res[i].Absent = true
			continue
		case err != nil:
			res[i].Err = fmt.Errorf("take %q: %w", k, err)
			continue
		case len(vals) != 2:
			res[i].Err = fmt.Errorf("take %q: unexpected reply %v", k, vals)
			continue
		}
		d, _ := vals[0].(string)
		ms, _ := vals[1].(int64)
		if ms == -2 { // expired between the two calls: cannot happen in one script, but be safe
			res[i].Absent = true
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
				return []string{keys[i], settled, index}, []any{ttls[i], dumps[i], SettledTTL.Milliseconds()}
			})
			for j, i := range idx {
				n, err := cmds[j].Int64()
				switch {
				case err != nil:
					res[i].Err = fmt.Errorf("settle %q: %w", keys[i], err)
				case n == 2:
					res[i].Settled = true
				default:
					res[i].Moved, res[i].Bytes = true, len(dumps[i])
				}
			}
		})
	}
	wg.Wait()

	var release []int
	for i := range keys {
		if res[i].Err == nil && (res[i].Moved || res[i].Settled) {
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
			res[i].Err = fmt.Errorf("release %q on its previous owner: %w", keys[i], err)
			res[i].Moved = false
		case n < 0 && res[i].Moved:
			// P's copy changed after the take: a write reached the old
			// owner during the change. Keep it, and say so. (Gone, 0, is
			// fine: another mover of the key released it.)
			res[i].Err = fmt.Errorf("release %q: the previous owner's copy changed during the move; it was kept there", keys[i])
			res[i].Moved = false
		}
	}
	return res, nil
}

// SettleAbsent marks key settled in the change's settled set on to without
// a value: its previous owner is lost (failover), so whatever that owner
// held must never be moved to to later in this change. settled and index
// are as for Move.
func SettleAbsent(ctx context.Context, to *redis.Client, key, settled, index string) error {
	return settleAbsentScript.Run(ctx, to, []string{key, settled, index}, SettledTTL.Milliseconds()).Err()
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
