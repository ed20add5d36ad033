// Package merge combines the replies of one keyless command that the root
// sent, as copies, to several shards (a fan-out: KEYS, DBSIZE, SCRIPT
// EXISTS, PUBSUB CHANNELS, CONFIG GET...) into the one reply a single
// server would give: a sum, a maximum, a concatenation, an element-wise
// AND, any one reply, or one reply that every shard must agree on.
//
// It is pure: functions of the commands' replies (go-redis Cmders that have
// run), with no state and no knowledge of the ring. What needs the ring
// (which shard a reply came from, a channel's owner, the shards' names in
// errors) stays in the root, which hands the replies over in shard order.
// Safe for concurrent use on distinct commands.
//
// Reply values are read and written through package replyval; the root
// needs nothing else of it, and it needs nothing of the root.
package merge
