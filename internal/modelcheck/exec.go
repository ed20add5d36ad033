package modelcheck

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// exec runs one operation through c and records one entry per command.
func (r *runner) exec(ctx context.Context, c *redshard.Client, client int, op *Op) {
	call := r.rec.tick()
	cmds := make([]redis.Cmder, len(op.Cmds))
	switch op.Shape {
	case Single:
		cmds[0] = issue(ctx, c, op.N, op.Cmds[0])
	case MSet:
		pairs := make([]any, 0, 2*len(op.Cmds))
		for _, cm := range op.Cmds {
			pairs = append(pairs, cm.Key, cm.Arg)
		}
		st := c.MSet(ctx, pairs...)
		for i := range cmds {
			cmds[i] = st
		}
	case MGet:
		keys := make([]string, len(op.Cmds))
		for i, cm := range op.Cmds {
			keys[i] = cm.Key
		}
		mg := c.MGet(ctx, keys...)
		for i := range cmds {
			cmds[i] = &mgetPart{mg, i}
		}
	case Pipeline, Tx:
		var p redis.Pipeliner
		if op.Shape == Tx {
			p = c.TxPipeline()
		} else {
			p = c.Pipeline()
		}
		for i, cm := range op.Cmds {
			cmds[i] = issue(ctx, p, op.N, cm)
		}
		_, _ = p.Exec(ctx) // each command carries its own outcome
	}
	ret := r.rec.tick()
	for i, cm := range op.Cmds {
		out := outcome(cmds[i])
		if errors.Is(cmds[i].Err(), redshard.ErrCrossShard) {
			continue // refused before anything was sent: not applied
		}
		if out.Unknown && !r.p.Scenario.Faults {
			r.res.fail("error", cm.Key, "op#%d %v: %s (no fault was injected)", op.N, op, out.Err)
		}
		r.rec.add(client, Input{Kind: cm.Kind, Key: cm.Key, Arg: cm.Arg, Via: op.Shape.String(), Op: op.N}, out, call, ret)
	}
}

// issue sends (or, on a pipeline, queues) one command.
func issue(ctx context.Context, c redis.Cmdable, n int, cm Cmd) redis.Cmder {
	switch cm.Kind {
	case Set:
		return c.Set(ctx, cm.Key, cm.Arg, 0)
	case Get:
		return c.Get(ctx, cm.Key)
	case Del:
		return c.Del(ctx, cm.Key)
	case Incr:
		return c.Incr(ctx, cm.Key)
	case Append:
		return c.Append(ctx, cm.Key, cm.Arg)
	case GetDel:
		return c.GetDel(ctx, cm.Key)
	case ExpirePast: // both delete the key at once; PEXPIRE k 1 could not be checked
		if n%2 == 0 {
			return c.Expire(ctx, cm.Key, -time.Second)
		}
		return c.PExpireAt(ctx, cm.Key, time.UnixMilli(1))
	}
	panic("modelcheck: unknown command kind")
}

// mgetPart is one key's share of an MGET reply.
type mgetPart struct {
	*redis.SliceCmd
	i int
}

// outcome reads a command's reply as the model's Output.
func outcome(cmd redis.Cmder) Output {
	err := cmd.Err()
	switch {
	case err == redis.Nil:
		return Output{Nil: true}
	case err != nil:
		return Output{Unknown: true, Err: err.Error()}
	}
	switch c := cmd.(type) {
	case *mgetPart:
		v := c.Val()[c.i]
		if v == nil {
			return Output{Nil: true}
		}
		s, _ := v.(string)
		return Output{Val: s}
	case *redis.StringCmd:
		return Output{Val: c.Val()}
	case *redis.IntCmd:
		return Output{N: c.Val()}
	case *redis.BoolCmd:
		return Output{N: b2i(c.Val())}
	case *redis.StatusCmd:
		return Output{}
	}
	return Output{Unknown: true, Err: "unexpected reply type"}
}
