package redshard

import (
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/pubsub"
)

// A topology as internal/pubsub places subscriptions on it. It needs the
// topology and its backends only, not the client: the Host (pubsub.go)
// hands it out for the current ring, and SetShards (membership.go) for
// the ring it is about to switch to (Hub.FollowRing).

// pubsubRing places subscriptions on a topology: a channel on its owner,
// a pattern on every shard, and during a change on the other ring too
// (topology.rings), where processes that have not switched yet still
// publish. Equal values stand for the same topology.
type pubsubRing struct{ t *topology }

func (r pubsubRing) Owners(channel string) []pubsub.Shard {
	var out []pubsub.Shard
	for _, t := range r.t.rings() {
		out = append(out, pubsubShard{t.shards[t.ring.LookupIndex(channel)].backend})
	}
	return out
}

func (r pubsubRing) All() []pubsub.Shard {
	var out []pubsub.Shard
	for _, t := range r.t.rings() {
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
