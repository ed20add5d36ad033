package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/registry/internal/feed"
)

// Watch implements Registry. A Redis watcher learns of configs three ways:
// the announcement Publish sends with each config (which carries the whole
// config, so a burst of publishes is delivered config by config); a re-read
// whenever its subscription is (re)established, since announcements sent
// while it was down are lost; and a re-read every PollInterval, for
// announcements lost any other way.
func (r *redisRegistry) Watch(ctx context.Context) (<-chan Config, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	rdb, err := r.client(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: watch: subscribe to %s: %w", r.channel, err)
	}
	ps := rdb.Subscribe(ctx, r.channel)
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		_ = ps.Close()
		return nil, fmt.Errorf("registry: watch: subscribe to %s: %w", r.channel, err)
	}
	cur, err := r.Get(ctx)
	if err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("registry: watch: %w", err)
	}
	out := make(chan Config)
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	err = r.start(func() {
		defer close(out)
		defer cancel()
		defer stop()
		defer func() { _ = ps.Close() }()
		r.watch(wctx, ps, cur, out)
	})
	if err != nil {
		stop()
		cancel()
		_ = ps.Close()
		return nil, err
	}
	return out, nil
}

func (r *redisRegistry) watch(ctx context.Context, ps *redis.PubSub, cur Config, out chan Config) {
	f := newFeed()
	if cur.Epoch != 0 {
		f.Offer(cur)
	}
	msgs := ps.ChannelWithSubscriptions()
	tick := time.NewTicker(r.opt.PollInterval)
	defer tick.Stop()
	for {
		send, next := f.Next(out)
		select {
		case <-ctx.Done():
			return
		case send <- next:
			f.Sent()
		case m, ok := <-msgs:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Message:
				c, err := DecodeConfig([]byte(m.Payload))
				if err != nil {
					r.poll(ctx, f) // not ours to judge; the stored config is
					continue
				}
				f.Offer(c)
			case *redis.Subscription:
				// Re-subscribed after a lost connection: announcements
				// made in between are gone.
				r.poll(ctx, f)
			}
		case <-tick.C:
			r.poll(ctx, f)
		}
	}
}

// poll re-reads the stored config into f. An error (the registry is down)
// keeps the last config; the next tick tries again. A re-read lasts at
// most a PollInterval, so a registry that stopped answering delays
// neither the next poll nor Close by more.
func (r *redisRegistry) poll(ctx context.Context, f *feed.Feed[Config]) {
	ctx, cancel := context.WithTimeout(ctx, r.opt.PollInterval)
	defer cancel()
	c, err := r.Get(ctx)
	if err == nil && c.Epoch != 0 {
		f.Offer(c)
	}
}

// newFeed returns a feed of configs in Version order.
func newFeed() *feed.Feed[Config] {
	return &feed.Feed[Config]{Less: func(a, b Config) bool { return a.Version().Less(b.Version()) }}
}
