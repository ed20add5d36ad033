package redshard

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/ring"
)

// Options configures a Client. NewClient copies it; changing it afterwards
// has no effect. Validate reports what NewClient would reject.
type Options struct {
	// Shards lists the Redis servers keys are spread over. Required, unless
	// Registry is set: it must then be empty, since the list comes from the
	// registry.
	Shards []Shard

	// ShardOptions is the template for every shard's go-redis client:
	// password, ACL username, TLS, DB, pool sizes, timeouts, retries,
	// Protocol. It is cloned per shard and Addr is replaced by the shard's.
	// It does not apply to a Sentinel shard of Shards, whose clients are
	// built from its Shard.Failover alone; it is the default of
	// FailoverShardOptions. Nil means go-redis defaults.
	ShardOptions *redis.Options

	// FailoverShardOptions is the template of the Sentinel shards that a
	// registry's document names (a shard with "sentinel" instead of
	// "addr"). The document carries the master's name and the Sentinels'
	// addresses, never credentials or timeouts: each such shard's
	// Shard.Failover is a copy of this template with MasterName and
	// SentinelAddrs the document's, so every process connects with its own
	// settings. Set it for what Sentinel alone has: SentinelUsername,
	// SentinelPassword, RouteByLatency, ReplicaOnly. Nil means
	// ShardOptions' settings, every field redis.Options and
	// redis.FailoverOptions share (Username, Password, DB, TLSConfig,
	// Protocol, pool sizes, timeouts, retries, Dialer, OnConnect, ...),
	// with no Sentinel credentials. It does not apply to a shard of
	// Shards, whose Failover is used as given. LoadConfig sets it for a
	// file with a Sentinel shard or Sentinel credentials.
	FailoverShardOptions *redis.FailoverOptions

	// VnodesPerWeight is the number of ring points per unit of shard weight.
	// Every client of a fleet must use the same value, or they disagree
	// about owners. Must not be negative. Default ring.DefaultVnodesPerWeight.
	VnodesPerWeight int

	// RingRecipe is the ring's placement recipe: ring.Recipe1 (a key
	// belongs to the first point at or after its position) or ring.Recipe2
	// (the nearest point, which balances as well with an eighth of the
	// points: a ring of 100 shards takes 0.6 MB instead of 5 MB and builds
	// about 7x faster). Default 0: Recipe1, the placement every ring had
	// before Recipe2 existed. Every client of a fleet must use the same
	// recipe; changing it moves most keys (docs/operations.md, "The
	// ring's placement recipe"). With Registry it must be 0: the
	// registry's document names the fleet's recipe ("ring_recipe"; none
	// means Recipe1), so that no process's own setting can place keys
	// where the rest of the fleet does not look.
	RingRecipe int

	// NewShardClient, if set, builds every go-redis client redshard opens
	// to a shard with an address (the command client, the heartbeat, the
	// hot-key tracking reader and subscriber) from the options redshard
	// prepared for that connection: a template clone or Shard.Options, with
	// Addr set and the connection's own settings applied. Use it to add
	// instrumentation or a custom dialer. It is not called for a Sentinel
	// shard (Shard.Failover set), whose options have no address: see
	// NewFailoverShardClient. Default redis.NewClient.
	NewShardClient func(s Shard, opt *redis.Options) *redis.Client

	// NewFailoverShardClient, if set, builds every go-redis client redshard
	// opens to a Sentinel shard (Shard.Failover set), as NewShardClient does
	// for the others: opt is a copy of the shard's FailoverOptions with the
	// connection's own settings applied (s.Failover is the same copy).
	// Default redis.NewFailoverClient.
	NewFailoverShardClient func(s Shard, opt *redis.FailoverOptions) *redis.Client

	// Load turns on fleet-wide stampede control for GetOrLoad: a lease on
	// the key's shard lets one process of the fleet load a missing key while
	// the others wait for its value (see LoadOptions). Default nil:
	// GetOrLoad only coalesces the misses of this process.
	Load *LoadOptions

	// Health configures the per-shard heartbeat that marks shards down so
	// their commands fail fast with ErrShardDown (or, with Failover, go to
	// a stand-in shard). The heartbeat starts with the client's first
	// connection to a shard (a client never used runs none) and stops at
	// Close. Default nil: the defaults of HealthOptions, a PING every 500ms,
	// down after 2 failures, up after 2 successes, no failover.
	Health *HealthOptions

	// HotKeys turns on hot-key detection and mitigation (a local cache, or
	// copies on several shards) with bounded staleness. Default nil: off,
	// since a drop-in client does not change semantics unasked.
	HotKeys *HotKeyOptions

	// Registry, when set, is where the client takes its shard list from:
	// the ring config a fleet shares (package registry; the document is the
	// JSON LoadConfig reads, of which only "shards", "vnodes_per_weight"
	// and "ring_recipe" are used; a Sentinel shard's "sentinel" names its
	// master and Sentinels, and the process connects to it with
	// FailoverShardOptions). Shards must then be empty. NewClient reads the config,
	// and the client follows every change by itself, phase by phase,
	// reporting itself as a member of the fleet (docs/membership.md,
	// "A fleet"). SetShards is refused. The client does not close the
	// registry.
	Registry registry.Registry

	// Fleet tunes how the client follows Registry. Default nil: the
	// defaults of FleetOptions.
	Fleet *FleetOptions

	// AutoPipeline sends every command of the client through go-redis's
	// blocking AutoPipeliner of the command's shard, so that the commands
	// of many goroutines to one shard go out together as one pipeline:
	// same results, same errors, much less CPU and far more commands per
	// second under concurrency (docs/results.md). Commands that must not
	// share a connection or a batch are sent as without it: blocking
	// commands, commands whose context is already done, commands with a
	// WithTimeout timeout or, with ShardOptions.ContextTimeoutEnabled, a
	// context deadline; pipelines, transactions, Watch and Pub/Sub keep
	// their own connections. A queued command does not watch its context
	// (go-redis's AutoPipeliner executes it on its own); the shard's read
	// and write timeouts still bound it. Default false (see
	// docs/results.md for why).
	//
	// With AutoPipelineOptions.FullDuplex, each shard's AutoPipeliner is
	// go-redis's full-duplex one: one held pipeline-pool connection per
	// shard, written and read at once, on a shard client of its own that
	// carries no hook until the application adds a shard hook (go-redis
	// runs each full-duplex command's hooks on a goroutine of its own when
	// a client has any). It is not faster on a small machine: on four
	// servers and two cores go-redis's full-duplex engine gives about half
	// the half-duplex default's throughput (docs/results.md). What stays
	// the same: the held connection goes through the stream client's
	// dialer (tracked, so markDown severs it, and an I/O error while the
	// shard is down is its ErrShardDown) and OnConnect (a fleet process
	// names it and the fence admits it); the commands that go alone above still go alone
	// (blocking commands never ride the stream); each command still sees
	// every shard hook. What changes, as go-redis documents for
	// FullDuplex: a shard hook (AddHook, AddShardHook) runs after the
	// command's write is queued, so a hook that returns without calling
	// next does not stop the command, and a hook must neither change the
	// command nor read its result before next. A hook that must veto or
	// rewrite a command belongs in AddCommandHook, which runs before
	// routing. A connection killed under the stream (CLIENT KILL, a
	// restart) has its unanswered commands sent again on a new connection
	// up to the shard's MaxRetries, as a half-duplex batch is: with
	// MaxRetries -1 each command runs once or fails.
	AutoPipeline bool

	// AutoPipelineOptions tunes the AutoPipeliners: the per-shard ones of
	// AutoPipeline, and the one returned by Client.AutoPipeline and
	// AsyncAutoPipeline when called without options. It is validated by
	// NewClient. Nil means go-redis's defaults
	// (redis.DefaultBlockingAutoPipelineOptions for the blocking face,
	// redis.DefaultAutoPipelineOptions for the async one). FullDuplex
	// applies to AutoPipeline's per-shard pipeliners (see AutoPipeline);
	// Client.AutoPipeline's front pipeliners ignore it.
	AutoPipelineOptions *redis.AutoPipelineOptions
}

