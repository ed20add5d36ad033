package redshard

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/merge"
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
			merge.SetResult(cmd, n)
		}}
	case info.Name == "function|dump" && len(args) == 2:
		return t.planFunctionDump(cmd)
	case t.changing() && (info.Name == "pubsub|channels" || info.Name == "pubsub|shardchannels"):
		return route{direct: -1, finish: func() { t.channelsDuringChange(ctx, cmd, info.Name) }}
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
				merge.SetResult(cmd, list)
				return
			}
			merge.SetResult(cmd, keys)
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

// channelsDuringChange answers PUBSUB CHANNELS (or SHARDCHANNELS) during a
// membership change: the channels active on any server of the change's
// two rings, each once. A channel whose owner changed is subscribed
// on its new owner only once the client's PubSubs have followed the change
// (SetShards returns after that; a fleet process acknowledges the phase
// after it), and until then on its previous owner, which the new ring may
// not hold: asking the new ring's servers alone would leave it out.
func (t *topology) channelsDuringChange(ctx context.Context, cmd redis.Cmder, name string) {
	// The servers of the keyspace walk (keyspace.go), each once: a server
	// in both rings is visited in the first half only.
	var servers []visit
	for i := range t.walkLen() {
		if v := t.walkAt(i); v.role != visitNew || !v.other {
			servers = append(servers, v)
		}
	}
	cmds := make([]redis.Cmder, len(servers))
	if err := askEach(servers, func(i int, v visit) error {
		cmds[i] = cmd.Clone()
		if err := v.s.client.Process(ctx, cmds[i]); err != nil {
			return wrapShardErr(v.s.Shard, err)
		}
		return nil
	}); err != nil {
		cmd.SetErr(err)
		return
	}
	v, err := merge.Concat(cmds)
	if err != nil {
		cmd.SetErr(fmt.Errorf("redshard: %s: %w", displayName(name), err))
		return
	}
	merge.SetResult(cmd, merge.Without(merge.Distinct(v), isMarkChannel))
}

// planFunctionDump plans FUNCTION DUMP on many shards: the caller's command
// goes to the first shard, and FUNCTION LIST WITHCODE to every shard. Each
// server serializes its libraries in its own (randomly seeded) order, so
// the dumps of the same libraries differ byte for byte; their listings,
// compared as FUNCTION LIST is (in any order, see merge.Same), say whether
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

