// Package rebalance is Rebalance's mechanism: it scans every server that
// may hold keys of a membership change, in batches, moves each key the
// change displaced to its owner, counts what it did, and verifies at the
// end that no displaced key is left.
//
// Contract: Run drains the sources in parallel, one goroutine each; a
// drain SCANs its source BatchSize keys at a time and hands each batch,
// sized by a BatchSizer (bounded by a fleet process's lease) and paced by
// Rate over the whole run, to the Seam's Move, after keeping only the keys
// the Seam's Place says are displaced (and strays, with MoveStrays). A
// final pass scans every source again and counts what is still misplaced;
// while keys are, another drain runs, three passes at most (a server whose
// SCAN skips keys deleted under it leaves some behind). Run stops when ctx
// is done and returns the report so far with ctx's error.
//
// What it needs from the root is a Seam: which sources to scan (a name and
// a go-redis client each), where a key belongs (Place, Owner), how to move
// a batch (Move: the change's move protocol, internal/keymove, under the
// change's settled set and the process's lease), and counters (Started,
// Record). The package knows nothing of rings, topologies, changes or
// fleets.
//
// Concurrency: Run may be called concurrently (each run has its own
// state); within a run, the Seam's funcs and the sources' clients are
// called from one goroutine per source at once. Progress and Record are
// serialised.
package rebalance
