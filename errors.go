package redshard

import (
	"errors"
	"fmt"

	"github.com/redshard/redshard/internal/member"
	"github.com/redshard/redshard/internal/rediserr"
)

// Every sentinel error of the package is declared here. Errors returned by
// redshard wrap one of them with context (which shard, which key, which
// field); match them with errors.Is.

// Configuration errors, returned by NewClient, SetShards, Options.Validate,
// RebalanceOptions.Validate and LoadConfig. Each also matches
// ErrInvalidOptions, and its message names the field.
var (
	// ErrInvalidOptions is matched by every configuration error.
	ErrInvalidOptions = errors.New("redshard: invalid options")
	// ErrNilOptions is returned by NewClient when opt is nil.
	ErrNilOptions = errors.New("redshard: nil Options")
	// ErrNoShards is returned when Options.Shards is empty.
	ErrNoShards = errors.New("redshard: no shards")
	// ErrEmptyName is returned for a shard without a Name.
	ErrEmptyName = errors.New("redshard: empty shard name")
	// ErrDuplicateName is returned when two shards share a Name.
	ErrDuplicateName = errors.New("redshard: duplicate shard name")
	// ErrEmptyAddr is returned for a shard with neither an Addr nor a
	// Failover configuration with a MasterName.
	ErrEmptyAddr = errors.New("redshard: empty shard address")
	// ErrInvalidAddr is returned for a shard Addr that is neither host:port
	// (a host name or an IP literal, IPv6 in brackets, and a port number)
	// nor a Unix socket path (one starting with "/", or any path when the
	// shard's Shard.Options.Network is "unix").
	ErrInvalidAddr = errors.New("redshard: invalid shard address")
	// ErrDuplicateAddr is returned when two shards point at the same server
	// (the same address, or the same Sentinel master).
	ErrDuplicateAddr = errors.New("redshard: duplicate shard address")
	// ErrInvalidWeight is returned for a negative, NaN or infinite Weight,
	// or one so large the ring would need an unreasonable number of points.
	ErrInvalidWeight = errors.New("redshard: invalid shard weight")
	// ErrInvalidVnodes is returned for a negative Options.VnodesPerWeight.
	ErrInvalidVnodes = errors.New("redshard: invalid VnodesPerWeight")
	// ErrInvalidHealthOptions is returned for invalid Options.Health.
	ErrInvalidHealthOptions = errors.New("redshard: invalid HealthOptions")
	// ErrInvalidHotKeyOptions is returned for invalid Options.HotKeys.
	ErrInvalidHotKeyOptions = errors.New("redshard: invalid HotKeyOptions")
	// ErrInvalidLoadOptions is returned for invalid Options.Load.
	ErrInvalidLoadOptions = errors.New("redshard: invalid LoadOptions")
	// ErrInvalidRebalanceOptions is returned by Rebalance and
	// RebalanceOptions.Validate for invalid RebalanceOptions.
	ErrInvalidRebalanceOptions = errors.New("redshard: invalid RebalanceOptions")
)

// ErrInvalidArgument is returned by a method called with an argument that
// can never succeed (GetOrLoad with an empty key, a nil load function or a
// negative ttl).
var ErrInvalidArgument = errors.New("redshard: invalid argument")

// ErrLibrariesDiffer is returned by SetShards when the function libraries
// it must give a joining server are not known: the current shards hold
// different ones, or the joining server holds others. The ring is left
// unchanged.
var ErrLibrariesDiffer = errors.New("redshard: the shards hold different function libraries")

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