// mergeFunctionDump keeps the first shard's dump in cmd (subs[0]) when
// every shard lists the same libraries with the same code (subs[1:]).
func (t *topology) mergeFunctionDump(cmd redis.Cmder, subs []sub) {
	if merge.ServerErr(subCmds(subs[1:])) != nil && isRedisError(cmd.Err()) {
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
		if !merge.Same(lists[0].cmd, s.cmd) {
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

func (t *topology) mergeFanout(cmd redis.Cmder, info command.Info, subs []sub) {
	if info.Merge == command.MergeKill {
		t.mergeKill(cmd, subs)
		return
	}
	if err := merge.ServerErr(subCmds(subs)); err != nil {
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
			if !merge.Same(subs[0].cmd, s.cmd) {
				cmd.SetErr(fmt.Errorf("%w: %s: the shards' replies differ (%s: %.200q; %s: %.200q), so no one reply is the answer; "+
					"run it on each shard with ForEachShard", ErrNotSharded, displayName(info.Name),
					t.shards[subs[0].shard].Name, subs[0].cmd.String(), t.shards[s.shard].Name, s.cmd.String()))
				return
			}
		}
	case command.MergeSum, command.MergeMax:
		n, bad, ok := merge.Sum(subCmds(subs), info.Merge == command.MergeMax)
		if !ok {
			cmd.SetErr(merge.TypeErr(info.Name, bad))
			return
		}
		merge.SetResult(cmd, n)
	case command.MergeConcat:
		var v interface{}
		var err error
		if _, raw := cmd.(*redis.Cmd); raw && (info.Name == "pubsub|numsub" || info.Name == "pubsub|shardnumsub") {
			v, err = t.numSub(cmd, subs)
		} else if _, typed := replyval.Value(subs[0].cmd).(map[string]int64); typed && (info.Name == "pubsub|numsub" || info.Name == "pubsub|shardnumsub") {
			v = t.ownerNumSub(cmd, subs)
		} else {
			v, err = merge.Concat(subCmds(subs))
			if err == nil && (info.Name == "pubsub|channels" || info.Name == "pubsub|shardchannels") {
				// During a membership change a channel is subscribed on
				// its previous owner too (internal/pubsub): a server
				// lists each active channel once, and so does the merge.
				v = merge.Distinct(v)
				// A LocalCache client's write-through refills subscribe
				// its invalidation connections to mark channels of its
				// own (internal/hot): not the caller's channels.
				v = merge.Without(v, isMarkChannel)
			}
		}
		if err != nil {
			cmd.SetErr(fmt.Errorf("redshard: %s: %w", displayName(info.Name), err))
			return
		}
		if info.Name == "keys" {
			v = merge.Without(v, isInternalKey)
		}
		merge.SetResult(cmd, v)
	case command.MergeAnd:
		v, err := merge.And(subCmds(subs))
		if err != nil {
			cmd.SetErr(fmt.Errorf("redshard: %s: %w", displayName(info.Name), err))
			return
		}
		merge.SetResult(cmd, v)
	case command.MergeAny:
		v, ok := merge.Any(subCmds(subs))
		if !ok {
			cmd.SetErr(redis.Nil)
			return
		}
		merge.SetResult(cmd, v)
	default:
		cmd.SetErr(merge.TypeErr(info.Name, cmd))
	}
}

// subCmds returns the commands of subs, in order.
func subCmds(subs []sub) []redis.Cmder {
	out := make([]redis.Cmder, len(subs))
	for i, s := range subs {
		out[i] = s.cmd
	}
	return out
}

// mergeKill merges FUNCTION KILL and SCRIPT KILL: OK if a shard killed
// what it was running, NOTBUSY only if none was running anything.
func (t *topology) mergeKill(cmd redis.Cmder, subs []sub) {
	var notBusy, other error
	for _, s := range subs {
		switch err := s.cmd.Err(); {
		case err == nil:
			cmd.SetErr(nil)
			merge.SetResult(cmd, replyval.Value(s.cmd))
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

// numSub merges raw (Do) PUBSUB NUMSUB and SHARDNUMSUB replies into what
// one server gives: a (channel, count) pair per channel asked, in the order
// asked, as an array (RESP2) or a map (RESP3), whichever the shards gave.
// A channel's count is its owner's, where redshard subscribes it and where
// its PUBLISH (or SPUBLISH) goes, so the count is the number that PUBLISH
// through redshard answers. The shards are not summed: during a membership
// change a channel whose owner changed is subscribed on its previous owner
// too, and a sum would count each of its subscribers twice (go-redis's
// "should return the numbers of subscribers" saw {"mychannel": 2} under
// churn). A subscriber that connected to a non-owner server by itself is
// not counted; a PUBLISH through redshard would not reach it either.
func (t *topology) numSub(cmd redis.Cmder, subs []sub) (interface{}, error) {
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
			if s.shard == owner {
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

// ownerNumSub merges typed PUBSUB NUMSUB and SHARDNUMSUB replies
// (PubSubNumSub, PubSubShardNumSub) as numSub merges raw ones: a channel's
// count is its owner's. Summed over the shards, a channel whose owner
// changed would be counted on its previous owner too, where it is also
// subscribed during a membership change.
func (t *topology) ownerNumSub(cmd redis.Cmder, subs []sub) map[string]int64 {
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
		merge.SetResult(cmd, k)
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
