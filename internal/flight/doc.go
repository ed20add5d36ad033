// Package flight runs the calls a client shares between its callers
// (hot-key reads and copy fills, handoffs of moved keys, GetOrLoad loads)
// and the goroutines it starts on its own (Pub/Sub links), so that Close
// can end them all.
//
// Contract: Runner.Do runs one call per key of a singleflight.Group at a
// time, detached from the callers' contexts so that one caller giving up
// does not fail the others, bounded by a deadline, cancelled by Close;
// Runner.Go starts a goroutine Close waits for. After Close begins
// nothing new starts: Do returns redis.ErrClosed and Go reports false.
// Tracker is the counter under both, for other things that must refuse
// new work and wait for the running one (a membership change's moves).
//
// The root provides the singleflight groups (one per kind of call) and
// the keys; the package knows nothing else of it. Everything here is safe
// for concurrent use.
package flight
