package redshard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/replyval"
)

// planFanout sends a copy of a keyless command to every shard; finish
// merges the replies as info.Merge says. KEYS and DBSIZE during a change,
// and RANDOMKEY (in a pipeline; alone it does not get here), read the
// servers themselves in finish, with ctx: they walk both rings
// (keyspace.go), after the pipeline's earlier commands.
func (t *topology) planFanout(ctx context.Context, cmd redis.Cmder, info command.Info) route {
	args := cmd.Args()
	switch {
	case info.Name == "randomkey":
		return route{direct: -1, finish: func() { _ = t.randomKey(ctx, cmd) }}
	case t.changing() && info.Name == "dbsize" && len(args) == 1:
		return route{direct: -1, finish: func() {
			n, err := t.dbsizeDuringChange(ctx)
			if err != nil {
				cmd.SetErr(err)
				return
			}
			setResult(cmd, n)
		}}
	case info.Name == "function|dump" && len(args) == 2:
		return t.planFunctionDump(cmd)
	case t.changing() && info.Name == "keys" && len(args) == 2:
		return route{direct: -1, finish: func() {
			keys, err := t.keysDuringChange(ctx, command.Arg(args[1]))
			if err != nil {
				cmd.SetErr(err)
				return
			}
			if _, raw := cmd.(*redis.Cmd); raw {
				list := make([]interface{}, len(keys))
				for i, k := range keys {
					list[i] = k
				}
				setResult(cmd, list)
				return
			}
			setResult(cmd, keys)
		}}
	}
	subs := make([]sub, len(t.shards))
	for i := range t.shards {
		if info.Name == "dbsize" && len(cmd.Args()) == 1 {
			// Without redshard's own keys (see dbsizeOwnScript).
			subs[i] = sub{shard: i, cmd: redis.NewIntCmd(context.Background(), "eval", dbsizeOwnScript, len(ownIndexes), ownIndexes[0], ownIndexes[1])}
			continue
		}
		if i == 0 && ownReply(info.Merge) {
			// The caller's command takes the first shard's reply, whatever
			// its type (FUNCTION LIST, COMMAND INFO, ...); the others'
			// replies are compared with it.
			subs[i] = sub{shard: i, cmd: cmd}
			continue
		}
		subs[i] = sub{shard: i, cmd: cmd.Clone()}
	}
	return route{direct: -1, subs: subs, finish: func() { t.mergeFanout(cmd, info, subs) }}
}

// planFunctionDump plans FUNCTION DUMP on many shards: the caller's command
// goes to the first shard, and FUNCTION LIST WITHCODE to every shard. Each
// server serializes its libraries in its own (randomly seeded) order, so
// the dumps of the same libraries differ byte for byte; their listings,
// compared as FUNCTION LIST is (in any order, see sameReply), say whether
// the shards hold the same libraries, and the first shard's dump is then
// the answer: restored anywhere, it gives those libraries.
func (t *topology) planFunctionDump(cmd redis.Cmder) route {
	subs := make([]sub, 0, 1+len(t.shards))
	subs = append(subs, sub{shard: 0, cmd: cmd})
	for i := range t.shards {
		subs = append(subs, sub{shard: i, cmd: functionListCode(context.Background())})
	}
	return route{direct: -1, subs: subs, finish: func() { t.mergeFunctionDump(cmd, subs) }}
}

// functionListCode returns a FUNCTION LIST WITHCODE command.
func functionListCode(ctx context.Context) *redis.FunctionListCmd {
	return redis.NewFunctionListCmd(ctx, "function", "list", "withcode")
}

// mergeFunctionDump keeps the first shard's dump in cmd (subs[0]) when
// every shard lists the same libraries with the same code (subs[1:]).
func (t *topology) mergeFunctionDump(cmd redis.Cmder, subs []sub) {
	if sameServerErr(subs[1:]) != nil && isRedisError(cmd.Err()) {
		return // every shard refuses functions (an old server): cmd holds one server's answer
	}
	for _, s := range subs {
		if err := s.cmd.Err(); err != nil {
			cmd.SetErr(t.shardErr(s.shard, err))
			return
		}
	}
	lists := subs[1:]
	for _, s := range lists[1:] {
		if !sameReply(lists[0].cmd, s.cmd) {
			cmd.SetErr(fmt.Errorf("%w: FUNCTION DUMP: the shards hold different libraries (%s: %.200q; %s: %.200q), so no one dump is the answer; "+
				"load the same libraries on every shard, or run it on each shard with ForEachShard", ErrNotSharded,
				t.shards[lists[0].shard].Name, lists[0].cmd.String(), t.shards[s.shard].Name, s.cmd.String()))
			return
		}
	}
}

