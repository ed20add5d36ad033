package hot

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestDirectMissJoinsALookThatHits: a direct miss registers its name, then
// looks in the cache once more and finds the reply (a miss that ended just
// before stored it). A caller that joined it in between gets that reply,
// not a nil one.
func TestDirectMissJoinsALookThatHits(t *testing.T) {
	h, b, admin := newTestPath(t)
	ctx := context.Background()
	if err := admin.Set(ctx, "dm", "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cacheKey(t, h, b, "dm")
	hs := b.HotState()

	joined := make(chan struct{})
	joinerDone := make(chan *redis.StringCmd, 1)
	var leader atomic.Bool
	directMissHook = func(j bool) {
		if j {
			close(joined)
			return
		}
		if !leader.CompareAndSwap(false, true) {
			return
		}
		// The leader has registered: a second miss of the same name joins
		// it before the leader looks in the cache again.
		go func() {
			cmd := redis.NewStringCmd(ctx, "get", "dm")
			_ = h.missedRead(ctx, testTopology{b}, b, hs, "dm", getSubKey, cmd)
			joinerDone <- cmd
		}()
		<-joined
	}
	defer func() { directMissHook = nil }()

	cmd := redis.NewStringCmd(ctx, "get", "dm")
	if err := h.missedRead(ctx, testTopology{b}, b, hs, "dm", getSubKey, cmd); err != nil || cmd.Val() != "v1" {
		t.Fatalf("leader: %q, %v; want v1", cmd.Val(), err)
	}
	j := <-joinerDone
	if v, err := j.Result(); err != nil || v != "v1" {
		t.Fatalf("joiner: %q, %v; want v1", v, err)
	}
}