// FleetOptions tunes a client that follows a registry.
type FleetOptions struct {
	// MemberID names this process among the fleet's members (redshard
	// status lists it). Any bytes: the names of the process's connections
	// escape what Redis refuses there. It must be unique among the live
	// processes, and the registry enforces it: NewClient fails (wrapping
	// registry.ErrMemberIDInUse) while a live process holds the id, and a
	// process whose id another took while it could not heartbeat stays
	// fenced for good (FleetStatus.Err says why). A process that reuses
	// the id of one the fleet dropped is told apart from it by the random
	// incarnation each process draws at start (registry.Member's
	// Incarnation). Default: host/pid/a random suffix.
	MemberID string
	// StartTimeout bounds NewClient's first read of the registry. Default
	// 10s.
	StartTimeout time.Duration
	// HoldTimeout bounds how long a command on a key that the fleet's
	// change moves waits in the Prepare phase for the fleet to reach
	// Migrate. The fleet waits there for every live process's
	// acknowledgement, so one process that stopped answering (frozen,
	// cut off) delays it until the registry drops that process, its
	// lease (registry MemberTTL) after its last heartbeat, plus the
	// driver's beacon wait. A held command that cannot be served within
	// HoldTimeout, or a little before its context's deadline (a tenth of
	// the time it had, at most 100ms), fails with ErrHandoffInProgress
	// rather than a timeout. Default: the lease + 1s.
	HoldTimeout time.Duration
}

