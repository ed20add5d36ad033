package registry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Registry is where a fleet's ring config, its members and its driver lock
// live. Implementations (NewRedis here, etcdregistry.New for etcd) are safe
// for concurrent use. Every method fails with ErrClosed after Close.
type Registry interface {
	// Get returns the stored config, or the zero Config when nothing has
	// been published.
	Get(ctx context.Context) (Config, error)

	// Publish stores next if the stored config is still prev (compared by
	// Version; the zero Config means "nothing stored"), and announces it
	// to watchers. It fails with ErrConflict, naming the stored version,
	// when another publisher got there first, and with
	// ErrInvalidTransition, storing nothing, when next is not a legal
	// successor of prev (CheckTransition).
	Publish(ctx context.Context, prev, next Config) error

	// Watch returns a channel that delivers the stored config (if any) and
	// then every newer one, in Version order, never one older than a config
	// it already delivered. A watcher that falls behind, or whose
	// announcements were lost, may skip to a newer config; the phase rule
	// (a phase advances only once every live member has acknowledged the
	// previous one) is what keeps a live process from missing a phase.
	// Watch returns once it is listening, so every config published after
	// it returns is delivered or superseded. It fails if it cannot start
	// listening; once started, it survives outages of the registry (the
	// channel just delivers nothing new) and catches up when the registry
	// is back. The channel is closed when ctx is done or the registry is
	// closed; receive from it promptly, or use a buffered stage.
	Watch(ctx context.Context) (<-chan Config, error)

	// Heartbeat records m (its Seen set to now) as a live member for the
	// registry's member TTL (Options.MemberTTL) from now. Call it more
	// often than the TTL, and whenever the member acknowledges a new
	// version. m.ID must not be empty. It fails with ErrMemberIDInUse,
	// storing nothing, when a live entry for m.ID holds an incarnation
	// other than m.Incarnation (m with none included): two live processes
	// are never one member. An expired entry, or a live one with no
	// incarnation (written by an older version), is replaced.
	Heartbeat(ctx context.Context, m Member) error

	// Leave removes m's entry at once (a clean shutdown), rather than
	// letting it expire: the entry for m.ID, if it holds m.Incarnation.
	// An entry of another incarnation is left in place, so that a process
	// that was paused past its lease, and whose id a new incarnation took
	// meanwhile, does not remove the new one's entry when it leaves late.
	// Leaving an unknown id, or an entry of another incarnation, is not an
	// error.
	Leave(ctx context.Context, m Member) error

	// MemberTTL is how long a Heartbeat keeps a member live, counted from
	// when the registry received it (Options.MemberTTL; etcd may keep it a
	// little longer, never shorter). A process that has not heartbeat for
	// this long must assume it has been dropped.
	MemberTTL() time.Duration

	// Members returns the live members, sorted by ID; members whose last
	// heartbeat is older than its TTL are left out.
	Members(ctx context.Context) ([]Member, error)

	// Lock takes the fleet's driver lock for owner, for ttl, and keeps it
	// (renewing it in the background, every ttl/3) until Unlock, Close, or
	// the loss of the registry for longer than ttl. It fails with
	// ErrLocked, naming the holder, while anyone holds it (owner included:
	// a second driver with the same name is still a second driver).
	Lock(ctx context.Context, owner string, ttl time.Duration) (DriverLock, error)

	// Close stops every goroutine the registry started (watchers end, their
	// channels closed), releases the locks it holds (best effort) and waits
	// for all of it. It does not close the client it was given, nor remove
	// members (they expire). Close is idempotent.
	Close() error
}

// DriverLock is a held driver lock. Its methods are safe for concurrent
// use.
type DriverLock interface {
	// Unlock stops renewing and releases the lock if it is still this
	// one's. It fails with ErrLockLost if the lock had expired or been
	// taken; calling it again returns what the first call returned.
	Unlock(ctx context.Context) error
	// Lost is closed once the lock is no longer held: renewals failed for
	// ttl (it may have expired), the stored lock is no longer this one,
	// the registry was closed, or Unlock was called. A driver stops
	// driving when it fires.
	Lost() <-chan struct{}
}

// Sentinel errors. Errors returned by the registries wrap one of them with
// context; match them with errors.Is.
var (
	// ErrConflict means Publish's prev is not the stored config any more.
	ErrConflict = errors.New("registry: config changed concurrently")
	// ErrInvalidTransition means a config is not a legal successor of
	// another (CheckTransition), or has no legal successor (Advance).
	ErrInvalidTransition = errors.New("registry: invalid transition")
	// ErrLocked means the driver lock is held.
	ErrLocked = errors.New("registry: driver lock held")
	// ErrLockLost means a lock being released had already expired or been
	// taken by someone else.
	ErrLockLost = errors.New("registry: driver lock lost")
	// ErrInvalidOptions is returned for invalid Options (and by NewRedis's
	// registry, from every method, for a nil client or an empty name).
	ErrInvalidOptions = errors.New("registry: invalid options")
	// ErrInvalidArgument is returned for an argument that can never
	// succeed: an empty member id or lock owner, a lock ttl that is not
	// positive.
	ErrInvalidArgument = errors.New("registry: invalid argument")
	// ErrClosed is returned by every method of a closed registry.
	ErrClosed = errors.New("registry: closed")
	// ErrMemberIDInUse means a Heartbeat was refused: a live (not
	// expired) entry for its member id holds another incarnation, so
	// another process is that member. A heartbeat is a compare-and-set on
	// the incarnation; an expired entry, or one with no incarnation, is
	// taken over.
	ErrMemberIDInUse = errors.New("registry: member id in use by another live process")
)

// Defaults of Options.
const (
	// DefaultPollInterval is Options.PollInterval's default: what a lost
	// Redis announcement costs at most.
	DefaultPollInterval = 2 * time.Second
	// DefaultMemberTTL is Options.MemberTTL's default: heartbeat more
	// often than this (every few seconds).
	DefaultMemberTTL = 10 * time.Second
)

// Options configures a registry. The zero Options (or nil) uses the
// defaults.
type Options struct {
	// PollInterval is how often a Redis watcher re-reads the config, so
	// that a lost announcement costs at most this long; etcd's watches do
	// not lose events, and an etcd watcher waits this long before it
	// re-lists after a failed attempt. Default DefaultPollInterval (2s);
	// at least 1ms.
	PollInterval time.Duration
	// MemberTTL is how long a Heartbeat keeps a member live. etcd counts
	// leases in whole seconds (and has a minimum of its own, about 2s by
	// default): the TTL is rounded up. Default DefaultMemberTTL (10s); at
	// least 1ms.
	MemberTTL time.Duration
}

// Validate reports whether o is usable; errors match ErrInvalidOptions and
// name the field. A nil Options is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	switch {
	case o.PollInterval < 0 || (o.PollInterval > 0 && o.PollInterval < time.Millisecond):
		return fmt.Errorf("%w: PollInterval %v: want 0 (default) or at least 1ms", ErrInvalidOptions, o.PollInterval)
	case o.MemberTTL < 0 || (o.MemberTTL > 0 && o.MemberTTL < time.Millisecond):
		return fmt.Errorf("%w: MemberTTL %v: want 0 (default) or at least 1ms", ErrInvalidOptions, o.MemberTTL)
	}
	return nil
}

// WithDefaults returns a validated copy of o with the defaults filled in.
func (o *Options) WithDefaults() (Options, error) {
	if err := o.Validate(); err != nil {
		return Options{}, err
	}
	var c Options
	if o != nil {
		c = *o
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.MemberTTL == 0 {
		c.MemberTTL = DefaultMemberTTL
	}
	return c, nil
}
