package redshard

import (
	"fmt"
	"math/rand/v2"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
)

// planFanout sends a copy of a keyless command to every shard; finish
// merges the replies as info.Merge says.
func (t *topology) planFanout(cmd redis.Cmder, info command.Info) route {
	subs := make([]sub, len(t.shards))
	for i := range t.shards {
		subs[i] = sub{shard: i, cmd: cmd.Clone()}
	}
	return route{direct: -1, subs: subs, finish: func() { t.mergeFanout(cmd, info, subs) }}
}

func (t *topology) mergeFanout(cmd redis.Cmder, info command.Info, subs []sub) {
	for _, s := range subs {
		err := s.cmd.Err()
		if err != nil && !(err == redis.Nil && info.Merge == command.MergeAny) {
			cmd.SetErr(t.shardErr(s.shard, err))
			return
		}
	}
	switch info.Merge {
	case command.MergeAllOK, command.MergeSame:
		// The commands are identical, so equal String()s mean equal replies.
		ref := subs[0].cmd.String()
		for _, s := range subs[1:] {
			if got := s.cmd.String(); got != ref {
				cmd.SetErr(fmt.Errorf("redshard: %s: shards disagree: %s says %q, %s says %q",
					displayName(info.Name), t.shards[subs[0].shard].Name, ref, t.shards[s.shard].Name, got))
				return
			}
		}
		setResult(cmd, valueOf(subs[0].cmd))
	case command.MergeSum:
		var sum int64
		for _, s := range subs {
			n, ok := valueOf(s.cmd).(int64)
			if !ok {
				cmd.SetErr(mergeErr(info, s.cmd))
				return
			}
			sum += n
		}
		setResult(cmd, sum)
	case command.MergeConcat:
		v, err := concat(subs)
		if err != nil {
			cmd.SetErr(fmt.Errorf("redshard: %s: %w", displayName(info.Name), err))
			return
		}
		setResult(cmd, v)
	case command.MergeAnd:
		v, err := and(subs)
		if err != nil {
			cmd.SetErr(fmt.Errorf("redshard: %s: %w", displayName(info.Name), err))
			return
		}
		setResult(cmd, v)
	case command.MergeAny:
		var found []sub
		for _, s := range subs {
			if s.cmd.Err() == nil {
				found = append(found, s)
			}
		}
		if len(found) == 0 {
			cmd.SetErr(redis.Nil)
			return
		}
		setResult(cmd, valueOf(found[rand.IntN(len(found))].cmd))
	default:
		cmd.SetErr(mergeErr(info, cmd))
	}
}

func mergeErr(info command.Info, c redis.Cmder) error {
	return fmt.Errorf("redshard: %s: cannot merge replies of type %T", displayName(info.Name), c)
}

// concat joins array replies in shard order; map replies (PUBSUB NUMSUB)
// are added up per field.
func concat(subs []sub) (interface{}, error) {
	switch valueOf(subs[0].cmd).(type) {
	case []string:
		var out []string
		for _, s := range subs {
			out = append(out, valueOf(s.cmd).([]string)...)
		}
		return out, nil
	case []interface{}:
		var out []interface{}
		for _, s := range subs {
			out = append(out, valueOf(s.cmd).([]interface{})...)
		}
		return out, nil
	case map[string]int64:
		out := map[string]int64{}
		for _, s := range subs {
			for k, v := range valueOf(s.cmd).(map[string]int64) {
				out[k] += v
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot concatenate replies of type %T", subs[0].cmd)
}

// and combines 0/1 array replies element-wise (SCRIPT EXISTS: a script
// exists only if every shard has it).
func and(subs []sub) (interface{}, error) {
	switch first := valueOf(subs[0].cmd).(type) {
	case []bool:
		out := append([]bool(nil), first...)
		for _, s := range subs[1:] {
			v := valueOf(s.cmd).([]bool)
			for i := range out {
				out[i] = out[i] && i < len(v) && v[i]
			}
		}
		return out, nil
	case []interface{}:
		out := append([]interface{}(nil), first...)
		for _, s := range subs[1:] {
			v := valueOf(s.cmd).([]interface{})
			for i := range out {
				if i >= len(v) || v[i] != int64(1) {
					out[i] = int64(0)
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot combine replies of type %T", subs[0].cmd)
}

// valueOf returns a command's reply value for the command types that
// fan-out and split commands produce.
func valueOf(c redis.Cmder) interface{} {
	switch c := c.(type) {
	case *redis.Cmd:
		return c.Val()
	case *redis.StatusCmd:
		return c.Val()
	case *redis.StringCmd:
		return c.Val()
	case *redis.IntCmd:
		return c.Val()
	case *redis.BoolCmd:
		return c.Val()
	case *redis.FloatCmd:
		return c.Val()
	case *redis.SliceCmd:
		return c.Val()
	case *redis.StringSliceCmd:
		return c.Val()
	case *redis.BoolSliceCmd:
		return c.Val()
	case *redis.MapStringIntCmd:
		return c.Val()
	case *redis.MapStringStringCmd:
		return c.Val()
	}
	return nil
}

// setResult stores v as cmd's reply; v's type must match what valueOf
// returns for cmd's type.
func setResult(cmd redis.Cmder, v interface{}) {
	ok := true
	switch c := cmd.(type) {
	case *redis.Cmd:
		c.SetVal(v)
	case *redis.StatusCmd:
		var s string
		if s, ok = v.(string); ok {
			c.SetVal(s)
		}
	case *redis.StringCmd:
		var s string
		if s, ok = v.(string); ok {
			c.SetVal(s)
		}
	case *redis.IntCmd:
		var n int64
		if n, ok = v.(int64); ok {
			c.SetVal(n)
		}
	case *redis.BoolCmd:
		var b bool
		if b, ok = v.(bool); ok {
			c.SetVal(b)
		}
	case *redis.FloatCmd:
		var f float64
		if f, ok = v.(float64); ok {
			c.SetVal(f)
		}
	case *redis.SliceCmd:
		var s []interface{}
		if s, ok = v.([]interface{}); ok {
			c.SetVal(s)
		}
	case *redis.StringSliceCmd:
		var s []string
		if s, ok = v.([]string); ok {
			c.SetVal(s)
		}
	case *redis.BoolSliceCmd:
		var s []bool
		if s, ok = v.([]bool); ok {
			c.SetVal(s)
		}
	case *redis.MapStringIntCmd:
		var m map[string]int64
		if m, ok = v.(map[string]int64); ok {
			c.SetVal(m)
		}
	case *redis.MapStringStringCmd:
		var m map[string]string
		if m, ok = v.(map[string]string); ok {
			c.SetVal(m)
		}
	default:
		ok = false
	}
	if !ok {
		cmd.SetErr(fmt.Errorf("redshard: %s: cannot store a merged %T reply in a %T", displayName(cmd.Name()), v, cmd))
		return
	}
	cmd.SetErr(nil)
}