// ownReply reports whether a merge keeps one shard's reply as it is, so
// the caller's command can be sent to that shard.
func ownReply(m command.Merge) bool {
	return m == command.MergeSame || m == command.MergeAllOK || m == command.MergeKill
}

// sameReply reports whether two commands' replies are equal: as printed,
// or once every list in them is put in order (a server lists functions,
// users or commands in its hash tables' order, which differs between
// servers that hold the same things).
func sameReply(a, b redis.Cmder) bool {
	if a.String() == b.String() {
		return true
	}
	x, okx := replyValue(a)
	y, oky := replyValue(b)
	return okx && oky && canonical(x) == canonical(y)
}

// replyValue returns what cmd's Val method returns.
func replyValue(cmd redis.Cmder) (reflect.Value, bool) {
	m := reflect.ValueOf(cmd).MethodByName("Val")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return reflect.Value{}, false
	}
	return m.Call(nil)[0], true
}

// canonical prints v with the elements of every slice sorted.
func canonical(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return "nil"
		}
		return canonical(v.Elem())
	case reflect.Slice, reflect.Array:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = canonical(v.Index(i))
		}
		slices.Sort(parts)
		return "[" + strings.Join(parts, ",") + "]"
	case reflect.Struct:
		parts := make([]string, v.NumField())
		for i := range parts {
			parts[i] = canonical(v.Field(i))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case reflect.Map:
		parts := make([]string, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			parts = append(parts, canonical(it.Key())+":"+canonical(it.Value()))
		}
		slices.Sort(parts)
		return "map[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("%#v", v)
}

// sameServerErr returns the server error every one of subs got, if they
// all got the same one (COMMAND GETKEYS of an unknown command, a CONFIG
// SET of an unknown parameter), else nil.
func sameServerErr(subs []sub) error {
	first := subs[0].cmd.Err()
	if !isRedisError(first) || first == redis.Nil {
		return nil
	}
	for _, s := range subs[1:] {
		if err := s.cmd.Err(); err == nil || err.Error() != first.Error() {
			return nil
		}
	}
	return first
}

