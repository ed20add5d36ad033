package redshard

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Subscribe subscribes to channels on the shard that owns them: PUBLISH
// through a Client goes to the shard that owns the channel name (hash tags
// honoured), so subscribers and publishers meet there. All channels must
// live on one shard (check with ShardFor, or put them under one {hash tag});
// later pubsub.Subscribe calls on the returned PubSub must name channels of
// that same shard. With no channel, or channels on several shards, the
// returned PubSub is bound to no shard: its Receive and Channel report an
// error wrapping ErrNotSharded. It never dials anything but a shard.
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
// PubSub reports an error wrapping ErrNotSharded. Subscribe to the pattern
// on each shard's client instead (ForEachShard, ShardClient).
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
