// Package member is what a fleet process does to follow its registry
// (docs/membership.md, "A fleet" and "Fencing at the data"): it joins the
// registry, applies every newer config, acknowledges each one in its
// heartbeats once the client routes by it and the previous topology's
// commands have ended, reads the registry back once a lease, and fences
// the process when its lease runs out, the registry is behind the fleet or
// its member id was taken. A fence's state (what the process knew, why it
// is fenced, the beacons it has read since) is a Fence, and the admission
// of the process's connections (Admit, Admission) is decided here too.
//
// Contract: New joins and reads the first config; the root builds its
// first topology from it, with StartFence's fence, and calls Start; Stop
// ends following and leaves. The Follower never holds a topology: it asks
// the root, through Host, to publish one for a config (Host.Apply) or for
// a change of fence (Host.Regime), and reads the current fence back
// (Host.Fence). The command path asks the Follower's Lease whether the
// process may still act as trusted (FenceNow otherwise), a Fence whether a
// key may be served (Refuse, CheckServer), and Admit whether a new
// connection may carry commands.
//
// What it needs from the root: a Host (publish a topology for a config or
// a fence, the current fence, read the servers' beacons, parse a registry
// document, share a call among commands), and the root's error for
// invalid options (Options.Invalid). ErrFenced and ErrRegistryBehind are
// the root's errors of the same names.
//
// Concurrency: a Follower runs two goroutines between Start and Stop (the
// watcher and the heartbeats) and the drains of its regimes, all waited
// for by Stop. Its methods, a Fence's and an Admission's are safe for
// concurrent use. Host.Regime calls change under the root's topology lock,
// and change takes the Follower's own lock, so the root must not hold
// that lock while it calls into the Follower; Host.Apply is called one at
// a time (under the Follower's apply lock) and must not call back into the
// Follower but for Lease and HoldTimeout.
package member
