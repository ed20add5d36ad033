// Package drain counts the commands running on one epoch of a client's
// ring, for the drain of a membership change: the first move of a change
// waits until no command that started on the previous ring is still
// running (docs/membership.md).
//
// A Counter is striped per P (the runtime's processor a goroutine runs on):
// Enter adds one to the stripe of the caller's P and returns that stripe's
// index, which the caller hands to Exit. So every core writes a cache line
// of its own on every command instead of all of them writing one, and each
// stripe, counting the commands that entered on it and have not exited,
// never goes below zero, however the goroutine migrates in between. Load
// sums the stripes, one at a time.
//
// # Why a sum read one stripe at a time never misses a command in flight
//
// The root uses a Counter this way: a command calls Enter, then loads the
// current topology again, and when a newer one was published meanwhile it
// calls Exit and starts over on the newer one. The drain starts once the
// newer topology is published, and Loads the previous epoch's Counter until
// it reads 0. The atomic operations are sequentially consistent (Go's
// memory model), so:
//
//  1. The commands that run on the old epoch are those whose Enter came
//     before the publication: one whose Enter came after it sees the newer
//     topology when it loads again, and backs out. That set is fixed before
//     the drain's first Load, and every one of them has added its one
//     before it.
//  2. A stripe holds, at any moment, the commands of that set that entered
//     on it and have not exited, plus commands that are backing out, each
//     counted at most once: never less than zero (Exit takes the index Enter
//     gave, not the P the goroutine runs on by then).
//  3. So when Load reads 0 on stripe i, every command of the set that
//     entered on stripe i had exited by then, and it does not come back:
//     each command enters once. When every stripe read 0, the whole set has
//     exited, although no single instant saw every stripe at 0. A command
//     that enters on a stripe Load has already passed entered after the
//     publication and backs out (1).
//
// Blocking commands (BLPOP, ...) are moved by the root from a Counter to a
// count of their own, incrementing that one before calling Exit. The drain
// reads the Counter first and the blocking count after: when Load read 0 on
// a command's stripe, its move had already incremented the blocking count,
// so the blocking count's later read sees it.
//
// A Counter is safe for concurrent use; its zero value counts nothing and
// is ready. It needs nothing from the root.
package drain
