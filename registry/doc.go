// Package registry is where a fleet of redshard processes finds its ring:
// one ring config document with an epoch and a phase, published by
// compare-and-set on a coordinator the operator already runs (a designated
// Redis here, etcd in package etcdregistry), watched by every process,
// and the fleet's live members and driver lock beside it. It knows
// nothing of routing: the root package turns configs into rings (DESIGN.md
// semantics 10). It imports nothing of redshard.
//
// # The document
//
// A Config holds the document redshard.LoadConfig reads, as raw JSON (Doc),
// its Epoch and its Phase. While a change is in flight it also holds the
// document the change started from (PrevDoc, PrevEpoch), the change's id
// (Change) and who drives it (Driver). Configs are ordered by Version:
// epoch, then phase. The zero Config means nothing is published yet.
//
// # Phases
//
// A change from ring R₀ (Stable, epoch e) to R₁ is published as Prepare,
// Migrate and Commit at epoch e+1, then Stable e+1. The driver (the holder
// of the lock, e.g. "redshard apply") publishes each only when every live
// member has acknowledged the previous one (Acked returns nobody late), so
// live processes are on one phase or on two adjacent ones, and each phase
// is defined so that every such pair keeps semantics 7 across processes. A
// process acknowledges a version (Heartbeat with it) only once no command
// it routed under the previous one is still running — the in-flight wait
// of docs/membership.md. P and N are a key's owners under R₀ and R₁; a key
// moves when they are different servers. What each phase asks of a
// process (the root package's side):
//
//	Stable e     R₀ only: commands go to P.
//	Prepare e+1  R₁ is known; no key moves. A command on a key whose
//	             server differs in R₁ waits until the process leaves
//	             Prepare, then runs as in Migrate. Beside Stable e:
//	             nobody moves a key; beside Migrate: a Prepare process
//	             does not touch a moving key, so nothing reaches P after
//	             a Migrate process took it.
//	Migrate e+1  R₁ with handoff (docs/membership.md): a command on a
//	             moving key first makes it settled on N — take, settle,
//	             release — then runs on N; Rebalance moves the rest.
//	Commit e+1   published once Rebalance has drained every P: commands
//	             go straight to N, with no new take. Beside Migrate: a
//	             Migrate take finds nothing left on P, and a move already
//	             in flight is still refused at settle (settled sets stay).
//	Stable e+1   R₁ only. Beside Commit: the same routing. No process is
//	             in Migrate any more, so no move is in flight: settled
//	             sets and removed servers' clients can go.
//
// A change still in Prepare can be called off (Abort: Stable e+2 with
// R₀): nothing has been taken. From Migrate on, going back is a new
// change.
//
// A process whose last successful Heartbeat was sent longer than
// MemberTTL ago may have been dropped from Members, and the fleet may have
// moved on without it: it must fence itself (refuse keys a change could
// move) until Get or Watch has caught it up. The registry counts a
// member's TTL from when its heartbeat arrived, in the registry's clock,
// so a process that counts from when it sent it fences first.
//
// # Failures
//
// With the registry down, watchers keep the last config they delivered
// and catch up when it is back (Redis: on re-subscription and at the next
// poll; etcd: the watch resumes, or re-lists); Publish, Heartbeat,
// Members and Lock return errors; a held lock that cannot be renewed
// within its ttl fires Lost. A call returns by its context's deadline even
// when the registry's server stopped answering without closing anything
// (packets dropped): the Redis registry bounds its sockets by the deadline
// whatever its client's timeouts. Nothing is retried behind the caller's back
// except the watch. Epochs are never reused: a registry that lost its data
// must be re-seeded above the highest epoch the fleet has seen (Initial
// with a larger Epoch), or watchers ignore it.
//
// # Keys on Redis
//
// NewRedis(rdb, name) keeps everything under name; start it with
// "redshard:" (e.g. "redshard:registry:web") so that a redshard client
// hides the keys and Rebalance never moves them if the registry shares a
// server with the data. To use a Redis Cluster, put the name in braces
// ("{redshard:registry:web}") so every key lands in one slot.
//
//	<name>:config    hash  epoch, phase, config (the Config as JSON)
//	<name>:announce  channel: every published Config, as JSON
//	<name>:members   zset  member id → expiry (server clock, ms)
//	<name>:member    hash  member id → Member as JSON
//	<name>:lock      hash  token, owner, until (server clock, ms); PEXPIRE too
//	redshard:index:registry  set  the keys above, for names that start
//	                 with "redshard:" (RedisIndexKey): DBSIZE through a
//	                 redshard client leaves them out
//
// Publish is one Lua script: compare epoch and phase, write, PUBLISH.
// Heartbeat, Members and Lock are scripts that read the server's clock
// (TIME), so processes' clocks may disagree.
//
// The package's types are safe for concurrent use; Options holds the poll
// interval and the member TTL.
package registry
