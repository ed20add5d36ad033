package redshard

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
)

// SCAN walks the shards one after another. The cursor a caller sees keeps
// the shard's index (in ring order) in its top 16 bits and that shard's own
// cursor in the low 48 bits, so Scan and ScanIterator work unchanged. A
// cursor is only valid for the shard list it was made with.
const (
	scanShift     = 48
	scanInnerMask = 1<<scanShift - 1
)

func (t *topology) planScan(cmd redis.Cmder) (route, error) {
	args := cmd.Args()
	if len(args) < 2 {
		return route{}, fmt.Errorf("redshard: SCAN needs a cursor")
	}
	cur, err := strconv.ParseUint(command.Arg(args[1]), 10, 64)
	if err != nil {
		return route{}, fmt.Errorf("redshard: SCAN: invalid cursor %q", command.Arg(args[1]))
	}
	s := int(cur >> scanShift)
	if s >= len(t.shards) {
		return route{}, fmt.Errorf("redshard: SCAN: cursor %d names shard #%d of %d (did the shard list change?)",
			cur, s, len(t.shards))
	}
	sc := cmd.Clone()
	sc.Args()[1] = cur & scanInnerMask
	finish := func() {
		if err := sc.Err(); err != nil {
			cmd.SetErr(t.shardErr(s, err))
			return
		}
		var keys []string
		var next uint64
		switch c := sc.(type) {
		case *redis.ScanCmd:
			keys, next = c.Val()
		case *redis.Cmd:
			keys, next, err = parseScanReply(c.Val())
		default:
			err = fmt.Errorf("redshard: SCAN: cannot read a %T reply", sc)
		}
		if err == nil && next > scanInnerMask {
			err = fmt.Errorf("redshard: SCAN: shard %s returned cursor %d, too large to encode", t.shards[s].Name, next)
		}
		if err != nil {
			cmd.SetErr(err)
			return
		}
		keys = slices.DeleteFunc(keys, isInternalKey) // a page may come out shorter, as SCAN allows
		switch {
		case next != 0:
			next |= uint64(s) << scanShift
		case s+1 < len(t.shards):
			next = uint64(s+1) << scanShift
		}
		switch c := cmd.(type) {
		case *redis.ScanCmd:
			c.SetVal(keys, next)
		case *redis.Cmd:
			page := make([]interface{}, len(keys))
			for i, k := range keys {
				page[i] = k
			}
			c.SetVal([]interface{}{strconv.FormatUint(next, 10), page})
		}
		cmd.SetErr(nil)
	}
	return route{direct: -1, subs: []sub{{shard: s, cmd: sc}}, finish: finish}, nil
}

// parseScanReply reads a raw SCAN reply: [cursor, [key...]].
func parseScanReply(v interface{}) ([]string, uint64, error) {
	arr, ok := v.([]interface{})
	if !ok || len(arr) != 2 {
		return nil, 0, fmt.Errorf("redshard: SCAN: unexpected reply %v", v)
	}
	cs, _ := arr[0].(string)
	next, err := strconv.ParseUint(cs, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("redshard: SCAN: unexpected cursor %v", arr[0])
	}
	page, _ := arr[1].([]interface{})
	keys := make([]string, 0, len(page))
	for _, k := range page {
		s, _ := k.(string)
		keys = append(keys, s)
	}
	return keys, next, nil
}
