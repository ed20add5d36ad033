package redshard

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
)

// sub is a command sent to one shard on behalf of a caller's command.
type sub struct {
	shard int
	cmd   redis.Cmder
}

// route is how one caller's command is carried out: either the command
// itself goes to one shard (direct >= 0), or subs go out and finish merges
// their replies into the caller's command.
type route struct {
	direct int
	subs   []sub
	after  []sub // sent once subs are done (TTL caps on stand-ins)
	finish func()
}

// owner returns the shard index that owns every key of a keyed command.
func (t *topology) owner(info *command.Info, args []interface{}, keys []int) (int, error) {
	if info.Flags&command.OtherKeys != 0 {
		if err := t.otherKeysErr(*info); err != nil {
			return -1, err
		}
	}
	if len(keys) == 0 {
		return -1, fmt.Errorf("%w: %s names no key, so no shard can be chosen; "+
			"pass the keys it touches, or run it on each shard with ForEachShard", ErrNotSharded, displayName(info.Name))
	}
	first := command.Arg(args[keys[0]])
	i := t.ring.LookupIndex(first)
	for _, k := range keys[1:] {
		key := command.Arg(args[k])
		if j := t.ring.LookupIndex(key); j != i {
			return -1, t.crossShard(info.Name, first, i, key, j)
		}
	}
	return i, nil
}

// otherKeysErr refuses a command that reads keys it does not name (SORT
// with an untagged BY or GET pattern) unless the ring has one shard and no
// change is being handed off, so that every key is on that shard.
func (t *topology) otherKeysErr(info command.Info) error {
	if info.Flags&command.OtherKeys == 0 || len(t.shards) == 1 && t.handoff == nil {
		return nil
	}
	return fmt.Errorf("%w: %s with a BY or GET pattern reads other keys, which may live on any shard "+
		"and which redshard cannot route; put a {hash tag} like the sorted key's before the pattern's '*', "+
		"or run it on a shard's own client (ShardFor)", ErrCrossShard, displayName(info.Name))
}

func (t *topology) crossShard(name, k1 string, s1 int, k2 string, s2 int) error {
	return fmt.Errorf("%w: %s: key %q is on shard %s and key %q on shard %s; "+
		"put keys that must be used together under one {hash tag}",
		ErrCrossShard, displayName(name), k1, t.shards[s1].Name, k2, t.shards[s2].Name)
}

// displayName turns "script|load" into "SCRIPT LOAD" for messages.
func displayName(name string) string { return command.DisplayName(name) }

// standIn returns the index of the shard that serves key while its owner
// i is down: the next distinct shard clockwise that is up.
func (t *topology) standIn(i int, key string) (int, bool) {
	var buf [8]int
	reps := t.ring.ReplicaIndexes(key, buf[:0], min(len(t.shards), 8))
	for _, j := range reps {
		if j != i && !t.shards[j].down.Load() {
			return j, true
		}
	}
	return -1, false
}

// serve returns the stand-in that serves the keys of a command owned by
// shard i while i is down and failover is on. Each key's stand-in is its
// own next live shard clockwise; a command whose keys would go to
// different stand-ins is refused with ErrCrossShard, since running it on
// the first key's would hide the others from their readers. Without
// failover, or with no live stand-in, the error is i's ErrShardDown.
func (t *topology) serve(i int, args []interface{}, keys []int) (int, error) {
	if t.gutterTTL <= 0 || len(keys) == 0 {
		return -1, t.shards[i].downError()
	}
	first := command.Arg(args[keys[0]])
	j, ok := t.standIn(i, first)
	if !ok {
		return -1, t.shards[i].downError()
	}
	for _, k := range keys[1:] {
		key := command.Arg(args[k])
		if o, _ := t.standIn(i, key); o != j {
			return -1, fmt.Errorf("%w: shard %s is down and the stand-ins of key %q and key %q differ",
				ErrCrossShard, t.shards[i].Shard, first, key)
		}
	}
	return j, nil
}

// recordStandIn records that the keys of a write owned by down shard i go
// to stand-in j, and returns the commands that cap their TTL there; they
// must run on j after the write. ok is false when i came up meanwhile:
// the write must go to i instead.
func (t *topology) recordStandIn(ctx context.Context, args []interface{}, keys []int, i, j int) (caps []redis.Cmder, ok bool) {
	caps = make([]redis.Cmder, 0, len(keys))
	for _, k := range keys {
		key := command.Arg(args[k])
		if o := t.shards[i]; !o.outage.Record(&o.down, key, t.shards[j].client) {
			return nil, false
		}
		caps = append(caps, redis.NewIntCmd(ctx, "pexpire", key, t.gutterTTL.Milliseconds(), "lt"))
	}
	return caps, true
}
