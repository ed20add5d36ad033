// Package localcache caches the replies of read-only commands on hot keys,
// so that a client spreading keys over many shards can answer them without
// a round trip. It is a thin layer over ristretto (github.com/dgraph-io/
// ristretto/v2) that adds what a Redis client needs: entries addressed by
// (shard, key, sub-key), invalidation of every reply of a key or of a shard
// in O(1), TTLs checked against an injectable clock, and a protocol that
// keeps a reply read before a write from being cached after it.
//
// # Addressing
//
// An entry is identified by the shard it was read from, the key, and an
// opaque sub-key chosen by the caller for the command and its other
// arguments ("get", "hget\x00field"). Ristretto stores it under a private
// 64-bit hash of the three; the entry carries the three in full and Get
// compares them, so a hash collision is a miss, never a wrong reply.
// Ristretto hashes are never used to route anything.
//
// # Invalidation: generations
//
// Ristretto has no prefix delete, and its Set is asynchronous: a Set may be
// applied after a Del that followed it. Instead of deleting, the cache keeps
// generation counters: one per key stripe (a hash of the key selects one of
// Config.KeyStripes), one per shard (modulo ShardStripes) and one for the
// whole cache, and a fill counter per reply stripe (see "Monotonic reads").
// InvalidateKey, InvalidateShard and Clear each bump one counter. Every
// entry carries the counters as they were when its Ticket was taken, and
// Get returns it only if they are unchanged. So an
// invalidation hides every reply of the key at once, whatever ristretto
// still has buffered, in one atomic add and with no per-key index: the
// cache's own memory is fixed (KeyStripes×16 bytes, by default 1/16 of
// MaxBytes, + about 12 KiB, and Admit's sketch, at most 2×NumCounters
// bytes),
// whatever the number of keys. Hidden entries keep their budget until their TTL,
// eviction, or an overwrite by a fresh reply for the same (shard, key,
// sub-key), which ristretto applies at once. A key stripe shared by two keys
// makes an invalidation of one drop the other's replies too: a needless
// miss, never a stale hit.
//
// # The late-Set race
//
// A client reads a reply from a shard while a write to the same key, by
// the same client, lands and invalidates; the old reply then arrives and
// is cached after the invalidation. To rule this out, take a Ticket before
// sending the read and cache the reply with SetWithTicket: if an
// invalidation of the key or its shard (or Clear) happened since the
// ticket, the reply is refused, and if the invalidation happens after the
// check but before ristretto applies the entry, the entry's generations
// are already outdated and Get never returns it. Set takes the ticket at
// call time and is only for values known to be current.
//
// # Monotonic reads
//
// A client that returns a reply read from a server while the cache holds
// an older reply of the same key would read backwards at its next hit:
// the older reply's invalidation may still be on its way. Fill and
// Supersede prevent it. Besides the key, shard and cache counters, each
// reply stripe (a hash of shard, key and sub-key) has a fill counter.
// Fill caches a reply read under a FillTicket by a compare-and-swap of
// that counter from the ticket's value to the next: any reply of the
// sub-key stored before is hidden, and if anything happened since the
// ticket (an invalidation, a Supersede, another fill of the sub-key), Fill
// caches nothing but still moves the counter on. Supersede bumps the key
// counter, hiding every sub-key, for a reply read outside the cache. A
// caller that calls one of them after every reply it reads from a server,
// before returning it, gets: a reply of a sub-key that Get returns was
// read after every reply of that sub-key returned before the Get started.
// The argument is in the redshard repository's docs/hot-reads.md.
//
// FillAbsorbing is Fill for a caller that knows its reply is newer than
// the events behind some bumps of the key counter made since the ticket
// (a write-through refill: the invalidations of writes the server ran
// before the read, and the bumps after writes that ran before it). It passes
// their number; the reply is cached only if the key counter moved by
// exactly that many, and under the counter as it then is, so any other
// bump refuses it and every later one hides it. KeyStripe says which keys
// share a key counter, so that the caller counts their bumps too. Refill
// is FillAbsorbing for a reply the caller returns to no one (the refill's
// re-read): refused, it moves no counter, since it has no reply to
// order against the cached one, and so does not hide a newer entry.
//
// # What a client can rely on
//
//   - Get never returns a reply read under a Ticket taken before an
//     InvalidateKey of its key, an InvalidateShard of its shard, or a
//     Clear, that returned before the Get started. This gives
//     read-your-writes when every write invalidates before it returns.
//   - Get never returns a reply past its TTL (on the real clock, and on
//     Config.Now when set). There is no "forever": ttl must be positive.
//   - Set and SetWithTicket returning false means nothing was cached.
//     Returning true means ristretto accepted the entry into its buffer:
//     a small one is visible at once (VisibleAtOnce), a larger one may
//     become visible only later (Wait waits for it); either may be refused
//     by ristretto's admission policy, or be evicted at any time.
//     A miss means nothing; the caller reads from the shard.
//   - The sum of size + len(key) + len(cmd) + EntryOverhead over the
//     entries held stays within Config.MaxBytes, with one exception that
//     comes from ristretto: it evicts only when it admits a new entry, so
//     replacing a cached reply with a larger one can overshoot the budget
//     until the next admission.
//   - Values are shared, not copied: do not modify a value after Set or a
//     value returned by Get.
//
// # Admission
//
// Admit is for a caller that must decide, before it reads a key, whether
// to read it through the cache (a tracked read that fills it) or past it.
// While the cache has room it admits every key at its first read; once it
// is full, a TinyLFU-style count-min sketch of 4-bit counters, halved
// every NumCounters calls, admits a key from its second read within about
// that many reads. So a full cache's tail, keys read once, is neither
// cached nor tracked, while every key read again soon is; ristretto's own
// admission still decides, once the cache is full, which entry a fill
// displaces, and MaxBytes bounds the whole.
//
// # The front index
//
// A hot key's replies are read by every goroutine at once; in ristretto
// each Get takes a read lock of the key's map stripe and records the access
// in a striped buffer, so those Gets contend on a few cache lines. Get
// therefore first looks in a small direct-mapped index (4096 slots) of
// entries it found in ristretto or that were just stored, which it reads
// with one atomic load and no lock. An entry there is returned only after
// the same checks as one from ristretto (identity, generations, expiry) and
// never after Close, so the index changes nothing of what Get returns.
// A store places a small entry there before it hands it to ristretto, so
// that a reply just filled is found at once, without waiting for
// ristretto's goroutine to apply it (a round trip through that goroutine
// per fill, which Wait is). Evictions and rejections, which can only
// follow that, clear its slot; an entry it may hold is at most
// MaxBytes/16384 in cost, so what it keeps alive past a racing eviction
// stays under a quarter of MaxBytes.
package localcache