// maxFleetCopies stands for the shard count when HotKeys.Copies is
// checked before the registry has named the shards.
const maxFleetCopies = 64

// config is Options resolved: a private copy with every default filled in
// and every value checked. It is immutable once built.
type config struct {
	opt    Options // the caller's Options, copied; Shards normalised
	shards []Shard // normalised copy of opt.Shards (weights 0 -> 1)
	ring   *ring.Ring

	health HealthOptions // resolved
	hot    *hotConfig    // nil without Options.HotKeys
	load   LoadOptions   // resolved; lease tells whether Options.Load was set
	lease  bool
}

// Validate reports whether NewClient would accept o, without contacting a
// server: the first invalid field, named, in an error matching
// ErrInvalidOptions and the field's own sentinel (ErrDuplicateName,
// ErrInvalidHealthOptions, ...). A nil o is ErrNilOptions.
func (o *Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolve checks every field of o and returns the resolved configuration.
// NewClient, SetShards (for the shard list), LoadConfig and the redshard
// command all go through it.
func (o *Options) resolve() (*config, error) {
	if o == nil {
		return nil, ErrNilOptions
	}
	cfg := &config{opt: *o}
	var err error
	if o.Registry != nil {
		if len(o.Shards) > 0 {
			return nil, invalid(ErrInvalidOptions, "Shards", "set with Registry: the shard list comes from the registry, leave Shards empty")
		}
		if f := o.Fleet; f != nil && f.StartTimeout < 0 {
			return nil, invalid(ErrInvalidOptions, "Fleet.StartTimeout", "%v is negative", f.StartTimeout)
		}
		if o.VnodesPerWeight < 0 {
			return nil, invalid(ErrInvalidVnodes, "VnodesPerWeight", "%d is negative", o.VnodesPerWeight)
		}
		if o.RingRecipe != 0 {
			return nil, invalid(ErrInvalidOptions, "RingRecipe", "set with Registry: the registry's document names the fleet's recipe (\"ring_recipe\"), leave RingRecipe 0")
		}
	} else if cfg.shards, cfg.ring, err = resolveShards(o.Shards, o.ringConfig()); err != nil {
		return nil, err
	}
	cfg.opt.Shards = cfg.shards
	if cfg.health, err = o.Health.resolve(); err != nil {
		return nil, err
	}
	if o.HotKeys != nil {
		n := len(cfg.shards)
		if o.Registry != nil {
			n = maxFleetCopies // the shard list is not known yet
		}
		h, err := o.HotKeys.resolve(n)
		if err != nil {
			return nil, err
		}
		cfg.hot = &h
	}
	if cfg.load, err = o.Load.resolve(); err != nil {
		return nil, err
	}
	cfg.lease = o.Load != nil
	if fo := o.FailoverShardOptions; fo != nil {
		c := *fo // a follower reads it at every change of the fleet
		cfg.opt.FailoverShardOptions = &c
	}
	if ap := o.AutoPipelineOptions; ap != nil {
		if err := ap.Validate(); err != nil {
			return nil, invalid(ErrInvalidOptions, "AutoPipelineOptions", "%v", err)
		}
		c := *ap
		cfg.opt.AutoPipelineOptions = &c
	}
	cfg.opt.Load, cfg.opt.Health, cfg.opt.HotKeys = nil, nil, nil // read the resolved copies
	return cfg, nil
}

// ringConfig is the ring o asks for: its VnodesPerWeight and RingRecipe.
func (o *Options) ringConfig() ring.Config {
	return ring.Config{VnodesPerWeight: o.VnodesPerWeight, Recipe: o.RingRecipe}
}

// checkRecipe refuses a RingRecipe that names no recipe.
func checkRecipe(recipe int) error {
	switch recipe {
	case 0, ring.Recipe1, ring.Recipe2:
		return nil
	}
	return invalid(ErrInvalidOptions, "RingRecipe", "%d is not a placement recipe (0 or %d: Recipe1, %d: Recipe2)", recipe, ring.Recipe1, ring.Recipe2)
}

// resolveShards checks a shard list and builds its ring with rc's
// VnodesPerWeight and Recipe. It returns a copy of the list with weights
// normalised (0 -> 1).
func resolveShards(shards []Shard, rc ring.Config) ([]Shard, *ring.Ring, error) {
	if rc.VnodesPerWeight < 0 {
		return nil, nil, invalid(ErrInvalidVnodes, "VnodesPerWeight", "%d is negative", rc.VnodesPerWeight)
	}
	if err := checkRecipe(rc.Recipe); err != nil {
		return nil, nil, err
	}
	if len(shards) == 0 {
		return nil, nil, invalid(ErrNoShards, "Shards", "the list is empty")
	}
	out := make([]Shard, len(shards))
	names := make(map[string]int, len(shards))
	addrs := make(map[string]string, len(shards))
	for i, s := range shards {
		field := fmt.Sprintf("Shards[%d]", i)
		switch {
		case s.Name == "":
			return nil, nil, invalid(ErrEmptyName, field+".Name", "empty (addr %q)", s.Addr)
		case s.Addr == "" && s.Failover == nil:
			return nil, nil, invalid(ErrEmptyAddr, field+".Addr", "shard %q has no address", s.Name)
		case s.Failover != nil && s.Failover.MasterName == "":
			return nil, nil, invalid(ErrEmptyAddr, field+".Failover.MasterName", "shard %q: empty", s.Name)
		case math.IsNaN(s.Weight) || math.IsInf(s.Weight, 0) || s.Weight < 0:
			return nil, nil, invalid(ErrInvalidWeight, field+".Weight", "shard %q has weight %v", s.Name, s.Weight)
		}
		if err := checkAddr(s); err != nil {
			return nil, nil, invalid(ErrInvalidAddr, field+".Addr", "shard %q: %v", s.Name, err)
		}
		if j, dup := names[s.Name]; dup {
			return nil, nil, invalid(ErrDuplicateName, field+".Name", "%q is shard #%d and #%d", s.Name, j, i)
		}
		names[s.Name] = i
		id := s.identity()
		if other, dup := addrs[id]; dup {
			return nil, nil, invalid(ErrDuplicateAddr, field+".Addr", "shards %q and %q both use %s", other, s.Name, id)
		}
		addrs[id] = s.Name
		if s.Weight == 0 {
			s.Weight = 1
		}
		out[i] = s
	}
	nodes := make([]ring.Node, len(out))
	for i, s := range out {
		nodes[i] = ring.Node{Name: s.Name, Weight: s.Weight}
	}
	r, err := ring.New(nodes, &rc)
	if err != nil {
		return nil, nil, invalid(ErrInvalidWeight, "Shards", "%v (lower the weights or VnodesPerWeight)", err)
	}
	return out, r, nil
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

// failoverTemplate copies into FailoverOptions every connection setting of
// so that FailoverOptions also has. A nil so gives go-redis's defaults.
func failoverTemplate(so *redis.Options) *redis.FailoverOptions {
	if so == nil {
		return &redis.FailoverOptions{}
	}
	return &redis.FailoverOptions{
		ClientName:                   so.ClientName,
		Dialer:                       so.Dialer,
		OnConnect:                    so.OnConnect,
		Protocol:                     so.Protocol,
		Username:                     so.Username,
		Password:                     so.Password,
		CredentialsProvider:          so.CredentialsProvider,
		CredentialsProviderContext:   so.CredentialsProviderContext,
		StreamingCredentialsProvider: so.StreamingCredentialsProvider,
		DB:                           so.DB,
		MaxRetries:                   so.MaxRetries,
		MinRetryBackoff:              so.MinRetryBackoff,
		MaxRetryBackoff:              so.MaxRetryBackoff,
		DialTimeout:                  so.DialTimeout,
		DialerRetries:                so.DialerRetries,
		DialerRetryTimeout:           so.DialerRetryTimeout,
		DialerRetryBackoff:           so.DialerRetryBackoff,
		ReadTimeout:                  so.ReadTimeout,
		WriteTimeout:                 so.WriteTimeout,
		ContextTimeoutEnabled:        so.ContextTimeoutEnabled,
		ReadBufferSize:               so.ReadBufferSize,
		WriteBufferSize:              so.WriteBufferSize,
		PipelineReadBufferSize:       so.PipelineReadBufferSize,
		PipelineWriteBufferSize:      so.PipelineWriteBufferSize,
		PipelinePoolSize:             so.PipelinePoolSize,
		AutoPipelineOptions:          so.AutoPipelineOptions,
		PoolFIFO:                     so.PoolFIFO,
		PoolSize:                     so.PoolSize,
		MaxConcurrentDials:           so.MaxConcurrentDials,
		PoolTimeout:                  so.PoolTimeout,
		MinIdleConns:                 so.MinIdleConns,
		MaxIdleConns:                 so.MaxIdleConns,
		MaxActiveConns:               so.MaxActiveConns,
		ConnMaxIdleTime:              so.ConnMaxIdleTime,
		ConnMaxLifetime:              so.ConnMaxLifetime,
		ConnMaxLifetimeJitter:        so.ConnMaxLifetimeJitter,
		TLSConfig:                    so.TLSConfig,
		DisableIndentity:             so.DisableIndentity,
		DisableIdentity:              so.DisableIdentity,
		IdentitySuffix:               so.IdentitySuffix,
		FailingTimeoutSeconds:        so.FailingTimeoutSeconds,
		UnstableResp3:                so.UnstableResp3,
		PushNotificationProcessor:    so.PushNotificationProcessor,
	}
}

// withConnection gives the Sentinel shards of a document (a registry's,
// or a configuration file's), whose Failover names only the master and
// the Sentinels, o's connection settings: a copy of FailoverShardOptions,
// or of ShardOptions' when it is nil. The other shards are returned as
// they are; shards is not modified.
func (o *Options) withConnection(shards []Shard) []Shard {
	if !slices.ContainsFunc(shards, func(s Shard) bool { return s.Failover != nil }) {
		return shards
	}
	tmpl := o.FailoverShardOptions
	if tmpl == nil {
		tmpl = failoverTemplate(o.ShardOptions)
	}
	out := slices.Clone(shards)
	for i, s := range out {
		if s.Failover == nil {
			continue
		}
		f := *tmpl
		f.MasterName, f.SentinelAddrs = s.Failover.MasterName, slices.Clone(s.Failover.SentinelAddrs)
		out[i].Failover = &f
	}
	return out
}