// Membership and health errors.
var (
	// ErrShardDown is returned, wrapped with the shard's name and address,
	// for commands whose shard the health monitor has marked down, unless
	// HealthOptions.Failover sends them to a stand-in shard.
	ErrShardDown = errors.New("redshard: shard is down")
	// ErrHandoffInProgress is returned by SetShards while the previous
	// membership change is not finished: run Rebalance to finish it. Moves
	// of a change also fail with it while commands of the previous ring
	// still run after a generous bound.
	ErrHandoffInProgress = errors.New("redshard: the previous membership change is still being handed off")
	// ErrStaleCursor is returned, wrapped with the cursor, for a SCAN
	// cursor made for another shard list than the current one (SetShards
	// changed it during the scan): start again with cursor 0.
	ErrStaleCursor = errors.New("redshard: SCAN cursor made for another shard list")
	// ErrFenced is returned, wrapped with the reason, for a command on a
	// key that a fleet's membership change may be moving, by a process
	// following a registry (Options.Registry) that has lost it for longer
	// than its lease: the fleet may have gone on without it. Other keys are
	// served. It ends once the process has caught up with the registry.
	ErrFenced = member.ErrFenced
	// ErrRegistryBehind is returned (FleetStatus.Err; fleet.Apply) when a fleet's
	// registry holds a config older than what the fleet has followed, or
	// another config at the same version: it lost its data or was
	// restored from an older copy; or, to a process that starts or
	// catches up, when a server's beacon names a newer config than the
	// registry's (or another at its version). A process that sees it
	// fences itself (it refuses, with ErrFenced wrapping this error, the
	// keys the servers' beacons say a change moves) until the registry is
	// ahead again; fleet.Apply restores the registry from the servers'
	// beacons (docs/operations.md).
	ErrRegistryBehind = member.ErrRegistryBehind
	// ErrFleetManaged is returned by SetShards on a client that follows a
	// registry: its shard list changes with the fleet's (redshard apply).
	ErrFleetManaged = errors.New("redshard: the shard list is managed by the registry")
	// ErrMisplacedData is returned by fleet.Apply on an empty registry
	// when the servers hold keys that the document's ring places
	// elsewhere: data written under another ring (another recipe,
	// vnodes_per_weight or shard list). Nothing is published.
	ErrMisplacedData = errors.New("redshard: apply: the servers' data is placed by another ring")
)

// optionError is an invalid configuration value. Its message names the
// field as Go code spells it ("Health.Interval", "Shards[2].Weight"), and it
// matches both its kind and ErrInvalidOptions.
type optionError struct {
	kind  error  // the specific sentinel: ErrInvalidHealthOptions, ...
	field string // "Health.Interval"; empty for the whole list
	msg   string
}

func (e *optionError) Error() string {
	if e.field == "" {
		return fmt.Sprintf("%v: %s", e.kind, e.msg)
	}
	return fmt.Sprintf("%v: %s: %s", e.kind, e.field, e.msg)
}

func (e *optionError) Unwrap() []error { return []error{e.kind, ErrInvalidOptions} }

// invalid builds an optionError.
func invalid(kind error, field, format string, args ...any) error {
	return &optionError{kind: kind, field: field, msg: fmt.Sprintf(format, args...)}
}

// shardRedisError is a server's error reply that reached the caller through
// a split, a fan-out or a SCAN: a redis.Error (a direct type assertion
// works, as with a single server) whose message is the server's, prefix
// first (WRONGTYPE, ERR, NOSCRIPT, ...), followed by the shard that said it.
type shardRedisError struct {
	err   error // a redis.Error
	shard Shard
}

func (e *shardRedisError) Error() string {
	where := e.shard.Addr
	if e.shard.Failover != nil {
		where = "sentinel master " + e.shard.Failover.MasterName
	}
	return fmt.Sprintf("%s (shard %s %s)", e.err.Error(), e.shard.Name, where)
}

func (e *shardRedisError) Unwrap() error { return e.err }

// RedisError marks the error as a server's (redis.Error).
func (e *shardRedisError) RedisError() {}

// isRedisError reports whether err is a server's error reply rather than a
// failure of the connection (see internal/rediserr).
func isRedisError(err error) bool { return rediserr.Is(err) }
