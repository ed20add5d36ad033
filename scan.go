package redshard

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
)

// SCAN walks the shards one after another (during a membership change,
// the servers of both rings: keyspace.go). The cursor a caller sees is
// one 64-bit number, so Scan and ScanIterator work unchanged:
//
//	bits 63-52  the server's index in the walk (at most 4096)
//	bits 51-40  the ring's epoch, modulo 4096 (SetShards adds one)
//	bits 39-0   that shard's own cursor
//
// Cursor 0 starts a scan. A cursor is valid only on the client that made
// it, for the shard list it was made with: one made before a SetShards
// fails with ErrStaleCursor (unless exactly a multiple of 4096 changes
// happened in between), rather than scan a shard twice and a new one never.
// A shard's own cursor must fit in 40 bits: Redis's SCAN cursor on a
// standalone server is below the size of its keyspace's hash table (the
// larger one while rehashing), a power of two that grows to at most twice
// the number of keys and shrinks again after deletions. 40 bits hold any
// server that has not held about 2^39 (5.5e11) keys, far past the memory of
// one machine; a cursor that does not fit fails the SCAN with an error
// saying so, never a wrong scan.
const (
	scanShardShift = 52
	scanTagShift   = 40
	scanTagMask    = 1<<(scanShardShift-scanTagShift) - 1
	scanInnerMask  = 1<<scanTagShift - 1
	scanMaxShards  = 1 << (64 - scanShardShift)
)

func (t *topology) planScan(ctx context.Context, cmd redis.Cmder) (route, error) {
	args := cmd.Args()
	if len(args) < 2 {
		return route{}, fmt.Errorf("redshard: SCAN needs a cursor")
	}
	cur, err := strconv.ParseUint(command.Arg(args[1]), 10, 64)
	if err != nil {
		return route{}, fmt.Errorf("redshard: SCAN: invalid cursor %q", command.Arg(args[1]))
	}
	n := t.walkLen()
	if n > scanMaxShards {
		return route{}, fmt.Errorf("%w: SCAN over more than %d shards cannot be encoded in a cursor; "+
			"scan each shard with ForEachShard", ErrNotSharded, scanMaxShards)
	}
	tag := t.epoch & scanTagMask
	s := int(cur >> scanShardShift)
	if cur != 0 && (cur>>scanTagShift&scanTagMask != tag || s >= n) {
		return route{}, fmt.Errorf("%w: cursor %d was made for another shard list "+
			"(the list changed since; start again with cursor 0)", ErrStaleCursor, cur)
	}
	sc := cmd.Clone()
	sc.Args()[1] = cur & scanInnerMask
	v := t.walkAt(s)
	finish := func() {
		if t.changing() {
			// During a change the walk visits servers outside the ring
			// (keyspace.go): the page is read here.
			if v.s.down.Load() {
				sc.SetErr(v.s.downError())
			} else {
				_ = v.s.send(ctx, sc, false)
			}
		}
		if err := sc.Err(); err != nil {
			cmd.SetErr(wrapShardErr(v.s.Shard, err))
			return
		}
		keys, next, err := scanReply(sc)
		if err == nil && next > scanInnerMask {
			err = fmt.Errorf("redshard: SCAN: shard %s returned cursor %d, too large to encode", v.s.Name, next)
		}
		if err == nil {
			// A page may come out shorter, as SCAN allows.
			keys, err = t.count(ctx, v, keys)
		}
		if err != nil {
			cmd.SetErr(err)
			return
		}
		switch {
		case next != 0:
			next |= uint64(s)<<scanShardShift | tag<<scanTagShift
		case s+1 < n:
			next = uint64(s+1)<<scanShardShift | tag<<scanTagShift
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
	if t.changing() {
		return route{direct: -1, finish: finish}, nil
	}
	return route{direct: -1, subs: []sub{{shard: s, cmd: sc}}, finish: finish}, nil
}

// scanReply reads the reply of a SCAN sent to one server.
func scanReply(sc redis.Cmder) ([]string, uint64, error) {
	switch c := sc.(type) {
	case *redis.ScanCmd:
		keys, next := c.Val()
		return keys, next, nil
	case *redis.Cmd:
		return parseScanReply(c.Val())
	}
	return nil, 0, fmt.Errorf("redshard: SCAN: cannot read a %T reply", sc)
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
