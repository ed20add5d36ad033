// Package health is the per-server heartbeat of a client and the record
// of what its failover wrote elsewhere while a server was down.
//
// Monitor pings every server on a ticker, each on the server's own
// heartbeat connection and all in parallel, with a timeout, and applies
// the thresholds: FailureThreshold failed heartbeats in a row mark a
// server down, RecoveryThreshold good ones mark a down server up again (a
// mark that fails is tried again after as many good heartbeats). Its
// goroutine starts on the client's first dial to a server (Hook, Start),
// so a client that is never used runs nothing, and Close stops it and
// waits for it.
//
// Outage is one server's record of the keys written to stand-ins while
// it was down (Record), and the cleanup that runs before it is marked up
// again (MarkUp): every such key is deleted on the returning server and on
// its stand-in, and the last check and the mark are made under the lock
// every Record takes, so no stand-in write slips in between.
//
// What it needs from the root: the servers to ping at each tick, as
// Targets (their heartbeat, whether they are down, how to mark them down
// and up), and for an Outage the server's down flag and clients. It
// knows nothing of rings, shards' names or options beyond Options.
//
// Concurrency: a Monitor's methods are safe for concurrent use, and a nil
// *Monitor (heartbeat off) does nothing. Targets' methods are called from
// the monitor's goroutine only, one at a time except Ping, which runs on
// a goroutine per target and tick. An Outage's zero value is ready and
// its methods are safe for concurrent use.
package health
