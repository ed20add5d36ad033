// Package command is redshard's routing table: given a command's arguments
// exactly as go-redis builds them, it says how the command is routed (its
// Class) and which arguments are keys.
//
// go-redis's own first-key guess is wrong for many commands (EVAL, XREAD,
// ZUNION, MIGRATE, OBJECT ENCODING, ...), and a sharded client that routes by a
// wrong guess sends commands to the wrong server silently. So the table is our
// own: one row per command and per container subcommand ("object|encoding"),
// written from real Redis's COMMAND INFO (Redis 7.0) plus the commands that
// Redis 7.2 to 8.x and go-redis v9.23 added, and checked against a real
// server's COMMAND GETKEYS in integration_test/command_test.go.
//
// Key positions follow COMMAND GETKEYS, with these deliberate differences:
//
//   - PUBLISH and SPUBLISH are class Channel and report the channel's position,
//     so a message reaches the shard a subscriber of that channel is on.
//   - SORT and SORT_RO BY/GET patterns that contain '*' read other keys on the
//     server that runs the SORT. Such a pattern is accepted only when it has a
//     non-empty {hash tag} before its first '*' (all keys it forms then hash
//     like the tag), and its position is reported as a key so the client
//     checks it lives with the sorted key. Any other key-reading pattern sets
//     the OtherKeys flag: its reads would see only one shard's keys, so the
//     client runs it only on a one-shard ring.
//   - GEORADIUS and GEORADIUSBYMEMBER report the destination of every STORE
//     and STOREDIST option (Redis writes the last; GETKEYS reports the first
//     of each kind), so none can name a key on another shard.
//   - MIGRATE with an empty key and no KEYS option, or with both a key and
//     KEYS, is an error instead of a guess.
//   - WATCH (NotSharded: the client's Watch handles it) and SSUBSCRIBE and
//     SUNSUBSCRIBE (NotSharded: the client's SSubscribe) still report their
//     keys or shard channels; GETKEYS of Redis 7.0 does not report shard
//     channels.
//
// Module commands: RedisJSON, Bloom/Cuckoo/Count-Min/Top-K/t-digest, vector
// sets and time series commands that name their keys are Keyed like core
// commands. RediSearch FT.* commands are NotSharded: an index and its
// aliases, dictionaries and cursors are per server and cover only that
// server's keys, so a query on one shard would return partial results
// without saying so (FT.SUG* suggestion dictionaries are plain keys and are
// Keyed). TS.QUERYINDEX and TS.MGET fan out and concatenate (every series is
// on one shard); TS.MRANGE, TS.MREVRANGE and TS.QUERYLABELS are NotSharded
// because GROUPBY/REDUCE and de-duplication cannot be merged by
// concatenation. Commands the table does not know are Unknown, and the client
// refuses them rather than guess.
//
// Lookup is on every command's path; for the usual commands it does not
// allocate when the caller passes a keys slice with spare capacity.
package command
