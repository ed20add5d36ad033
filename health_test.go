package redshard_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// healthCluster is a cluster whose client reports shard state changes on a
// channel.
func healthCluster(t *testing.T, failover bool) (*cluster, chan redshard.ShardStateChange, *redshard.Client) {
	cl := newCluster(t, 1, 1, 1)
	events := make(chan redshard.ShardStateChange, 16)
	c, err := redshard.NewClient(&redshard.Options{
		Shards:       cl.shards,
		ShardOptions: &redis.Options{MaxRetries: -1, DialTimeout: 200 * time.Millisecond},
		Health: &redshard.HealthOptions{
			// A closed miniredis refuses at once; the timeout only guards
			// live shards against a slow, loaded test machine.
			Interval: 10 * time.Millisecond, Timeout: time.Second, FailureThreshold: 2, RecoveryThreshold: 2,
			Failover: failover, GutterTTL: 5 * time.Second,
			OnShardStateChange: func(e redshard.ShardStateChange) { events <- e },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return cl, events, c
}

func waitEvent(t *testing.T, events chan redshard.ShardStateChange, shard string, down bool) {
	t.Helper()
	for {
		select {
		case e := <-events:
			if e.Shard == shard && e.Down == down {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event: %s down=%v", shard, down)
		}
	}
}

func TestShardDownFailsFast(t *testing.T) {
	cl, events, c := healthCluster(t, false)
	onDead := cl.keysOn(t, "shard-1", "k", 1)[0]
	onLive := cl.keysOn(t, "shard-0", "k", 1)[0]
	c.Set(ctx, onDead, "v", 0)
	cl.mini["shard-1"].Close()
	waitEvent(t, events, "shard-1", true)

	err := c.Get(ctx, onDead).Err()
	if !errors.Is(err, redshard.ErrShardDown) || !strings.Contains(err.Error(), "shard-1") {
		t.Fatalf("GET on the dead shard: %v, want ErrShardDown naming shard-1", err)
	}
	if err := c.Set(ctx, onLive, "v", 0).Err(); err != nil {
		t.Fatalf("the other shards must keep working: %v", err)
	}
	cmds, _ := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, onDead)
		p.Get(ctx, onLive)
		return nil
	})
	if !errors.Is(cmds[0].Err(), redshard.ErrShardDown) || cmds[1].Err() != nil {
		t.Fatalf("pipeline: %v / %v", cmds[0].Err(), cmds[1].Err())
	}
	if err := c.DBSize(ctx).Err(); !errors.Is(err, redshard.ErrShardDown) {
		t.Fatalf("DBSIZE with a shard down: %v", err)
	}
	if st := c.Stats(); st.ShardDowns != 1 || !st.Shards[1].Down {
		t.Fatalf("stats: %+v", st)
	}

	if err := cl.mini["shard-1"].Restart(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, "shard-1", false)
	if got, err := c.Get(ctx, onDead).Result(); err != nil || got != "v" {
		t.Fatalf("GET after the shard came back: %q, %v", got, err)
	}
}

func TestFailoverServesFromStandInAndForgetsStaleValues(t *testing.T) {
	cl, events, c := healthCluster(t, true)
	keys := cl.keysOn(t, "shard-2", "user", 20)
	for _, k := range keys {
		c.Set(ctx, k, "old", 0)
	}
	cl.mini["shard-2"].Close()
	waitEvent(t, events, "shard-2", true)

	// A cache workload: misses are reloaded and written to the stand-in.
	for i, k := range keys {
		if i%2 == 0 {
			continue // half the keys are not touched during the outage
		}
		if err := c.Get(ctx, k).Err(); err != redis.Nil {
			t.Fatalf("GET %s during the outage: %v, want a miss on the stand-in", k, err)
		}
		if err := c.Set(ctx, k, "new", 0).Err(); err != nil {
			t.Fatalf("SET %s on the stand-in: %v", k, err)
		}
		if got := c.Get(ctx, k).Val(); got != "new" {
			t.Fatalf("GET %s = %q", k, got)
		}
		name := ""
		for n, m := range cl.mini {
			if n != "shard-2" && m.Exists(k) {
				name = n
				if ttl := m.TTL(k); ttl <= 0 || ttl > 5*time.Second {
					t.Fatalf("%s on stand-in %s has TTL %v, want capped to 5s", k, n, ttl)
				}
			}
		}
		if name == "" {
			t.Fatalf("%s is on no stand-in", k)
		}
	}
	if err := cl.mini["shard-2"].Restart(); err != nil { // comes back with its old data
		t.Fatal(err)
	}
	waitEvent(t, events, "shard-2", false)
	for i, k := range keys {
		got, err := c.Get(ctx, k).Result()
		switch {
		case i%2 == 0 && got != "old":
			t.Fatalf("untouched key %s = %q, %v", k, got, err)
		case i%2 == 1 && err != redis.Nil:
			t.Fatalf("key %s overwritten during the outage came back as %q (%v): the returning shard served a stale value", k, got, err)
		}
	}
	if st := c.Stats(); st.StandInCommands == 0 || st.OutageKeysCleaned != 10 {
		t.Fatalf("stats %+v: want stand-in commands and 10 keys cleaned on 2 shards", st)
	}
}
