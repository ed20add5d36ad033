package redshard

import (
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configures a Client. NewClient copies it; changing it afterwards
// has no effect.
type Options struct {
	// Shards lists the Redis servers keys are spread over. Required.
	Shards []Shard

	// ShardOptions is the template for every shard's go-redis client:
	// password, ACL username, TLS, DB, pool sizes, timeouts, retries,
	// Protocol. It is cloned per shard and Addr is replaced by the shard's.
	// Nil means go-redis defaults.
	ShardOptions *redis.Options

	// VnodesPerWeight is the number of ring points per unit of shard weight.
	// Zero means the ring package's default (see package ring). Every client
	// of a fleet must use the same value, or they disagree about owners.
	VnodesPerWeight int

	// NewShardClient, if set, builds each shard's client from the options
	// redshard prepared (template clone or Shard.Options, with Addr set), for
	// example to add instrumentation. Nil means redis.NewClient, or
	// redis.NewFailoverClient for a shard with Failover set.
	NewShardClient func(s Shard, opt *redis.Options) *redis.Client

	// HandoffWindow is how long after SetShards a key whose owner changed
	// is still brought over from its previous owner on first use (see
	// SetShards). Rebalance and EndHandoff end it early. Zero means 10
	// minutes; negative turns handoff off (moved keys then miss until
	// Rebalance moves them).
	HandoffWindow time.Duration

	// Load turns on fleet-wide stampede control for GetOrLoad: a lease on
	// the key's shard lets one process of the fleet load a missing key while
	// the others wait for its value (see LoadOptions). Nil means GetOrLoad
	// only coalesces the misses of this process.
	Load *LoadOptions

	// Health configures the per-shard heartbeat that marks shards down so
	// their commands fail fast with ErrShardDown (or, with Failover, go to
	// a stand-in shard). Nil means the defaults of HealthOptions: a PING
	// every 500ms, down after 2 failures, up after 2 successes, no failover.
	Health *HealthOptions

	// HotKeys turns on hot-key detection and mitigation (a local cache, or
	// copies on several shards) with bounded staleness. Nil, the default,
	// turns it off: a drop-in client does not change semantics unasked.
	HotKeys *HotKeyOptions
}

// Shard is one Redis server (or one Sentinel-managed primary) on the ring.
type Shard struct {
	// Name is the shard's stable identity on the ring: keys follow names, not
	// addresses, so a shard can move to a new address without moving keys,
	// and renaming a shard moves its keys. Required, unique.
	Name string

	// Addr is host:port. Required unless Failover is set.
	Addr string

	// Weight is the shard's relative capacity: a shard of weight 2 owns
	// twice the keys of a shard of weight 1. Zero means 1.
	Weight float64

	// Options, if set, replaces Options.ShardOptions for this shard (its Addr
	// is filled from Shard.Addr when empty).
	Options *redis.Options

	// Failover, if set, makes this shard a Sentinel-managed primary: the
	// shard's client is redis.NewFailoverClient(Failover) and Addr may be
	// empty. High availability inside a shard is Sentinel's job; redshard
	// only decides which shard owns a key.
	Failover *redis.FailoverOptions
}

// String names the shard and its address. It never prints credentials.
func (s Shard) String() string {
	if s.Failover != nil {
		return fmt.Sprintf("%s(sentinel master %q)", s.Name, s.Failover.MasterName)
	}
	return fmt.Sprintf("%s(%s)", s.Name, s.Addr)
}

// identity is what two shards must not share: the address, or the Sentinel
// master they follow.
func (s Shard) identity() string {
	if s.Failover != nil {
		return "sentinel:" + s.Failover.MasterName
	}
	return s.Addr
}

// validateShards checks a shard list the way NewClient and SetShards do and
// returns a copy with weights normalised (0 -> 1).
func validateShards(shards []Shard) ([]Shard, error) {
	if len(shards) == 0 {
		return nil, ErrNoShards
	}
	out := make([]Shard, len(shards))
	names := make(map[string]int, len(shards))
	addrs := make(map[string]string, len(shards))
	for i, s := range shards {
		switch {
		case s.Name == "":
			return nil, fmt.Errorf("%w: shard #%d (addr %q)", ErrEmptyName, i, s.Addr)
		case s.Addr == "" && s.Failover == nil:
			return nil, fmt.Errorf("%w: shard %q", ErrEmptyAddr, s.Name)
		case s.Failover != nil && s.Failover.MasterName == "":
			return nil, fmt.Errorf("%w: shard %q: Failover.MasterName is empty", ErrEmptyAddr, s.Name)
		case math.IsNaN(s.Weight) || math.IsInf(s.Weight, 0) || s.Weight < 0:
			return nil, fmt.Errorf("%w: shard %q has weight %v", ErrBadWeight, s.Name, s.Weight)
		}
		if j, dup := names[s.Name]; dup {
			return nil, fmt.Errorf("%w: %q is shard #%d and #%d", ErrDuplicateName, s.Name, j, i)
		}
		names[s.Name] = i
		id := s.identity()
		if other, dup := addrs[id]; dup {
			return nil, fmt.Errorf("%w: shards %q and %q both use %s", ErrDuplicateAddr, other, s.Name, id)
		}
		addrs[id] = s.Name
		if s.Weight == 0 {
			s.Weight = 1
		}
		out[i] = s
	}
	return out, nil
}

// shardOptions builds the go-redis options of one shard from the template.
func (o *Options) shardOptions(s Shard) *redis.Options {
	var opt redis.Options
	switch {
	case s.Options != nil:
		opt = *s.Options
	case o.ShardOptions != nil:
		opt = *o.ShardOptions
	}
	if opt.MaintNotificationsConfig != nil {
		mc := *opt.MaintNotificationsConfig
		opt.MaintNotificationsConfig = &mc
	}
	if opt.Addr == "" || s.Options == nil {
		opt.Addr = s.Addr
	}
	return &opt
}

// newShardClient builds the go-redis client of one shard.
func (o *Options) newShardClient(s Shard) *redis.Client {
	if s.Failover != nil && o.NewShardClient == nil {
		fo := *s.Failover
		return redis.NewFailoverClient(&fo)
	}
	opt := o.shardOptions(s)
	if o.NewShardClient != nil {
		return o.NewShardClient(s, opt)
	}
	return redis.NewClient(opt)
}
