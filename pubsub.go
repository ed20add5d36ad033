package redshard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Subscribe subscribes to channels on the shard that owns them: PUBLISH
// through a Client goes to the shard that owns the channel name (hash tags
// honoured), so subscribers and publishers meet there. All channels must
// live on one shard (check with ShardFor, or put them under one {hash tag});
// later pubsub.Subscribe calls on the returned PubSub must name channels of
// that same shard. With no channel, or channels on several shards, the
// returned PubSub is bound to no shard: its Receive and Channel report an
// error wrapping ErrNotSharded (use SubscribeShards). It never dials
// anything but a shard. A subscription stays on the shard it was made on:
// after SetShards moves a channel to another shard, subscribe again.
func (c *Client) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return c.subscribe(ctx, channels, (*redis.Client).Subscribe)
}

// SSubscribe subscribes to sharded channels (SPUBLISH), with the same
// placement rules as Subscribe.
func (c *Client) SSubscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return c.subscribe(ctx, channels, (*redis.Client).SSubscribe)
}

// PSubscribe is not supported: a pattern can match channels on every shard,
// which one *redis.PubSub (one connection) cannot follow. The returned
// PubSub reports an error wrapping ErrNotSharded. Use PSubscribeShards,
// which subscribes to the patterns on every shard.
func (c *Client) PSubscribe(ctx context.Context, patterns ...string) *redis.PubSub {
	return c.Client.PSubscribe(ctx, patterns...)
}

func (c *Client) subscribe(ctx context.Context, channels []string,
	sub func(*redis.Client, context.Context, ...string) *redis.PubSub,
) *redis.PubSub {
	top, err := c.topology()
	if err == nil && len(channels) > 0 {
		i := top.ring.LookupIndex(channels[0])
		same := true
		for _, ch := range channels[1:] {
			same = same && top.ring.LookupIndex(ch) == i
		}
		if same {
			return sub(top.shards[i].client, ctx, channels...)
		}
	}
	// The front client's dialer refuses, so this PubSub reports errFrontDial.
	return sub(c.Client, ctx, channels...)
}

// MultiPubSub is a subscription spread over several shards: one
// *redis.PubSub per shard involved, their messages merged into one
// channel. Create it with SubscribeShards or PSubscribeShards; it is safe
// for concurrent use and must be closed.
type MultiPubSub struct {
	subs []*redis.PubSub
	ch   chan *redis.Message
	wg   sync.WaitGroup // the forwarding goroutines

	closeOnce sync.Once
	closeErr  error
}

// SubscribeShards subscribes to channels that may live on several shards:
// each channel is subscribed on the shard its PUBLISH goes to. It returns
// once every subscription is confirmed, so a message published after it
// returns is delivered. Like Subscribe, it follows the ring of the moment
// it is called: after SetShards, subscribe again.
func (c *Client) SubscribeShards(ctx context.Context, channels ...string) (*MultiPubSub, error) {
	top, err := c.topology()
	if err != nil {
		return nil, err
	}
	groups := map[int][]string{}
	for _, ch := range channels {
		i := top.ring.LookupIndex(ch)
		groups[i] = append(groups[i], ch)
	}
	m := &MultiPubSub{ch: make(chan *redis.Message, 100)}
	for i, chans := range groups {
		if err := m.add(ctx, top.shards[i], top.shards[i].client.Subscribe(ctx, chans...), len(chans)); err != nil {
			_ = m.Close()
			return nil, err
		}
	}
	m.start()
	return m, nil
}

// PSubscribeShards subscribes to patterns on every shard, since a pattern
// can match channels owned by any of them. It returns once every
// subscription is confirmed.
func (c *Client) PSubscribeShards(ctx context.Context, patterns ...string) (*MultiPubSub, error) {
	top, err := c.topology()
	if err != nil {
		return nil, err
	}
	m := &MultiPubSub{ch: make(chan *redis.Message, 100)}
	for _, s := range top.shards {
		if err := m.add(ctx, s, s.client.PSubscribe(ctx, patterns...), len(patterns)); err != nil {
			_ = m.Close()
			return nil, err
		}
	}
	m.start()
	return m, nil
}

// add waits for n subscription confirmations on ps and keeps it.
func (m *MultiPubSub) add(ctx context.Context, s *shard, ps *redis.PubSub, n int) error {
	m.subs = append(m.subs, ps)
	for ; n > 0; n-- {
		msg, err := ps.Receive(ctx)
		if err != nil {
			return fmt.Errorf("redshard: subscribing on shard %s: %w", s.Shard, err)
		}
		if _, ok := msg.(*redis.Subscription); !ok {
			return fmt.Errorf("redshard: subscribing on shard %s: unexpected %T", s.Shard, msg)
		}
	}
	return nil
}

func (m *MultiPubSub) start() {
	for _, ps := range m.subs {
		in := ps.Channel()
		m.wg.Go(func() {
			for msg := range in {
				m.ch <- msg
			}
		})
	}
}

// Channel returns the merged channel of messages. It is closed by Close.
// A consumer that stops reading holds up every shard's subscription.
func (m *MultiPubSub) Channel() <-chan *redis.Message { return m.ch }

// Close unsubscribes on every shard and closes Channel. It is idempotent.
// Messages still buffered for a consumer that stopped reading are dropped.
func (m *MultiPubSub) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		for _, ps := range m.subs {
			if err := ps.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		// Drain so forwarders blocked on a full m.ch can finish.
		done := make(chan struct{})
		go func() {
			m.wg.Wait()
			close(done)
		}()
		for drained := false; !drained; {
			select {
			case <-m.ch:
			case <-done:
				drained = true
			}
		}
		close(m.ch)
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}
