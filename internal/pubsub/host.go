package pubsub

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Host is what a Hub needs from the client it serves: where subscriptions
// go (Ring), the client's life (Context, Closed, Go) and two settings.
// Its methods are called from any goroutine, some under a mux's lock, so
// they must be safe for concurrent use, return quickly and call nothing
// of this package.
type Host interface {
	// Ring returns the ring subscriptions are placed on now. Two calls
	// return equal values (==) as long as the ring has not changed; a new
	// value is a change, and every mux moves its subscriptions to it
	// (within the Hub's poll interval, or at once by Hub.Follow).
	Ring() Ring
	// Context is done when the client closes: the muxes and their links
	// stop with it, and the Hub closes its front client.
	Context() context.Context
	// Closed reports whether the client has begun to close; a new PubSub
	// connection is then refused with redis.ErrClosed.
	Closed() bool
	// Go runs fn in a goroutine that the client's Close waits for, and
	// reports whether it did: false once Close has begun (fn does not run).
	Go(fn func()) bool
	// ProbeTimes returns how long a link hears nothing from its shard
	// before it sends a PING, and how long it then waits for anything to
	// arrive before it takes the connection for dead.
	ProbeTimes() (interval, timeout time.Duration)
	// RESP3 reports whether the shards speak RESP3, so that a PING in
	// subscribed mode is answered as go-redis on RESP3 sees it.
	RESP3() bool
}

// Ring is one placement of subscriptions: the shards a channel's PUBLISH
// (or SPUBLISH) goes to, and the shards a pattern must be subscribed on.
// A Ring value must be comparable (Host.Ring compares them), and its
// methods must be safe for concurrent use.
type Ring interface {
	// Owners returns the shards a subscription to channel must be made
	// on: its owner, and during a membership change also its owner on the
	// ring that processes not switched yet publish on. The order is the
	// order links are opened in; duplicates are ignored.
	Owners(channel string) []Shard
	// All returns every shard a pattern must be subscribed on (those of
	// both rings during a change).
	All() []Shard
}

// Shard is one server subscriptions are made on. A mux keeps one link per
// Shard (and kind of connection), so Shard values must be comparable, and
// equal (==) exactly when they stand for the same command client: after a
// change, a subscription stays on the links of the Shards equal to one of
// the previous ring, and is made anew on the others.
type Shard interface {
	// Name names the shard in the errors reported to the subscriber.
	Name() string
	// Client is the shard's command client: a link is a PubSub of it
	// (Client().Subscribe), with its protocol, auth, TLS, dialer and
	// Sentinel. Its dial hook sees IsLink(ctx) for a link's connections.
	Client() *redis.Client
	// DownErr returns the error the shard is marked down with, or nil when
	// it is up: a link that fails on a shard marked down reports that
	// error rather than its own.
	DownErr() error
}
