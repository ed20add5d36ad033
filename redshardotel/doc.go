// Package redshardotel exports the metrics of a redshard.Client through
// OpenTelemetry. It is a module of its own, so that the core library does
// not depend on OpenTelemetry.
//
//	inst, err := redshardotel.InstrumentMetrics(rdb) // otel.GetMeterProvider()
//	...
//	defer inst.Unregister()
//
// A client is measured at two levels. A shard hook (AddShardHook) times
// each command as a shard's go-redis client sent it, so a split MGET is
// one operation per shard it touched; a command hook (AddCommandHook)
// times each command as the application issued it, which includes
// splitting and merging, reads answered from the local cache (well under a
// microsecond to a few) and commands redshard refused without sending
// anything. Both histograms have explicit buckets from 1µs to 10s
// (DurationBuckets): the SDK's default buckets start at 5ms. go-redis's
// connection handshake (HELLO, CLIENT SETINFO, ...), which passes through
// the hooks, is not recorded. Everything else is read from Stats and
// LoadStats, once per collection, by one callback.
//
// Names follow the OpenTelemetry semantic conventions where they exist
// (database client metrics, semconv v1.43.0), otherwise redshard.*; units
// are UCUM. Counters are monotonic sums (observable counters); gauges hold
// a state or the counts of the current Rebalance.
//
// # Operation durations
//
//	db.client.operation.duration        histogram  s
//	    A command or a pipeline as a shard served it.
//	    db.system.name=redis, db.operation.name, redshard.shard,
//	    server.address, server.port, error.type (on failure)
//	redshard.client.operation.duration  histogram  s
//	    A command or a pipeline as the application sent it.
//	    db.system.name=redis, db.operation.name, error.type (on failure)
//
// db.operation.name is the command in capitals (GET, MGET); a pipeline is
// PIPELINE and a transaction MULTI, recorded as one operation (the batch
// size is no attribute: each size would be a series of its own). A command
// refused with redshard.ErrUnknownCommand is named _OTHER, since its name
// is whatever the caller sent. The error.type of an operation that failed
// is ErrorType's: redshard.shard_down, redshard.cross_shard,
// redshard.not_sharded, redshard.unknown_command, the prefix of a Redis
// error (WRONGTYPE, ERR, NOSCRIPT, ...), closed, canceled, timeout or
// _OTHER. A pipeline failed if Exec would report an error. redis.Nil (a
// missing key) is no failure. The number of failures of each type is the
// count of the histogram's points that carry it.
//
// # Ring and shards
//
//	redshard.shard.up              gauge    {shard}   1 up, 0 marked down by the health monitor
//	redshard.shard.weight          gauge    1         configured weight
//	redshard.shard.share           gauge    1         fraction of the hash space owned
//	    (the three: redshard.shard, server.address, server.port)
//	redshard.ring.epoch            gauge    1         1 after NewClient, +1 per SetShards
//	redshard.shard.downs           counter  {event}   times a shard was marked down
//	redshard.failover.commands     counter  {command} commands a stand-in served for a down shard
//	redshard.outage.keys.cleaned   counter  {key}     keys written during an outage, deleted on return
//
// The ring's phase will be reported beside its epoch when fleet changes run
// in phases (redshard.ring.phase); there is none yet.
//
// # Membership changes
//
//	redshard.handoff.active        gauge    1         1 while keys are brought over from previous owners
//	redshard.handoff.moved         counter  {key}     keys brought over on first use
//	redshard.handoff.errors        counter  {error}   handoff migrations that failed
//	redshard.rebalance.running     gauge    1         1 while Rebalance runs
//	redshard.rebalance.runs        counter  {run}     Rebalance calls that started scanning
//	redshard.rebalance.epoch       gauge    1         the ring epoch the current or last run moves keys for
//	redshard.rebalance.scanned     gauge    {key}     keys scanned by the current or last run
//	redshard.rebalance.moved       gauge    {key}     keys it moved
//	redshard.rebalance.failed      gauge    {key}     keys it failed to move
//	redshard.rebalance.estimate    gauge    {key}     keys it expects to scan (Stats.Rebalance.Total)
//
// # Hot keys (only when Options.HotKeys is set)
//
//	redshard.hotkeys.count         gauge    {key}       keys hot now (at most 20)
//	redshard.hotkeys.rate          gauge    {command}/s each hot key's rate, redshard.key=<name>;
//	                                                    only with WithHotKeyNames(true)
//	redshard.hot.coalesced         counter  {request}   hot reads and copy fills that waited for an identical one
//	redis.client.csc.requests      counter  {request}   LocalCache reads: result=hit (local) or miss (shard)
//	redshard.hot.invalidations     counter  {key}       keys named by invalidation messages (LocalCache)
//	redshard.hot.tracking.lost     counter  {event}     cache drops after a lost invalidation stream (LocalCache)
//	redshard.hot.split.reads       counter  {request}   hot reads a split copy answered (SplitCopies)
//	redshard.hot.split.fallbacks   counter  {request}   hot reads a copy could not settle (SplitCopies)
//	redshard.hot.copy.fills        counter  {copy}      split copies made (SplitCopies)
//
// Hot key names are never exported unless WithHotKeyNames(true) allows it:
// they can be personal data, and they are unbounded.
//
// # GetOrLoad
//
//	redshard.load.requests         counter  {request} result=hit (first GET) or miss (joined a load flight)
//	redshard.load.coalesced        counter  {request} calls that got another caller's flight's result
//	redshard.load.canceled         counter  {request} calls whose context ended while waiting
//	redshard.load.loads            counter  {call}    calls of a load function
//	redshard.load.leases           counter  {flight}  result=won (took the fleet lease) or waited
//	redshard.load.lease.waits      counter  {wait}    result=hit (the value appeared) or timeout
//	redshard.load.errors           counter  {flight}  flights that failed
//	redshard.load.store.errors     counter  {value}   loaded values not cached because the SET failed
//
// Every measurement also carries the WithAttributes attributes.
//
// # Tracing
//
// redshardotel records no spans of its own. A tracing hook added with
// Client.AddHook or AddShardHook sees the traffic each shard really gets:
// one span per shard command, so an MGET over two shards is two spans
// under the caller's. Instrumentation that only takes a *redis.Client,
// like redisotel's InstrumentTracing, is applied to every shard client
// with InstrumentShards.
package redshardotel
