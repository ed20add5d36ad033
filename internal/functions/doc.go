// Package functions gives servers that join a ring the function libraries
// the ring's servers hold, so that FCALL, FUNCTION LIST and FUNCTION DUMP
// keep working on every key after a membership change.
//
// Contract (Root.Give): the libraries are read (FUNCTION LIST WITHCODE)
// from every source that can be reached; a source that cannot be reached
// counts as down and is skipped, one that answers with an error refuses.
// The sources must hold the same libraries with the same code, else an
// error wrapping Root.Differ. Each joining server then gets them by
// FUNCTION RESTORE of one source's FUNCTION DUMP, unless it holds them
// already; one that holds other libraries, or knows no FUNCTION, is
// refused, and what it holds after the restore is checked. When the
// sources hold no library, the joining servers are not contacted. A
// server that does not know FUNCTION (Redis before 7.0, miniredis) holds
// none.
//
// What it needs from the root (Root): the error value refusals wrap, the
// FUNCTION LIST WITHCODE command, and how to compare two replies whatever
// order their lists are in; the servers are a name, a description and a
// go-redis client each. It knows nothing of rings, shards or changes.
//
// Concurrency: Give reads the sources, then restores on the joining
// servers, one goroutine each (internal/parallel); it keeps no state and
// is safe for concurrent use.
package functions
