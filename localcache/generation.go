package localcache

import "sync/atomic"

// generations are the invalidation counters. Every entry records, in a
// stamp, the counters of its key's stripe, of its shard and of the whole
// cache as they were when its Ticket was taken; Get returns the entry only
// if all three are unchanged. Invalidating is therefore one atomic add, and
// it covers every reply of the key (all sub-keys, all shards) at once,
// whatever ristretto still holds or has yet to apply from its set buffer.
type generations struct {
	keys   []atomic.Uint64 // by key hash & keyMask
	shards [ShardStripes]atomic.Uint64
	all    atomic.Uint64
}

type stamp struct {
	key, shard, all uint64
}

func newGenerations(keyStripes int) *generations {
	return &generations{keys: make([]atomic.Uint64, keyStripes)}
}

func (g *generations) keyIndex(kh uint64) uint64 { return kh & uint64(len(g.keys)-1) }

func shardIndex(shard int) uint { return uint(shard) % ShardStripes }

// current returns the stamp an entry of (shard, key with hash kh) must carry
// to be valid now.
func (g *generations) current(kh uint64, shard int) stamp {
	return stamp{
		key:   g.keys[g.keyIndex(kh)].Load(),
		shard: g.shards[shardIndex(shard)].Load(),
		all:   g.all.Load(),
	}
}

// Ticket records the invalidation state of one key on one shard. Take it
// with Cache.Ticket before reading the reply from the shard, and hand it to
// SetWithTicket: if the key or the shard is invalidated in between (a
// write raced with the read), the reply is not cached.
//
// A Ticket is a small value, safe to copy and to use from any goroutine.
// The zero Ticket is invalid: SetWithTicket refuses it.
type Ticket struct {
	cache *Cache
	shard int
	key   string
	kh    uint64 // xxhash of key
	stamp stamp
}
