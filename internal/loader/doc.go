// Package loader is GetOrLoad's mechanism: a read of a key that, on a
// miss, calls a load function once per key at a time in this process
// (golang.org/x/sync/singleflight, run as a flight of internal/flight)
// and stores its result; and, when Options.Fleet is set, a lease on the
// key's shard so that of all the processes of a fleet that miss the key
// at one moment, one loads and the others wait for its value.
//
// Contract: Group.Get returns the key's value, loading it on a miss. A
// flight reads the key again before it loads (under the lease, when there
// is one), so a flight that ends between a caller's GET and its joining
// does not make it load again. A load runs with the flight's detached
// context bounded by Options.Lease; its error is returned to every caller
// of the flight and nothing is stored; its panic is recovered in the
// flight and re-raised, as a *Panic, in each caller still waiting. A
// value loaded but not stored is still returned, and counted. The lease
// is a key LeasePrefix+key on the key's owner, taken with SET NX PX,
// recorded in the server's internal-key index, and released on every way
// out of the flight only if it still holds the flight's token.
//
// What it needs from the root (Env, given at each call): a client that
// reads and writes keys wherever they live, which shard client owns a
// key, the Runner its flights run in, and the internal-key index (a
// function that sends a command creating an internal key along with its
// index entry, and the index's key). Nothing else of the root.
//
// Concurrency: a Group's zero value is ready; it and its methods are safe
// for concurrent use. Its counters are read one by one (Stats), so a
// snapshot taken while calls run may be off by the calls in progress.
package loader
