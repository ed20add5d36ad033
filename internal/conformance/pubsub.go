package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// PubSubEvents records what a PubSub receives, one line per event, for
// scripts that drive it through redshard and through a plain client and
// compare the two: every publish is received before the next step, so
// shards cannot reorder them.
type PubSubEvents struct {
	ps     *redis.PubSub
	Events []string
}

// NewPubSubEvents records what ps receives.
func NewPubSubEvents(ps *redis.PubSub) *PubSubEvents { return &PubSubEvents{ps: ps} }

// Step records a step called name, its error if any, and the n events
// received after it (or the error that ended the wait, 5 s at most each).
func (e *PubSubEvents) Step(ctx context.Context, name string, err error, n int) {
	e.Events = append(e.Events, name)
	if err != nil {
		e.Events = append(e.Events, "error: "+err.Error())
	}
	for range n {
		msg, err := e.ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			e.Events = append(e.Events, "error: "+err.Error())
			return
		}
		switch msg := msg.(type) {
		case *redis.Subscription:
			e.Events = append(e.Events, fmt.Sprintf("%s %q %d", msg.Kind, msg.Channel, msg.Count))
		case *redis.Message:
			e.Events = append(e.Events, fmt.Sprintf("message %q %q %q %q", msg.Channel, msg.Pattern, msg.Payload, msg.PayloadSlice))
		case *redis.Pong:
			e.Events = append(e.Events, fmt.Sprintf("pong %q", msg.Payload))
		default:
			e.Events = append(e.Events, fmt.Sprintf("%T %v", msg, msg))
		}
	}
}

// KeyPerShard returns, for each of shards in order, the first key
// prefix:0, prefix:1, ... that shardFor (a redshard Client's ShardFor)
// places on it.
func KeyPerShard(shardFor func(key string) (string, *redis.Client), prefix string, shards ...string) []string {
	out := make([]string, len(shards))
	for i, left := 0, len(shards); left > 0; i++ {
		k := fmt.Sprintf("%s:%d", prefix, i)
		name, _ := shardFor(k)
		for j, s := range shards {
			if s == name && out[j] == "" {
				out[j] = k
				left--
			}
		}
	}
	return out
}
