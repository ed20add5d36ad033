// Package hot is the hot-key layer of a redshard Client: it sits between
// the root's routing and the shard clients, counts every keyed command
// with a streaming detector (package hotkey; the cache hits of keys that
// are not hot four at a time, see unhotHit), and takes the reads of the
// keys it finds hot off their shard, by LocalCache (replies cached in the
// client's memory, package localcache, kept fresh by CLIENT TRACKING on a
// dedicated connection per shard) or SplitCopies (copies of the key on the
// next shards clockwise, made with DUMP and RESTORE). The public face, the
// option and stat types (HotKeyOptions, HotStats, ...), stays in the root,
// which turns them into a Config and reads the layer's counters back.
//
// # Contract
//
// Read-your-writes: a write of a key through the client, by any path
// (single command, split command, pipeline, transaction, Watch, a stand-in
// of a down shard), evicts the key's cached replies and deletes its split
// copies before it returns; a keyless write (FLUSHDB) drops them all. The
// root calls Written after every write that did not go through Process,
// and Served after every read the cache did not answer.
//
// Reads never go backwards (LocalCache): once the client has returned a
// reply of a read of a key (a command and its arguments), a read of the
// same kind that starts afterwards never returns an older one, whichever
// connection, pipeline or AutoPipeliner carried either, and whatever
// connection the server closes. Every reply from a server bumps a
// generation counter covering its cached entry before it is returned
// (Fill, Supersede); a fill whose ticket predates a bump stores nothing.
// The argument, step by step, is docs/hot-reads.md (in the repository's
// root); the counters, tickets and fills it rests on are localcache's (see
// its package doc, "Monotonic reads").
//
// Lag behind a write made elsewhere: the invalidation's delivery while the
// shard's invalidation connection is live; about half a second more after
// a reading connection is closed by the server (track.go's checkReaders);
// never more than the entry's lifetime. A reply stored by a tracked read
// of a key read again or hot, or by a write-through refill, lives
// Config.TrackedLifetime (one minute when the root's MaxStaleness is left
// zero) and no longer than its key's remaining TTL, which PTTL reads
// right after the read in the same round trip (cache.go, lifetime; the
// argument that reading it after the read is safe is in
// docs/hot-reads.md, "Lifetime of a tracked reply"). Any other entry, a
// key's first read, an untracked read's, and split copies, lives
// MaxStaleness (1s by default), which alone bounds a shard without
// tracking.
//
// # Concurrency
//
// Path, Shard and the split registry are safe for concurrent use; a Pipe
// belongs to one pipeline call. Shared reads, copy fills and copy deletes
// run as flights of Env.Flights, detached from their callers' contexts and
// bounded by a timeout; the client's Close of that runner ends them. A
// miss on a shard that tracks is no flight but a direct miss (cache.go,
// directMiss): its caller queues a tracked read in the shard's batcher and
// waits for it or for its own context, and the shard's senders send the
// batches, detached and bounded the same way. With tracking, each Shard
// runs four goroutines (the invalidation subscriber, the reader watch and
// two batch senders), started at the first hot read of the shard and ended
// by Shard.Close, which the root's backend calls once when it closes, or,
// for the senders, by the client's Close of the flights (a read queued
// after they ended fails with redis.ErrClosed). Path.Close
// releases the local cache, after the flights and the backends are closed.
//
// # What it needs from the root
//
// Nothing of the root's structs. Each command brings a Topology (the ring
// it was routed on: epoch, whether keys go through a handoff, a key's owner
// and replicas, a shard's Backend); a Backend is one shard server (its
// command client, its send path, whether it is down, its Shard state, a
// new tracking client, its heartbeat client); Env gives the flight runner,
// a walk over the current shards' states and the internal-key index used
// for split copies. The root implements Topology and Backend by pointer
// conversions of its topology and backend (hot.go in the root), so that
// Process costs no allocation.
package hot
