// Package redshard is a drop-in redis.UniversalClient (go-redis v9) that
// spreads keys over many independent Redis servers, its shards. Each shard
// has its own go-redis client; a weighted consistent-hash ring with virtual
// nodes (package ring, whose doc states the placement recipe exactly, with
// test vectors) decides which shard owns a key, so bigger machines get a
// bigger share and a membership change moves only the keys that must move.
//
//	rdb, err := redshard.NewClient(&redshard.Options{
//		Shards: []redshard.Shard{
//			{Name: "cache-a", Addr: "10.0.0.1:6379", Weight: 1},
//			{Name: "cache-b", Addr: "10.0.0.2:6379", Weight: 2},
//		},
//	})
//	var c redis.UniversalClient = rdb // the rest of the application does not change
//
// That holds for code that uses a redis.UniversalClient or redis.Cmdable.
// Code that holds a *redis.Client changes that one type: the field or
// parameter becomes a redis.UniversalClient, which a *redis.Client also
// satisfies.
//
// # Routing
//
// Every command go-redis can send falls into one class of the routing
// table (internal/command):
//
//   - keyed: one key, or keys that must live together (RENAME, SMOVE,
//     *STORE, MSETNX, multi-key EVAL, transactions, WATCH): sent to the
//     owner, or refused with ErrCrossShard before anything is sent when the
//     keys live on different shards. Put such keys under one {hash tag}.
//   - split: MGET, MSET, MSETEX, DEL, UNLINK, EXISTS, TOUCH are split per
//     shard, run in parallel and merged in the caller's order.
//   - fan-out: keyless commands with a defined merge (PING, DBSIZE, KEYS,
//     FLUSHDB, SCRIPT LOAD, ...) go to every shard.
//   - SCAN walks shard after shard; PUBLISH goes to the channel's owner.
//   - refused: keyless commands whose merged answer would be a lie (INFO,
//     CLIENT ID, TIME, ...) fail with ErrNotSharded, and commands the table
//     does not know with ErrUnknownCommand; use ForEachShard or ShardFor.
//   - one shard: with a one-shard ring every command, keyless or unknown,
//     goes to that shard as it is, as with a plain go-redis client.
//   - Pub/Sub: Subscribe, PSubscribe and SSubscribe return a go-redis
//     PubSub whose channels live on their owners and patterns on every
//     shard, merged into one stream that follows membership changes.
//
// Pipelines are split per shard and run in parallel; transactions run on
// one shard or not at all.
//
// # Guarantees
//
//  1. Placement is a published function: two clients with the same shard
//     list, VnodesPerWeight and RingRecipe agree on every key's owner.
//  2. Minimal movement: adding or removing a shard moves only keys to or
//     from it, about its weight's share.
//  3. Replicas (for split copies and failover) are the next distinct
//     shards clockwise on the ring.
//  4. A command never silently goes to the wrong shard: it is routed,
//     split, fanned out with a stated merge, or refused before anything is
//     sent.
//  5. Read-your-writes through one client: a write invalidates the
//     client's cached replies and split copies of its keys before it
//     returns.
//  6. Bounded, stated staleness: with HotKeyOptions, a hot key's reply
//     may lag another process's write by at most MaxStaleness (with
//     CLIENT TRACKING, by the invalidation's delivery time, a tracked
//     reply living at most DefaultTrackedLifetime when MaxStaleness is
//     left zero, and never past its key's TTL). Off by default.
//  7. Membership changes keep the cache warm: after SetShards (or a
//     fleet's change through its registry) a moved key is brought over
//     from its previous owner on first use, once however many goroutines
//     ask, and Rebalance moves the rest (see SetShards and Rebalance for
//     what each step guarantees).
//  8. Failures are explicit: a shard the heartbeat marks down fails fast
//     with ErrShardDown unless HealthOptions.Failover was chosen, and bad
//     configuration is an error naming the field (Options.Validate), never
//     a panic or a silent default.
//  9. No leaks: Close cancels and waits for every goroutine and shared
//     call the client started, and closes every connection it opened; a
//     closed client returns redis.ErrClosed.
//
// # Fleets
//
// Many processes that share shards must agree on the shard list. Each can
// be given the list (Options.Shards) and told of a change with SetShards,
// or, for a fleet, follow one registry instead (Options.Registry, package
// registry: a Redis the operator designates, or etcd through
// registry/etcdregistry). The registry holds the ring with an epoch; a
// change (the redshard apply command, or fleet.Apply) runs in phases, each
// published only once every live process has acknowledged the previous
// one, so processes are never more than one phase apart and no write is
// lost between them. A process that loses the registry for longer than its
// lease refuses, with ErrFenced, the keys a change could move until it has
// caught up. docs/operations.md ("A fleet") is the operator's side,
// docs/membership.md the protocol.
//
// # Hooks and observability
//
// AddHook and AddShardHook put go-redis hooks on every shard client (they
// see the traffic each server really gets); AddCommandHook puts them in
// front of routing (they see each command as the application sent it).
// Stats, LoadStats and HotKeys report the client's state; the module
// github.com/redshard/redshard/redshardotel exports them as OpenTelemetry
// metrics.
//
// Errors: every sentinel is in errors.go; match them with errors.Is.
package redshard
