package redshard

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/merge"
)

// planSplit routes MGET, MSET, MSETEX, DEL, UNLINK, EXISTS and TOUCH: one
// sub-command per shard, replies merged in the caller's key order. When every
// key lives on one shard the caller's command goes there unchanged.
func (t *topology) planSplit(ctx context.Context, cmd redis.Cmder, info command.Info, keys []int) (route, error) {
	args := cmd.Args()
	if len(keys) == 0 {
		in := info // not info itself: its address would move it to the heap (the closures below capture it)
		i, err := t.owner(&in, args, keys)
		return route{direct: i}, err
	}
	owners := make([]int, len(keys))
	same, down := true, false
	for n, k := range keys {
		owners[n] = t.ring.LookupIndex(command.Arg(args[k]))
		same = same && owners[n] == owners[0]
		down = down || t.shards[owners[n]].down.Load()
	}
	if same && !down {
		return route{direct: owners[0]}, nil
	}
	// While a shard is down, its keys go to their stand-ins (Failover), one
	// per key; writes there are recorded and get a capped TTL.
	var after []sub
	if down && t.gutterTTL > 0 {
		for n, k := range keys {
			i := owners[n]
			j, err := t.serve(i, args, keys[n:n+1])
			if err != nil {
				continue
			}
			if info.Flags&command.Write != 0 {
				caps, ok := t.recordStandIn(ctx, args, []int{k}, i, j)
				if !ok { // the owner came up meanwhile
					continue
				}
				for _, c := range caps {
					after = append(after, sub{shard: j, cmd: c})
				}
			}
			owners[n] = j
		}
	}

	step := max(info.Step, 1)
	var trailing []interface{}
	if info.Name == "msetex" {
		trailing = args[keys[len(keys)-1]+step:]
		for _, a := range trailing {
			if s := strings.ToLower(command.Arg(a)); s == "nx" || s == "xx" {
				return route{}, fmt.Errorf("%w: MSETEX with %s sets all keys or none, which cannot be done across shards; "+
					"put the keys under one {hash tag}", ErrCrossShard, strings.ToUpper(s))
			}
		}
	}

	// Key ordinals per shard, shards in ring order so the plan is deterministic.
	byShard := make([][]int, len(t.shards))
	for n, o := range owners {
		byShard[o] = append(byShard[o], n)
	}
	var subs []sub
	var ords [][]int
	for s, ns := range byShard {
		if len(ns) == 0 {
			continue
		}
		a := make([]interface{}, 0, 2+len(ns)*step+len(trailing))
		a = append(a, args[0])
		if info.Name == "msetex" {
			a = append(a, len(ns))
		}
		for _, n := range ns {
			a = append(a, args[keys[n]:keys[n]+step]...)
		}
		a = append(a, trailing...)
		var sc redis.Cmder
		switch info.Name {
		case "mget":
			sc = redis.NewSliceCmd(ctx, a...)
		case "mset":
			sc = redis.NewStatusCmd(ctx, a...)
		default:
			sc = redis.NewIntCmd(ctx, a...)
		}
		subs = append(subs, sub{shard: s, cmd: sc})
		ords = append(ords, ns)
	}
	nkeys := len(keys) // keys is the caller's stack buffer: do not capture it
	finish := func() {
		for _, s := range subs {
			if err := s.cmd.Err(); err != nil {
				cmd.SetErr(t.shardErr(s.shard, err))
				return
			}
		}
		var v interface{}
		switch info.Name {
		case "mget":
			vals := make([]interface{}, nkeys)
			for j, s := range subs {
				got := s.cmd.(*redis.SliceCmd).Val()
				for p, n := range ords[j] {
					if p < len(got) {
						vals[n] = got[p]
					}
				}
			}
			v = vals
		case "mset":
			v = "OK"
		case "msetex": // 1 when every key was set
			all := int64(1)
			for _, s := range subs {
				if s.cmd.(*redis.IntCmd).Val() != 1 {
					all = 0
				}
			}
			v = all
		default: // DEL, UNLINK, EXISTS, TOUCH: counts add up
			var sum int64
			for _, s := range subs {
				sum += s.cmd.(*redis.IntCmd).Val()
			}
			v = sum
		}
		merge.SetResult(cmd, v)
	}
	return route{direct: -1, subs: subs, after: after, finish: finish}, nil
}

// shardErr names the shard in an error that came back from it. A server
// error stays a redis.Error whose message starts with the server's own
// (see shardRedisError); anything else is wrapped with the shard's name.
func (t *topology) shardErr(i int, err error) error {
	if err == redis.Nil {
		return err
	}
	return wrapShardErr(t.shards[i].Shard, err)
}

// wrapShardErr is shardErr for a shard outside a topology.
func wrapShardErr(s Shard, err error) error {
	if isRedisError(err) {
		return &shardRedisError{err: err, shard: s}
	}
	return fmt.Errorf("redshard: shard %s: %w", s.Name, err)
}