func (t *topology) mergeFanout(cmd redis.Cmder, info command.Info, subs []sub) {
	if info.Merge == command.MergeKill {
		t.mergeKill(cmd, subs)
		return
	}
	if err := sameServerErr(subs); err != nil {
		cmd.SetErr(err) // every shard said it: the answer of one server, naming none
		return
	}
	for _, s := range subs {
		err := s.cmd.Err()
		if err != nil && !(err == redis.Nil && info.Merge == command.MergeAny) {
			cmd.SetErr(t.shardErr(s.shard, err))
			return
		}
	}
	switch info.Merge {
	case command.MergeAllOK, command.MergeSame:
		// The commands are identical, so equal replies print alike. The
		// caller's command, subs[0], holds the first shard's reply.
		for _, s := range subs[1:] {
			if !sameReply(subs[0].cmd, s.cmd) {
				cmd.SetErr(fmt.Errorf("%w: %s: the shards' replies differ (%s: %.200q; %s: %.200q), so no one reply is the answer; "+
					"run it on each shard with ForEachShard", ErrNotSharded, displayName(info.Name),
					t.shards[subs[0].shard].Name, subs[0].cmd.String(), t.shards[s.shard].Name, s.cmd.String()))
				return
			}
		}
	case command.MergeSum, command.MergeMax:
		var sum, top int64
		for _, s := range subs {
			n, ok := replyval.Value(s.cmd).(int64)
			if !ok {
				cmd.SetErr(mergeErr(info, s.cmd))
				return
			}
			sum, top = sum+n, max(top, n)
		}
		if info.Merge == command.MergeMax {
			sum = top
		}
		setResult(cmd, sum)
	case command.MergeConcat:
		var v interface{}
		var err error
		if _, raw := cmd.(*redis.Cmd); raw && (info.Name == "pubsub|numsub" || info.Name == "pubsub|shardnumsub") {
			v, err = t.numSub(cmd, info, subs)
		} else if _, typed := replyval.Value(subs[0].cmd).(map[string]int64); typed && info.Name == "pubsub|shardnumsub" {
			v = t.shardNumSub(cmd, subs)
		} else {
			v, err = concat(subs)
			if err == nil && (info.Name == "pubsub|channels" || info.Name == "pubsub|shardchannels") {
				// During a membership change a channel is subscribed on
				// its previous owner too (internal/pubsub): a server
				// lists each active channel once, and so does the merge.
				v = distinct(v)
			}
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
		setResult(cmd, replyval.Value(found[rand.IntN(len(found))].cmd))
	default:
		cmd.SetErr(mergeErr(info, cmd))
	}
}

// mergeKill merges FUNCTION KILL and SCRIPT KILL: OK if a shard killed
// what it was running, NOTBUSY only if none was running anything.
func (t *topology) mergeKill(cmd redis.Cmder, subs []sub) {
	var notBusy, other error
	for _, s := range subs {
		switch err := s.cmd.Err(); {
		case err == nil:
			cmd.SetErr(nil)
			setResult(cmd, replyval.Value(s.cmd))
			return
		case redis.HasErrorPrefix(err, "NOTBUSY"):
			if notBusy == nil {
				notBusy = err
			}
		case other == nil:
			other = t.shardErr(s.shard, err)
		}
	}
	if other != nil {
		cmd.SetErr(other)
		return
	}
	cmd.SetErr(notBusy)
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

// distinct drops the repeats of a concatenated list of names, keeping the
// first of each.
func distinct(v interface{}) interface{} {
	seen := map[interface{}]bool{}
	first := func(x interface{}) bool {
		if seen[x] {
			return false
		}
		seen[x] = true
		return true
	}
	switch names := v.(type) {
	case []string:
		return slices.DeleteFunc(names, func(n string) bool { return !first(n) })
	case []interface{}:
		return slices.DeleteFunc(names, func(n interface{}) bool { return !first(n) })
	}
	return v
}

// concat joins array replies in shard order; map replies (PUBSUB NUMSUB)
// are added up per field.
func concat(subs []sub) (interface{}, error) {
	switch replyval.Value(subs[0].cmd).(type) {
	case []string:
		var out []string
		for _, s := range subs {
			out = append(out, replyval.Value(s.cmd).([]string)...)
		}
		return out, nil
	case []interface{}:
		var out []interface{}
		for _, s := range subs {
			out = append(out, replyval.Value(s.cmd).([]interface{})...)
		}
		return out, nil
	case map[string]int64:
		out := map[string]int64{}
		for _, s := range subs {
			for k, v := range replyval.Value(s.cmd).(map[string]int64) {
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
		switch v := replyval.Value(s.cmd).(type) {
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

// shardNumSub merges typed PUBSUB SHARDNUMSUB replies (PubSubShardNumSub)
// as numSub merges raw ones: a channel's count is its owner's, where
// SSUBSCRIBE and SPUBLISH meet. Summed over the shards, a channel whose
// owner changed would be counted on its previous owner too, where it is
// also subscribed during a membership change.
func (t *topology) shardNumSub(cmd redis.Cmder, subs []sub) map[string]int64 {
	out := map[string]int64{}
	for _, a := range cmd.Args()[2:] {
		ch := command.Arg(a)
		owner := t.ring.LookupIndex(ch)
		out[ch] = 0
		for _, s := range subs {
			if s.shard == owner {
				out[ch] = replyval.Value(s.cmd).(map[string]int64)[ch]
			}
		}
	}
	return out
}

// and combines 0/1 array replies element-wise (SCRIPT EXISTS: a script
// exists only if every shard has it).
func and(subs []sub) (interface{}, error) {
	switch first := replyval.Value(subs[0].cmd).(type) {
	case []bool:
		out := append([]bool(nil), first...)
		for _, s := range subs[1:] {
			v := replyval.Value(s.cmd).([]bool)
			for i := range out {
				out[i] = out[i] && i < len(v) && v[i]
			}
		}
		return out, nil
	case []interface{}:
		out := append([]interface{}(nil), first...)
		for _, s := range subs[1:] {
			v := replyval.Value(s.cmd).([]interface{})
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
	if !replyval.SetValue(cmd, v) {
		cmd.SetErr(fmt.Errorf("redshard: %s: cannot store a merged %T reply in a %T", displayName(cmd.Name()), v, cmd))
	}
}

// randomKey answers RANDOMKEY without ever naming one of redshard's own
// keys: shards are tried in random order (during a change, the servers it
// removes too: their keys are still the application's), each with a few
// RANDOMKEY calls, then a SCAN for a user key when the server keeps
// answering with internal ones. A shard that is down is skipped; if no
// other has a key, the answer is that shard's ErrShardDown, not nil: its
// keys may be all there is (DESIGN.md semantics 8).
func (t *topology) randomKey(ctx context.Context, cmd redis.Cmder) error {
	var down *shard
	for _, s := range t.randomKeySources() {
		if s.down.Load() {
			if down == nil {
				down = s
			}
			continue
		}
		k, err := randomUserKey(ctx, s.client)
		switch {
		case err == redis.Nil:
			continue
		case err != nil:
			cmd.SetErr(wrapShardErr(s.Shard, err))
			return cmd.Err()
		}
		setResult(cmd, k)
		return nil
	}
	if down != nil {
		err := down.downError()
		cmd.SetErr(err)
		return err
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
