package redshard

import "errors"

// Configuration errors, returned (wrapped, with the shard they concern) by
// NewClient. Match them with errors.Is.
var (
	// ErrNilOptions is returned by NewClient when opt is nil.
	ErrNilOptions = errors.New("redshard: nil Options")
	// ErrNoShards is returned when Options.Shards is empty.
	ErrNoShards = errors.New("redshard: no shards")
	// ErrEmptyName is returned for a shard without a Name.
	ErrEmptyName = errors.New("redshard: empty shard name")
	// ErrDuplicateName is returned when two shards share a Name.
	ErrDuplicateName = errors.New("redshard: duplicate shard name")
	// ErrEmptyAddr is returned for a shard with neither an Addr nor a Failover configuration.
	ErrEmptyAddr = errors.New("redshard: empty shard address")
	// ErrDuplicateAddr is returned when two shards point at the same address.
	ErrDuplicateAddr = errors.New("redshard: duplicate shard address")
	// ErrBadWeight is returned for a negative, NaN or infinite Weight, or one so
	// large the ring would need an unreasonable number of points.
	ErrBadWeight = errors.New("redshard: bad shard weight")
	// ErrBadVnodes is returned for a negative Options.VnodesPerWeight.
	ErrBadVnodes = errors.New("redshard: bad VnodesPerWeight")
)

// Routing errors. A command that cannot be answered correctly across shards
// fails with one of these before anything is sent.
var (
	// ErrCrossShard means a command whose keys must live together (RENAME,
	// SMOVE, *STORE, MSETNX, multi-key EVAL, a transaction, WATCH, ...) names
	// keys owned by different shards. Put the keys under one {hash tag}.
	ErrCrossShard = errors.New("redshard: keys live on different shards")
	// ErrNotSharded means a command has no key to route by and no defined way
	// to combine the shards' replies (INFO, CLIENT LIST, SELECT, ...). The
	// error text says what to use instead, usually ForEachShard.
	ErrNotSharded = errors.New("redshard: command cannot be routed to one shard")
	// ErrUnknownCommand means the routing table does not know where the
	// command's keys are, so it refuses to guess. Run it on the right shard
	// with ShardFor or ForEachShard.
	ErrUnknownCommand = errors.New("redshard: unknown command")
)
