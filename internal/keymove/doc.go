// Package keymove moves keys between Redis servers during a membership
// change without losing a write or bringing a stale copy back: the one
// step that the root's handoff (a key's first use on the new ring) and
// Rebalance (a scan of the previous owners) share, whether the movers are
// in one process or in many. docs/membership.md states the protocol and
// why it holds; in short, moving a key from its previous owner P to its
// new owner N:
//
//  1. take: on P, DUMP and PTTL in one script. P keeps the key.
//  2. settle: on N, one script: if the change's settled set already names
//     the key, refuse (someone moved it in this change, and what N holds or
//     lacks since is newer: a stale copy must not come back); else add the
//     key to the set, and RESTORE the value unless N already has the key
//     (written on N in this change, so newer).
//  3. release: on P, delete the key if it still holds what was taken (a
//     compare-and-delete); if it changed, something wrote to P after the
//     change began and the key is reported as failed, never deleted.
//
// A key taken by two movers is settled by the first; the second is
// refused in step 2 and its step 3 deletes nothing new. Since the settled
// set is on N and the refusal is atomic there, this holds for movers in
// different processes too. SettleAbsent is step 2 without a value, for a
// key whose previous owner is lost.
//
// What the root provides: the servers' go-redis clients, the key's new
// owner (a function), the change's settled set name and the name of the
// index of internal keys, on each server, that records a new settled set.
// The package knows nothing of rings, shards or changes beyond those
// names; it keeps no state, and its functions are safe for concurrent use.
package keymove
