package redshard

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/pubsub"
)

// Pub/Sub across shards.
//
// PUBLISH and SPUBLISH go to the shard that owns the channel name, so a
// subscriber must listen there, and a pattern can match channels of every
// shard. Subscribe and its siblings return a PubSub of internal/pubsub's
// front client, whose connections are multiplexers over one go-redis
// PubSub per shard (see that package's doc). This file is its Host: the
// current ring as a placement (pubsubRing), each shard's command client
// (pubsubShard), the Client's life and the probe times.

// Subscribe subscribes to channels, wherever they live, and returns a
// go-redis PubSub: its later Subscribe, PSubscribe, SSubscribe and
// unsubscribe calls, Channel, Receive, ReceiveMessage and Ping behave as on
// a single server. Each channel is subscribed on the shard its PUBLISH
// goes to (hash tags honoured); a subscription is confirmed (Receive
// returns its *redis.Subscription) once that shard has confirmed it, so a
// message published after the confirmation is delivered. Messages of every
// shard arrive on the one PubSub. Subscriptions follow membership changes:
// SetShards returns (a fleet's process acknowledges a phase) once a
// channel whose owner changed is subscribed on its new owner (and, until
// the change is released, also on the old one, where processes still on
// the previous ring publish). While a shard is down,
// Receive reports an error for it once, and its subscriptions are made
// when it is back. A shard that stops answering without closing the
// connection (a frozen server, a partition) is found by a probe: a
// connection that has received nothing for Health.Interval (at least
// 500ms) sends a PING, and one that then receives nothing within
// Health.Timeout (at least 1s) is a failed shard as above (3s and 3s when
// the heartbeat is disabled). Close the
// PubSub when done, as with go-redis. The PubSub keeps the Client open
// while it is reachable, even once the Client itself is not (see Client).
func (c *Client) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	defer runtime.KeepAlive(c) // until the PubSub is lent (reach.go)
	ps := c.pubsubFront().Subscribe(ctx, channels...)
	lendUntilUnreachable(c.client, ps)
	return ps
}

// PSubscribe subscribes to patterns on every shard, since a pattern can
// match channels owned by any of them; otherwise as Subscribe.
func (c *Client) PSubscribe(ctx context.Context, patterns ...string) *redis.PubSub {
	defer runtime.KeepAlive(c)
	ps := c.pubsubFront().PSubscribe(ctx, patterns...)
	lendUntilUnreachable(c.client, ps)
	return ps
}

// SSubscribe subscribes to shard channels (SPUBLISH) on their owners;
// otherwise as Subscribe.
func (c *Client) SSubscribe(ctx context.Context, channels ...string) *redis.PubSub {
	defer runtime.KeepAlive(c)
	ps := c.pubsubFront().SSubscribe(ctx, channels...)
	lendUntilUnreachable(c.client, ps)
	return ps
}

// pubsubHub is a Client's Pub/Sub state: the hub made on first use. Its
// zero value is ready; it is safe for concurrent use.
type pubsubHub struct {
	once sync.Once
	hub  atomic.Pointer[pubsub.Hub] // set by once; read by followPubSub without it
}

// pubsubFront returns the front client of the Client's PubSubs, creating
// the hub and its goroutine on first use. After Close it is closed, so
// its PubSubs report redis.ErrClosed.
func (c *client) pubsubFront() *redis.Client {
	h := &c.pubsub
	h.once.Do(func() { h.hub.Store(pubsub.NewHub(pubsubHost{c})) })
	return h.hub.Load().Front()
}

// followPubSub places every open PubSub's subscriptions on the current
// ring now, rather than at the hub's next poll, and waits (bounded by ctx)
// until each shard that gained subscriptions has confirmed them or failed
// (pubsub.Hub.Follow). SetShards and a fleet's phase call it before
// returning (or acknowledging), so that a message published on the new
// ring after they have reaches the subscribers.
func (c *client) followPubSub(ctx context.Context) {
	if h := c.pubsub.hub.Load(); h != nil {
		h.Follow(ctx)
	}
}

// pubsubHost is the Client as internal/pubsub sees it.
type pubsubHost struct{ c *client }

func (p pubsubHost) Ring() pubsub.Ring                          { return pubsubRing{p.c.top.Load()} }
func (p pubsubHost) Context() context.Context                   { return p.c.flights.Context() }
func (p pubsubHost) Closed() bool                               { return p.c.closed.Load() }
func (p pubsubHost) ProbeTimes() (time.Duration, time.Duration) { return p.c.probeTimes() }
func (p pubsubHost) RESP3() bool {
	return p.c.cfg.opt.shardOptions(Shard{}).Protocol != 2
}

// Go runs fn as one of the calls Close cancels (flights.Context()) and waits for.
func (p pubsubHost) Go(fn func()) bool { return p.c.flights.Go(fn) }

// pubsubRing places subscriptions on a topology: a channel on its owner,
// a pattern on every shard, and during a change on the other ring too,
// where processes that have not switched yet still publish: the previous
// ring during a handoff, the next one in a fleet's Prepare (processes in
// Migrate publish there). Equal values stand for the same topology.
type pubsubRing struct{ t *topology }

// rings returns the topologies subscriptions are placed on.
func (r pubsubRing) rings() []*topology {
	rings := []*topology{r.t}
	if r.t.handoff != nil {
		rings = append(rings, r.t.handoff.from)
	}
	if r.t.hold != nil {
		rings = append(rings, r.t.hold.nextTop)
	}
	return rings
}

func (r pubsubRing) Owners(channel string) []pubsub.Shard {
	var out []pubsub.Shard
	for _, t := range r.rings() {
		out = append(out, pubsubShard{t.shards[t.ring.LookupIndex(channel)].backend})
	}
	return out
}

func (r pubsubRing) All() []pubsub.Shard {
	var out []pubsub.Shard
	for _, t := range r.rings() {
		for _, s := range t.shards {
			out = append(out, pubsubShard{s.backend})
		}
	}
	return out
}

// pubsubShard is a backend as a place for subscriptions: links of equal
// values share a backend, hence its command client.
type pubsubShard struct{ b *backend }

func (s pubsubShard) Name() string          { return s.b.shard.Name }
func (s pubsubShard) Client() *redis.Client { return s.b.client }
func (s pubsubShard) DownErr() error {
	if s.b.down.Load() {
		return s.b.downError()
	}
	return nil
}

// The probe of a Pub/Sub link when the heartbeat is off
// (HealthOptions.Disable): a PING after 3s without traffic, as go-redis's
// own PubSub health check, answered within 3s, go-redis's default
// ReadTimeout.
const (
	defaultProbeInterval = 3 * time.Second
	defaultProbeTimeout  = 3 * time.Second
	minProbeInterval     = 500 * time.Millisecond
	minProbeTimeout      = time.Second
)

// probeTimes returns how long a Pub/Sub link hears nothing from its shard
// before it sends a PING, and how long it then waits for anything to
// arrive: the heartbeat's Interval and Timeout, or 3s and 3s when it is
// disabled.
func (c *client) probeTimes() (interval, timeout time.Duration) {
	if h := c.cfg.health; !h.Disable {
		// Floors: a silence shorter than 1.5 s is more often a loaded
		// machine than a dead connection, and a false failure costs a
		// resubscription (messages published meanwhile are lost).
		return max(h.Interval, minProbeInterval), max(h.Timeout, minProbeTimeout)
	}
	return defaultProbeInterval, defaultProbeTimeout
}
