package localcache

import (
	"strconv"
	"sync/atomic"
)

// generations are the invalidation counters. Every entry records, in a
// stamp, the counters of its key's stripe, of its reply's fill stripe, of
// its shard and of the whole cache as they were when its Ticket was taken
// (the fill counter as Fill moved it); Get returns the entry only if all
// four are unchanged. Invalidating is therefore one atomic add, and it
// covers every reply of the key (all sub-keys, all shards) at once,
// whatever ristretto still holds or has yet to apply from its set buffer.
type generations struct {
	keys   []atomic.Uint64 // by key hash & mask
	fills  []atomic.Uint64 // by refHash(key, shard, cmd) & mask: moved by Fill
	shards [ShardStripes]atomic.Uint64
	all    atomic.Uint64
}

type stamp struct {
	key, fill, shard, all uint64
}

func newGenerations(keyStripes int) *generations {
	return &generations{keys: make([]atomic.Uint64, keyStripes), fills: make([]atomic.Uint64, keyStripes)}
}

func (g *generations) keyIndex(kh uint64) uint64 { return kh & uint64(len(g.keys)-1) }

// fill returns the fill counter of the reply with ristretto hash h.
func (g *generations) fill(h uint64) *atomic.Uint64 { return &g.fills[h&uint64(len(g.fills)-1)] }

func shardIndex(shard int) uint { return uint(shard) % ShardStripes }

// current returns the stamp an entry of (shard, key with hash kh, sub-key)
// whose ristretto hash is h must carry to be valid now.
func (g *generations) current(kh, h uint64, shard int) stamp {
	return stamp{
		key:   g.keys[g.keyIndex(kh)].Load(),
		fill:  g.fill(h).Load(),
		shard: g.shards[shardIndex(shard)].Load(),
		all:   g.all.Load(),
	}
}

// Ticket records the invalidation state of one key on one shard (and, from
// FillTicket, of one sub-key). Take it with Cache.Ticket or
// Cache.FillTicket before reading the reply from the shard, and hand it to
// SetWithTicket or Fill: if the key or the shard is invalidated in between
// (a write raced with the read), the reply is not cached.
//
// A Ticket is a small value, safe to copy and to use from any goroutine.
// The zero Ticket is invalid: SetWithTicket and Fill refuse it.
type Ticket struct {
	cache *Cache
	shard int
	key   string
	kh    uint64 // xxhash of key
	cmd   string // FillTicket's sub-key
	h     uint64 // FillTicket's ristretto hash of (shard, key, cmd)
	fill  bool   // made by FillTicket
	stamp stamp
}

// AppendStamp appends to b a text naming the generations t was taken
// under: two tickets of one key (and sub-key, for FillTicket) append the
// same text only if no invalidation or Supersede of the key (or its
// stripe), no Fill of the sub-key (or its stripe), and no invalidation of
// its shard or the cache happened between them. A caller that shares one
// read among several callers (a flight) puts it in the flight's name, so
// that a caller arriving after such an event never joins a read sent
// before it.
func (t Ticket) AppendStamp(b []byte) []byte {
	b = strconv.AppendUint(b, t.stamp.key, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, t.stamp.fill, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, t.stamp.shard, 10)
	b = append(b, '.')
	return strconv.AppendUint(b, t.stamp.all, 10)
}
