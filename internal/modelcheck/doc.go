// Package modelcheck is a seeded, model-based randomized test of redshard's
// membership changes, shared by the root package's tests (miniredis shards)
// and integration_test (real redis-servers). Only test code imports it.
//
// A seed fixes a plan: workers issuing SET, GET, DEL, INCR, APPEND, GETDEL,
// EXPIRE-to-the-past, MSET/MGET across shards, pipelines and a transaction
// on one hash-tagged group of keys over a small key space, interleaved with
// SetShards (add, remove, rename at the same address, re-address,
// re-weight, roll back), Rebalance (complete, cancelled from its Progress
// callback and resumed), server faults, and commands held in flight by
// go-redis hooks at chosen points and released at chosen later steps.
// Every command's call and return are stamped with a logical clock, and each
// key's history is checked for linearizability against a register model
// with porcupine; at the end every key must live once, on its owner.
//
// Scenarios lists the seeded scenarios; those that fail on the current
// code carry their reason (Known) and are skipped unless asked for.
// Minimal holds each known failure reduced to a short Script, a plan
// written by hand and run by the same scheduler and checker.
//
// Replay: the plan (operations, values, membership events, holds and
// releases) depends on the seed only. Goroutine interleaving between the
// points the plan orders with channels is up to the Go scheduler, so a
// replay runs the same operation sequence but not always the same
// interleaving; a seed that fails usually fails again, and -model.seeds
// around it shows how often.
package modelcheck
