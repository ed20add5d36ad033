// Package redshardtest runs redshard on miniredis for unit tests: shard
// servers with what redshard needs from a server, a Client over them, and
// a fleet (a registry, processes that follow it, and Apply) whose
// membership a test can change, all in the test's process, with nothing
// to install.
//
// A Server is a miniredis server on 127.0.0.1 with the CLIENT subcommands
// miniredis lacks and redshard uses: CLIENT LIST and CLIENT KILL ID, which
// a fleet's Apply needs on every server to sever the connections of
// members it dropped, and CLIENT ID. A Cluster is a Client over Servers of
// its own (StartCluster, NewCluster). A Fleet is shard Servers and a Redis
// registry (package registry) on a Server of its own: Join starts a
// process (a Client following the registry through a handle of its own),
// and Apply changes the ring through the registry, phase by phase, moving
// the data, as in production (StartFleet, NewFleet).
//
// Each New function takes the test's t (a *testing.T, *testing.B or
// *testing.F: see TB), closes what it started when the test ends
// (t.Cleanup) and fails the test if it cannot start it. Each Start
// function is the same for code that has no t, such as TestMain, an
// example or an embedded demo: the caller closes what it returns. The
// package never exits the process and leaves no goroutine behind once
// closed; it does not import "testing".
//
// # What miniredis does not do
//
//   - CLIENT TRACKING: miniredis has neither tracking nor invalidation
//     messages, so LocalCache hot keys (redshard.HotKeyOptions) cannot be
//     invalidated by the server. The client finds this out with its first
//     hot read: the shard reports redshard.InvalidationStalenessOnly
//     (Client.Stats().Hot.Shards), a cached reply lives
//     HotKeyOptions.MaxStaleness, and with TrackingOn nothing is cached. Server does not fake it:
//     invalidation needs the keys each command changed, sent once the
//     command has run, and miniredis lets a hook see a command only before
//     it runs. Test invalidation against a real redis-server.
//   - FUNCTION and FCALL: miniredis has none (Lua scripts, EVAL and
//     EVALSHA, it has).
//   - Expiry: miniredis expires keys only when told (FastForward, or
//     ClockTTL), so a key written with a TTL stays until then. The
//     registry's member leases are timed with the server's TIME and
//     run on the clock.
//   - CLIENT KILL kills by ID only, CLIENT LIST filters by ID only, and
//     every connection's addr is "miniredis". A CLIENT command inside
//     MULTI runs at once instead of being queued.
//   - Sentinel: there is none; a shard with Failover cannot be tested
//     here.
//
// Restart a closed Server with its own Restart, and make it fail with its
// own SetError: miniredis's (through Server.Miniredis) drop the CLIENT
// subcommands.
package redshardtest
