package redshard_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.uber.org/goleak"

	"github.com/redshard/redshard"
)

// goRedisOwn is the goroutine go-redis itself starts for each client it
// builds (maintenance notifications, RESP3), as it does for a plain client.
var goRedisOwn = goleak.IgnoreTopFunction("github.com/redis/go-redis/v9/maintnotifications.(*CircuitBreakerManager).cleanupLoop")

// TestHeartbeatStartsOnFirstUse: NewClient starts no goroutine of its own
// (asynq's tests, which never close their clients, leaked one heartbeat
// each); the first command starts the heartbeat, which then watches every
// shard, also those no command has used yet.
func TestHeartbeatStartsOnFirstUse(t *testing.T) {
	var minis []*miniredis.Miniredis
	var shards []redshard.Shard
	for _, name := range []string{"a", "b", "c", "d"} {
		m := miniredis.RunT(t)
		minis = append(minis, m)
		shards = append(shards, redshard.Shard{Name: name, Addr: m.Addr()})
	}
	changes := make(chan redshard.ShardStateChange, 8)
	opt := &redshard.Options{Shards: shards, Health: &redshard.HealthOptions{
		Interval:           10 * time.Millisecond,
		Timeout:            time.Second,
		OnShardStateChange: func(ch redshard.ShardStateChange) { changes <- ch },
	}}

	before := goleak.IgnoreCurrent()
	c, err := redshard.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := goleak.Find(before, goRedisOwn); err != nil {
		t.Fatalf("NewClient started goroutines before any use: %v", err)
	}

	ctx := t.Context()
	key := "k"
	owner, _ := c.ShardFor(key)
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Stop a shard the command did not use: only the heartbeat can notice.
	var victim *miniredis.Miniredis
	var name string
	for i, s := range shards {
		if s.Name != owner {
			victim, name = minis[i], s.Name
			break
		}
	}
	victim.Close()
	for _, down := range []bool{true, false} {
		select {
		case ch := <-changes:
			if ch.Shard != name || ch.Down != down {
				t.Fatalf("state change %+v; want %s down=%v", ch, name, down)
			}
		case <-time.After(10 * time.Second): // a watchdog, not a measurement
			t.Fatalf("no heartbeat marked shard %s down=%v", name, down)
		}
		if down {
			// Back up, so go-redis's redial loop for it ends (goleak).
			if err := victim.Restart(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestHeartbeatNotStartedClose: a client closed before any use has no
// heartbeat to stop, and its Close does not start one.
func TestHeartbeatNotStartedClose(t *testing.T) {
	m := miniredis.RunT(t)
	before := goleak.IgnoreCurrent()
	c, err := redshard.NewClient(&redshard.Options{Shards: []redshard.Shard{{Name: "a", Addr: m.Addr()}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("PING after Close succeeded")
	}
	if err := goleak.Find(before, goRedisOwn); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
}
