package pubsub

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Hub is a client's Pub/Sub state: the front client its PubSubs come
// from, the live multiplexers, and the goroutine that moves their
// subscriptions when the ring changes and closes them when the client
// closes (Host.Context). It is safe for concurrent use; make one with
// NewHub.
type Hub struct {
	host  Host
	front *redis.Client // set by NewHub

	mu    sync.Mutex        // guards muxes
	muxes map[*mux]struct{} // open multiplexers
}

// ringPoll is how often the hub looks for a new ring (SetShards, the end
// of a change). Host.Ring should cost nothing; the interval bounds how
// long after a change a moved channel's subscription follows.
const ringPoll = 20 * time.Millisecond

// NewHub returns the Hub of host, with its front client and the goroutine
// that follows host's ring (run by host.Go). If host is closed already,
// the front client is closed, so its PubSubs report redis.ErrClosed.
func NewHub(host Host) *Hub {
	h := &Hub{host: host, muxes: map[*mux]struct{}{}}
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
		Dialer: func(context.Context, string, string) (net.Conn, error) { return h.newMux() },
	})
	if !host.Go(h.followRing) { // closed already
		_ = h.front.Close()
	}
	return h
}

// Front returns the client whose Subscribe, PSubscribe and SSubscribe
// give the PubSubs of the Hub: each connection of it is a mux.
func (h *Hub) Front() *redis.Client { return h.front }

// followRing reroutes every mux's subscriptions when the ring changes, and
// closes the front client and the muxes when the client closes.
func (h *Hub) followRing() {
	done := h.host.Context().Done()
	last := h.host.Ring()
	tick := time.NewTicker(ringPoll)
	defer tick.Stop()
	for {
		select {
		case <-done:
			_ = h.front.Close() // closes the muxes it holds; their contexts are done already
			return
		case <-tick.C:
		}
		top := h.host.Ring()
		if top == last {
			continue
		}
		last = top
		for _, m := range h.open() {
			m.reroute()
		}
	}
}

// open returns the open muxes.
func (h *Hub) open() []*mux {
	h.mu.Lock()
	defer h.mu.Unlock()
	all := make([]*mux, 0, len(h.muxes))
	for m := range h.muxes {
		all = append(all, m)
	}
	return all
}

// Follow places every open PubSub's subscriptions on the current ring
// now, rather than at the hub's next poll, and waits until each shard
// that gained subscriptions has confirmed them, or has failed (its
// PubSub's Receive said so), or ctx ends, or subscribeWait passes; a shard
// still unconfirmed then is reported on the Receive of the PubSubs
// concerned. A membership change calls it before returning (or
// acknowledging), so that a message published on the new ring after it
// has reaches the subscribers.
func (h *Hub) Follow(ctx context.Context) { h.FollowRing(ctx, nil) }

// FollowRing is Follow onto r, a ring the host is about to publish (nil:
// its current one). A change that switches the ring itself (SetShards)
// calls it just before the switch, so that the subscriptions are on the
// new ring's owners before any PUBLISH is routed by it: otherwise a
// message published between the switch and Follow would reach no
// subscriber. The hub's poll then finds the ring in place. A PubSub made
// between the call and the switch is placed at the next poll, as at any
// change.
func (h *Hub) FollowRing(ctx context.Context, r Ring) {
	all := h.open()
	if len(all) == 0 {
		return
	}
	for _, m := range all {
		m.rerouteTo(r)
	}
	deadline := time.Now().Add(subscribeWait)
	for _, m := range all {
		m.awaitMoved(ctx, deadline)
	}
}

// newMux is the front client's dialer: a new multiplexer, registered with
// the hub until it closes.
func (h *Hub) newMux() (net.Conn, error) {
	if h.host.Closed() {
		return nil, redis.ErrClosed
	}
	m := newMux(h)
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
