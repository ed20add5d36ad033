package redshard

import (
	"context"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/loan"
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
	defer runtime.KeepAlive(c) // until the PubSub is lent (internal/loan)
	ps := c.pubsubFront().Subscribe(ctx, channels...)
	loan.UntilUnreachable(c.loans, ps)
	return ps
}

// PSubscribe subscribes to patterns on every shard, since a pattern can
// match channels owned by any of them; otherwise as Subscribe.
func (c *Client) PSubscribe(ctx context.Context, patterns ...string) *redis.PubSub {
	defer runtime.KeepAlive(c)
	ps := c.pubsubFront().PSubscribe(ctx, patterns...)
	loan.UntilUnreachable(c.loans, ps)
	return ps
}

// SSubscribe subscribes to shard channels (SPUBLISH) on their owners;
// otherwise as Subscribe.
func (c *Client) SSubscribe(ctx context.Context, channels ...string) *redis.PubSub {
	defer runtime.KeepAlive(c)
	ps := c.pubsubFront().SSubscribe(ctx, channels...)
	loan.UntilUnreachable(c.loans, ps)
	return ps
}

// pubsubFront returns the front client of the Client's PubSubs, creating
// the hub and its goroutine on first use (pubsub.Lazy). After Close it is
// closed, so its PubSubs report redis.ErrClosed. SetShards and a fleet's
// phase call c.pubsub.Follow before returning (or acknowledging), so that a
// message published on the new ring after they have reaches the
// subscribers.
func (c *client) pubsubFront() *redis.Client {
	return c.pubsub.Front(func() pubsub.Host { return pubsubHost{c} })
}

// pubsubHost is the Client as internal/pubsub sees it.
type pubsubHost struct{ c *client }

func (p pubsubHost) Ring() pubsub.Ring        { return pubsubRing{p.c.top.Load()} }
func (p pubsubHost) Context() context.Context { return p.c.flights.Context() }
func (p pubsubHost) Closed() bool             { return p.c.closed.Load() }
func (p pubsubHost) ProbeTimes() (time.Duration, time.Duration) {
	h := p.c.cfg.health
	return pubsub.ProbeTimes(!h.Disable, h.Interval, h.Timeout)
}
func (p pubsubHost) RESP3() bool {
	return p.c.cfg.opt.shardOptions(Shard{}).Protocol != 2
}

// Go runs fn as one of the calls Close cancels (flights.Context()) and waits for.
func (p pubsubHost) Go(fn func()) bool { return p.c.flights.Go(fn) }
