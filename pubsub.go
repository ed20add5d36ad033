package redshard

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Pub/Sub across shards.
//
// PUBLISH and SPUBLISH go to the shard that owns the channel name, so a
// subscriber must listen there, and a pattern can match channels of every
// shard. A *redis.PubSub reads one connection, so Subscribe and its
// siblings return a PubSub of a private front client whose dialer returns a
// local multiplexer (mux, pubsub_mux.go) instead of a socket: it speaks
// RESP2 to the PubSub, subscribes each channel on its owner's shard and
// each pattern on every shard through one go-redis PubSub per shard
// (pubsub_link.go, RESP2 or RESP3 as the shard is configured), and merges
// what they receive. Everything a PubSub does (Subscribe, Unsubscribe,
// Channel, Receive, Ping, its reconnects) works unchanged on top of it.

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
// PubSub when done, as with go-redis.
func (c *Client) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return c.pubsubFront().Subscribe(ctx, channels...)
}

// PSubscribe subscribes to patterns on every shard, since a pattern can
// match channels owned by any of them; otherwise as Subscribe.
func (c *Client) PSubscribe(ctx context.Context, patterns ...string) *redis.PubSub {
	return c.pubsubFront().PSubscribe(ctx, patterns...)
}

// SSubscribe subscribes to shard channels (SPUBLISH) on their owners;
// otherwise as Subscribe.
func (c *Client) SSubscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return c.pubsubFront().SSubscribe(ctx, channels...)
}

// pubsubHub is a Client's Pub/Sub state: the front client the PubSubs come
// from, the live multiplexers, and the goroutine that moves their
// subscriptions when the ring changes and closes them when the Client
// closes. Its zero value is ready; it is safe for concurrent use.
type pubsubHub struct {
	once  sync.Once
	front *redis.Client // set by once

	mu    sync.Mutex        // guards muxes
	muxes map[*mux]struct{} // open multiplexers
}

// ringPoll is how often the hub looks for a new ring (SetShards, the end
// of a change). Reading an atomic pointer costs nothing; the interval
// bounds how long after SetShards a moved channel's subscription follows.
const ringPoll = 20 * time.Millisecond

// pubsubFront returns the front client of the Client's PubSubs, creating
// it and the hub's goroutine on first use. After Close it is closed, so
// its PubSubs report redis.ErrClosed.
func (c *client) pubsubFront() *redis.Client {
	h := &c.pubsub
	h.once.Do(func() {
		h.muxes = map[*mux]struct{}{}
		h.front = redis.NewClient(&redis.Options{
			Addr:            "redshard-pubsub:0", // never resolved: the dialer makes a mux
			Protocol:        2,
			DisableIdentity: true,
			MaxRetries:      -1,
			PoolSize:        1,
			ReadTimeout:     -1,
			WriteTimeout:    -1, // a mux never blocks a write
			MaintNotificationsConfig: &maintnotifications.Config{
				Mode: maintnotifications.ModeDisabled,
			},
			Dialer: func(context.Context, string, string) (net.Conn, error) { return c.newMux() },
		})
		if !c.flights.running.enter() { // closed already
			_ = h.front.Close()
			return
		}
		go c.followRing()
	})
	return h.front
}

// followRing reroutes every mux's subscriptions when the ring changes, and
// closes the front client and the muxes when the Client closes.
func (c *client) followRing() {
	defer c.flights.running.leave()
	h := &c.pubsub
	last := c.top.Load()
	tick := time.NewTicker(ringPoll)
	defer tick.Stop()
	for {
		select {
		case <-c.flights.ctx.Done():
			_ = h.front.Close() // closes the muxes it holds; their contexts are done already
			return
		case <-tick.C:
		}
		top := c.top.Load()
		if top == last {
			continue
		}
		last = top
		h.mu.Lock()
		all := make([]*mux, 0, len(h.muxes))
		for m := range h.muxes {
			all = append(all, m)
		}
		h.mu.Unlock()
		for _, m := range all {
			m.reroute()
		}
	}
}

// followPubSub places every open PubSub's subscriptions on the current
// ring now, rather than at the hub's next poll, and waits until each shard
// that gained subscriptions has confirmed them, or has failed (its
// PubSub's Receive said so), or ctx ends, or subscribeWait passes; a shard
// still unconfirmed then is reported on the Receive of the PubSubs
// concerned. SetShards and a fleet's phase call it before returning (or
// acknowledging), so that a message published on the new ring after they
// have reaches the subscribers.
func (c *client) followPubSub(ctx context.Context) {
	h := &c.pubsub
	h.mu.Lock()
	all := make([]*mux, 0, len(h.muxes))
	for m := range h.muxes {
		all = append(all, m)
	}
	h.mu.Unlock()
	if len(all) == 0 {
		return
	}
	for _, m := range all {
		m.reroute()
	}
	deadline := time.Now().Add(subscribeWait)
	for _, m := range all {
		m.awaitMoved(ctx, deadline)
	}
}

// newMux is the front client's dialer: a new multiplexer, registered with
// the hub until it closes.
func (c *client) newMux() (net.Conn, error) {
	if c.closed.Load() {
		return nil, redis.ErrClosed
	}
	m := newMux(c)
	h := &c.pubsub
	h.mu.Lock()
	h.muxes[m] = struct{}{}
	h.mu.Unlock()
	// A ring stored between newMux's read and the registration above was
	// rerouted without this mux: place it on the newest one (nothing to do
	// when it is the same).
	m.reroute()
	context.AfterFunc(m.ctx, func() {
		m.shutdown(errMuxClosed)
		h.mu.Lock()
		delete(h.muxes, m)
		h.mu.Unlock()
	})
	return m, nil
}
