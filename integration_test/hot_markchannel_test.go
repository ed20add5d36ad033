package integration_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHotMarkChannelsHidden: a LocalCache client's write-through refill
// subscribes its shard's invalidation connection to a mark channel of its
// own; the server lists it, PUBSUB CHANNELS through the client does not,
// and the caller's own channels are still listed.
func TestHotMarkChannelsHidden(t *testing.T) {
	c, admin := admitClient(t)
	ctx := context.Background()
	const key = "mark:key"
	if err := c.Set(ctx, key, "v0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 { // read, so that its GET reply is cached: the next write refills
		if err := c.Get(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, key).Result(); err != nil || v != "v1" {
		t.Fatalf("GET after SET = %q, %v; want v1", v, err)
	}
	ps := c.Subscribe(ctx, "user-channel")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	marks := func(chs []string) []string {
		return slices.DeleteFunc(slices.Clone(chs), func(ch string) bool { return !strings.HasPrefix(ch, "__redshard__:mark:") })
	}
	eventually(t, "the server listing a mark channel", func() bool {
		chs, err := admin.PubSubChannels(ctx, "*").Result()
		return err == nil && len(marks(chs)) > 0
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		chs, err := c.PubSubChannels(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if m := marks(chs); len(m) > 0 {
			t.Fatalf("PUBSUB CHANNELS through the client lists mark channels %q", m)
		}
		if slices.Contains(chs, "user-channel") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUBSUB CHANNELS through the client = %q, without user-channel", chs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
