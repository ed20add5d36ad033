package redshard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
)

// planFanout sends a copy of a keyless command to every shard; finish
// merges the replies as info.Merge says.
func (t *topology) planFanout(cmd redis.Cmder, info command.Info) route {
	subs := make([]sub, len(t.shards))
	for i := range t.shards {
		if info.Name == "dbsize" && len(cmd.Args()) == 1 {
			// Without redshard's own keys (see dbsizeScript).
			subs[i] = sub{shard: i, cmd: redis.NewIntCmd(context.Background(), "eval", dbsizeScript, 1, internalIndex)}
			continue
		}
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
		setResult(cmd, value(subs[0].cmd))
	case command.MergeSum:
		var sum int64
		for _, s := range subs {
			n, ok := value(s.cmd).(int64)
			if !ok {
				cmd.SetErr(mergeErr(info, s.cmd))
				return
			}
			sum += n
		}
		setResult(cmd, sum)
	case command.MergeConcat:
		var v interface{}
		var err error
		if _, raw := cmd.(*redis.Cmd); raw && (info.Name == "pubsub|numsub" || info.Name == "pubsub|shardnumsub") {
			v, err = t.numSub(cmd, info, subs)
		} else {
			v, err = concat(subs)
		}
		if err != nil {
			cmd.SetErr(fmt.Errorf("redshard: %s: %w", displayName(info.Name), err))
			return
		}
		if info.Name == "keys" {
			v = withoutInternalKeys(v)
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
		setResult(cmd, value(found[rand.IntN(len(found))].cmd))
	default:
		cmd.SetErr(mergeErr(info, cmd))
	}
}

func mergeErr(info command.Info, c redis.Cmder) error {
	return fmt.Errorf("redshard: %s: cannot merge replies of type %T", displayName(info.Name), c)
}

// withoutInternalKeys drops redshard's own keys from a KEYS reply.
func withoutInternalKeys(v interface{}) interface{} {
	switch keys := v.(type) {
	case []string:
		return slices.DeleteFunc(keys, isInternalKey)
	case []interface{}:
		return slices.DeleteFunc(keys, func(k interface{}) bool {
			s, ok := k.(string)
			return ok && isInternalKey(s)
		})
	}
	return v
}

// concat joins array replies in shard order; map replies (PUBSUB NUMSUB)
// are added up per field.
func concat(subs []sub) (interface{}, error) {
	switch value(subs[0].cmd).(type) {
	case []string:
		var out []string
		for _, s := range subs {
			out = append(out, value(s.cmd).([]string)...)
		}
		return out, nil
	case []interface{}:
		var out []interface{}
		for _, s := range subs {
			out = append(out, value(s.cmd).([]interface{})...)
		}
		return out, nil
	case map[string]int64:
		out := map[string]int64{}
		for _, s := range subs {
			for k, v := range value(s.cmd).(map[string]int64) {
				out[k] += v
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot concatenate replies of type %T", subs[0].cmd)
}

// numSub merges raw (Do) PUBSUB NUMSUB and SHARDNUMSUB replies into what
// one server gives: a (channel, count) pair per channel asked, in the order
// asked, as an array (RESP2) or a map (RESP3), whichever the shards gave.
// NUMSUB counts add up over the shards; a SHARDNUMSUB count is the channel's
// owner's, where SSUBSCRIBE and SPUBLISH meet.
func (t *topology) numSub(cmd redis.Cmder, info command.Info, subs []sub) (interface{}, error) {
	counts := make([]map[string]int64, len(subs))
	asMap := false
	for n, s := range subs {
		m := map[string]int64{}
		switch v := value(s.cmd).(type) {
		case []interface{}:
			for i := 0; i+1 < len(v); i += 2 {
				ch, _ := v[i].(string)
				m[ch], _ = v[i+1].(int64)
			}
		case map[interface{}]interface{}:
			asMap = true
			for k, c := range v {
				ch, _ := k.(string)
				m[ch], _ = c.(int64)
			}
		default:
			return nil, fmt.Errorf("cannot merge replies of type %T", v)
		}
		counts[n] = m
	}
	channels := cmd.Args()[2:]
	flat := make([]interface{}, 0, 2*len(channels))
	byName := make(map[interface{}]interface{}, len(channels))
	for _, a := range channels {
		ch := command.Arg(a)
		var sum int64
		owner := t.ring.LookupIndex(ch)
		for n, s := range subs {
			if info.Name == "pubsub|numsub" || s.shard == owner {
				sum += counts[n][ch]
			}
		}
		flat = append(flat, ch, sum)
		byName[ch] = sum
	}
	if asMap {
		return byName, nil
	}
	return flat, nil
}

// and combines 0/1 array replies element-wise (SCRIPT EXISTS: a script
// exists only if every shard has it).
func and(subs []sub) (interface{}, error) {
	switch first := value(subs[0].cmd).(type) {
	case []bool:
		out := append([]bool(nil), first...)
		for _, s := range subs[1:] {
			v := value(s.cmd).([]bool)
			for i := range out {
				out[i] = out[i] && i < len(v) && v[i]
			}
		}
		return out, nil
	case []interface{}:
		out := append([]interface{}(nil), first...)
		for _, s := range subs[1:] {
			v := value(s.cmd).([]interface{})
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

// setResult stores a merged reply v in cmd, or an error if cmd's type
// cannot hold it.
func setResult(cmd redis.Cmder, v interface{}) {
	if !setValue(cmd, v) {
		cmd.SetErr(fmt.Errorf("redshard: %s: cannot store a merged %T reply in a %T", displayName(cmd.Name()), v, cmd))
	}
}

// randomKey answers RANDOMKEY without ever naming one of redshard's own
// keys: shards are tried in random order, each with a few RANDOMKEY calls,
// then a SCAN for a user key when the server keeps answering with internal
// ones.
func (t *topology) randomKey(ctx context.Context, cmd redis.Cmder) error {
	for _, i := range rand.Perm(len(t.shards)) {
		s := t.shards[i]
		if s.down.Load() {
			continue
		}
		k, err := randomUserKey(ctx, s.client)
		switch {
		case err == redis.Nil:
			continue
		case err != nil:
			cmd.SetErr(t.shardErr(i, err))
			return cmd.Err()
		}
		setResult(cmd, k)
		return nil
	}
	cmd.SetErr(redis.Nil)
	return redis.Nil
}

func randomUserKey(ctx context.Context, cl *redis.Client) (string, error) {
	for range 4 {
		k, err := cl.RandomKey(ctx).Result()
		if err != nil || !isInternalKey(k) {
			return k, err
		}
	}
	iter := cl.Scan(ctx, 0, "", 100).Iterator()
	for iter.Next(ctx) {
		if k := iter.Val(); !isInternalKey(k) {
			return k, nil
		}
	}
	if err := iter.Err(); err != nil {
		return "", err
	}
	return "", redis.Nil
}
