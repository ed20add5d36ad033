// Package beacons is the fleet's beacon: on every server of a change, the
// registry config the driver last wrote there (JSON under Key), read back
// by processes that lost the registry and by a driver that finds the
// registry behind the fleet (docs/membership.md, "A registry that
// forgets" and "What fencing at the data relies on").
//
// Contract: the driver writes a phase's beacon on every server of the
// phase's documents before it publishes the phase, so the newest beacon
// is the phase the registry holds or the one a driver was about to
// publish after it (NextPhase). A fenced process trusts a beacon it read
// for Fresh; a driver waits twice that after writing a Prepare beacon
// before it lets keys move.
//
// What it needs from its callers: the servers to read, and a way to dial
// each one (a go-redis client with the caller's connection settings,
// which the caller's dial func returns and Read closes). Read holds no
// state; it is safe for concurrent use, and reads the servers in
// parallel, one goroutine per server, all ended when it returns.
package beacons
