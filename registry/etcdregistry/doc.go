// Package etcdregistry keeps a fleet's registry (package registry: the
// ring config with its epoch and phase, the live members, the driver lock)
// in an etcd cluster. It is a module of its own so that the redshard
// library does not depend on etcd; the document, the phases and what each
// means for a process are described in package registry and
// docs/membership.md.
//
// # Keys
//
// New(cli, prefix) keeps everything under prefix (a "/" is added when it
// does not end with one), e.g. "/redshard/registry/web/":
//
//	<prefix>config        the Config as JSON
//	<prefix>members/<id>  a Member as JSON, bound to a lease of MemberTTL
//	<prefix>lock          the driver lock's owner, bound to a lease of its ttl
//
// Publish reads the config and writes the next one in a Txn that compares
// the key's ModRevision with the one read (CreateRevision 0 for the first
// config), so exactly one of racing publishers wins. Watch reads the config
// and watches the key from the next revision: etcd delivers every write in
// order, so a burst of publishes is delivered config by config. When the
// watch breaks — the revision it needs was compacted (ErrCompacted), its
// member lost its leader (the watch requires one), the stream was
// cancelled — the watcher re-lists (reads the key again) and watches from
// the read's revision; a failed re-list is retried every PollInterval.
// Heartbeat renews its member's lease (KeepAliveOnce; a new lease once the
// old one expired) and rewrites the member; expired members vanish with
// their lease. Lock creates the lock key only if it does not exist, bound
// to a lease that a concurrency.Session keeps alive; Lost fires when the
// session ends (the lease expired or was revoked) or a watch sees the key
// deleted or replaced.
//
// Leases count whole seconds: TTLs are rounded up, and etcd may raise a
// short one to its minimum (about 2s with default election settings).
//
// # Failures
//
// With etcd unreachable, watchers keep the last config (the client retries
// the watch and resumes from the revision it had; a compacted revision
// means a re-list); Publish, Heartbeat, Members and Lock return errors; a
// lock whose lease cannot be kept alive for its ttl fires Lost and
// expires.
package etcdregistry
