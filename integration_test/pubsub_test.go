package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/conformance"
	"github.com/redshard/redshard/internal/redistest"
)

// pubsubEvents drives a PubSub as applications and go-redis's tests do
// and returns what it received, one line per event; each publish is
// received before the next, so shards cannot reorder them.
func pubsubEvents(t *testing.T, c redis.UniversalClient, a, b string) []string {
	t.Helper()
	ctx := context.Background()
	ps := c.Subscribe(ctx)
	defer ps.Close()
	ev := conformance.NewPubSubEvents(ps)
	step := func(name string, err error, n int) { ev.Step(ctx, name, err, n) }
	pub := func(ch, payload string, n int) { step("PUBLISH "+ch, c.Publish(ctx, ch, payload).Err(), n) }
	spub := func(ch, payload string, n int) { step("SPUBLISH "+ch, c.SPublish(ctx, ch, payload).Err(), n) }
	step("PING", ps.Ping(ctx), 1)
	step("PING x", ps.Ping(ctx, "x"), 1)
	step("SUBSCRIBE a b", ps.Subscribe(ctx, a, b), 2)
	step("PSUBSCRIBE", ps.PSubscribe(ctx, "p:*"), 1)
	step("SUBSCRIBE a again", ps.Subscribe(ctx, a), 1)
	step("SSUBSCRIBE a b", ps.SSubscribe(ctx, a, b), 2)
	step("PING subscribed", ps.Ping(ctx), 1)
	step("PING y subscribed", ps.Ping(ctx, "y"), 1)
	pub(a, "1", 1)
	pub(b, "2", 1)
	spub(a, "s1", 1)
	spub(b, "s2", 1)
	pub("p:1", "3", 1)
	pub("p:2", "4", 1)
	step("UNSUBSCRIBE a", ps.Unsubscribe(ctx, a), 1)
	step("UNSUBSCRIBE never", ps.Unsubscribe(ctx, "never"), 1)
	pub(a, "gone", 0)
	pub(b, "5", 1)
	step("SUNSUBSCRIBE all", ps.SUnsubscribe(ctx), 2)
	step("UNSUBSCRIBE all", ps.Unsubscribe(ctx), 1)
	step("UNSUBSCRIBE all again", ps.Unsubscribe(ctx), 1)
	step("PUNSUBSCRIBE all", ps.PUnsubscribe(ctx), 1)
	step("PING unsubscribed", ps.Ping(ctx), 1)
	step("SUBSCRIBE b again", ps.Subscribe(ctx, b), 1)
	pub(b, "6", 1)
	return ev.Events
}

// TestPubSubLikeOneServer: go-redis's PubSub through redshard on four real
// shards gives, event for event, what it gives on one server, on RESP2 and
// RESP3 shards (SUNSUBSCRIBE's order aside, which is a set's on a server).
func TestPubSubLikeOneServer(t *testing.T) {
	single := redistest.Start(t)
	var addrs []string
	for range 4 {
		addrs = append(addrs, redistest.Start(t).Addr())
	}
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) {
			opt := &redis.Options{Protocol: protocol}
			plain := redis.NewClient(&redis.Options{Addr: single.Addr(), Protocol: protocol})
			defer plain.Close()
			var shards []redshard.Shard
			for i, a := range addrs {
				shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: a})
			}
			c, err := redshard.NewClient(&redshard.Options{Shards: shards, ShardOptions: opt})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			keys := conformance.KeyPerShard(c.ShardFor, "ch", "shard-0", "shard-3")
			a, b := keys[0], keys[1] // channels of shard-0 and shard-3
			want := sortSUnsub(pubsubEvents(t, plain, a, b))
			got := sortSUnsub(pubsubEvents(t, c, a, b))
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("through redshard:\n  %s\none server:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// During a membership change a channel whose owner changed is subscribed
// on its previous owner and its new one; PUBSUB NUMSUB and SHARDNUMSUB
// count it on its owner only, typed (PubSubNumSub, PubSubShardNumSub) as
// through Do. Before, the typed replies summed the shards: go-redis's
// "should sharded pub/sub channels" spec saw {"mychannel": 2} from
// SHARDNUMSUB under membership churn (internal/goredissuite
// rs4churn-resp2), and later "should return the numbers of subscribers" the
// same from NUMSUB. On real servers: miniredis has no SSUBSCRIBE.
func TestPubSubNumSubDuringChange(t *testing.T) {
	for _, kind := range []struct {
		name      string
		subscribe func(*redshard.Client, string) *redis.PubSub
		count     func(*redis.Client, ...string) *redis.MapStringIntCmd
	}{
		{"SHARDNUMSUB", func(c *redshard.Client, ch string) *redis.PubSub { return c.SSubscribe(context.Background(), ch) },
			func(d *redis.Client, ch ...string) *redis.MapStringIntCmd {
				return d.PubSubShardNumSub(context.Background(), ch...)
			}},
		{"NUMSUB", func(c *redshard.Client, ch string) *redis.PubSub { return c.Subscribe(context.Background(), ch) },
			func(d *redis.Client, ch ...string) *redis.MapStringIntCmd {
				return d.PubSubNumSub(context.Background(), ch...)
			}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			s0, s1 := redistest.Start(t), redistest.Start(t)
			one := []redshard.Shard{{Name: "shard-0", Addr: s0.Addr()}}
			two := append(one[:1:1], redshard.Shard{Name: "shard-1", Addr: s1.Addr()})
			c, err := redshard.NewClient(&redshard.Options{Shards: one})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ring2, err := redshard.NewClient(&redshard.Options{Shards: two})
			if err != nil {
				t.Fatal(err)
			}
			ch := conformance.KeyPerShard(ring2.ShardFor, "sch", "shard-1")[0] // moves to shard-1
			ring2.Close()
			ps := kind.subscribe(c, ch)
			defer ps.Close()
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.SetShards(ctx, two); err != nil {
				t.Fatal(err)
			}
			d0 := redis.NewClient(&redis.Options{Addr: s0.Addr()})
			defer d0.Close()
			d1 := redis.NewClient(&redis.Options{Addr: s1.Addr()})
			defer d1.Close()
			deadline := time.Now().Add(10 * time.Second)
			for kind.count(d1, ch).Val()[ch] != 1 {
				if time.Now().After(deadline) {
					t.Fatal("the channel was not subscribed on its new owner")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if n := kind.count(d0, ch).Val()[ch]; n != 1 {
				t.Fatalf("during the change: %d subscribers on the previous owner, want 1 (the test needs both)", n)
			}
			var typed map[string]int64
			if kind.name == "NUMSUB" {
				typed, err = c.PubSubNumSub(ctx, ch, "other").Result()
			} else {
				typed, err = c.PubSubShardNumSub(ctx, ch, "other").Result()
			}
			if err != nil || len(typed) != 2 || typed[ch] != 1 || typed["other"] != 0 {
				t.Errorf("PUBSUB %s during the change = %v, %v; want {%s: 1, other: 0}", kind.name, typed, err, ch)
			}
			raw, err := c.Do(ctx, "PUBSUB", kind.name, ch).Result()
			if err != nil || fmt.Sprint(raw) != fmt.Sprint([]interface{}{ch, int64(1)}) {
				t.Errorf("PUBSUB %s (Do) during the change = %v, %v; want [%s 1]", kind.name, raw, err, ch)
			}
		})
	}
}

// sortSUnsub puts the two replies of "SUNSUBSCRIBE all" in a fixed order,
// with their counts, which depend on the order.
func sortSUnsub(events []string) []string {
	for i, e := range events {
		if e == "SUNSUBSCRIBE all" && i+2 < len(events) {
			x, y := events[i+1], events[i+2]
			if x > y {
				x, y = y, x
			}
			events[i+1], events[i+2] = strings.Fields(x)[1], strings.Fields(y)[1]
		}
	}
	return events
}

// TestPubSubShardKilled: a shard killed and restarted under a
// subscription, on RESP3: Receive reports the shard's failure, the
// subscriptions (channel, pattern, shard channel) are made again on the
// restarted server, and messages of every shard keep arriving.
func TestPubSubShardKilled(t *testing.T) {
	ctx := context.Background()
	servers := []*redistest.Server{redistest.Start(t), redistest.Start(t)}
	c, err := redshard.NewClient(&redshard.Options{
		Shards: []redshard.Shard{
			{Name: "shard-0", Addr: servers[0].Addr()},
			{Name: "shard-1", Addr: servers[1].Addr()},
		},
		ShardOptions: &redis.Options{Protocol: 3},
		Health:       &redshard.HealthOptions{Interval: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ch string
	for i := 0; ; i++ {
		if ch = fmt.Sprintf("k:%d", i); c.Ring().Lookup(ch) == "shard-1" {
			break
		}
	}
	ps := c.Subscribe(ctx, ch)
	defer ps.Close()
	if err := ps.PSubscribe(ctx, "k:*"); err != nil {
		t.Fatal(err)
	}
	if err := ps.SSubscribe(ctx, ch); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	servers[1].Kill()
	sawError := false
	for !sawError {
		_, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "shard-1") {
			t.Fatalf("Receive after the kill: %v, want the shard's failure", err)
		}
		sawError = true
	}
	servers[1].Restart(t)
	direct := servers[1].Client(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := direct.PubSubNumSub(ctx, ch).Val()[ch]
		pats := direct.PubSubNumPat(ctx).Val()
		sn := direct.PubSubShardNumSub(ctx, ch).Val()[ch]
		if n == 1 && pats == 1 && sn == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: numsub %d, numpat %d, shardnumsub %d; want 1 each", n, pats, sn)
		}
		time.Sleep(5 * time.Millisecond) // polling the server's counts
	}
	direct.Publish(ctx, ch, "p")
	direct.SPublish(ctx, ch, "s")
	got := map[string]int{}
	for len(got) < 2 || got["p"] < 2 {
		msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		if err != nil {
			if strings.Contains(err.Error(), "shard-1") {
				continue // reported while it was down
			}
			t.Fatal(err)
		}
		if m, ok := msg.(*redis.Message); ok {
			got[m.Payload]++
		}
	}
	if got["p"] != 2 || got["s"] != 1 {
		t.Fatalf("messages after the restart: %v, want p twice (channel, pattern) and s once", got)
	}
}

// CLIENT SETNAME on a PubSub names its connections on every shard it
// subscribes on, as on one server (RESP3: in subscribed mode; RESP2, where
// the server refuses it in subscribed mode, before subscribing), and the
// name comes back when a shard's connection is replaced.
func TestPubSubClientSetName(t *testing.T) {
	ctx := context.Background()
	servers := []*redistest.Server{redistest.Start(t), redistest.Start(t)}
	// named returns the ids of the connections of s named name.
	named := func(s *redistest.Server, name string) []string {
		list, err := s.Client(t).ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " name="+name+" ") {
				id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
				ids = append(ids, id)
			}
		}
		return ids
	}
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) {
			var shards []redshard.Shard
			for i, s := range servers {
				shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: s.Addr()})
			}
			c, err := redshard.NewClient(&redshard.Options{Shards: shards, ShardOptions: &redis.Options{Protocol: protocol}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			name := fmt.Sprintf("sub-resp%d", protocol)
			ps := c.PSubscribe(ctx) // nothing yet: RESP2 takes a name only now
			defer ps.Close()
			if err := ps.ClientSetName(ctx, name); err != nil {
				t.Fatal(err)
			}
			if msg, err := ps.Receive(ctx); err != nil || msg.(*redis.Pong).Payload != "OK" {
				t.Fatalf("CLIENT SETNAME reply: %v, %v", msg, err)
			}
			if err := ps.PSubscribe(ctx, "news.*"); err != nil {
				t.Fatal(err)
			}
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			for i, s := range servers {
				if ids := named(s, name); len(ids) != 1 {
					t.Fatalf("shard-%d: connections %v named %s, want 1 (the pattern's)", i, ids, name)
				}
			}
			if protocol == 2 {
				if err := ps.ClientSetName(ctx, "again"); err != nil {
					t.Fatal(err)
				}
				if _, err := ps.Receive(ctx); err == nil || !strings.Contains(err.Error(), "only (P|S)SUBSCRIBE") {
					t.Fatalf("CLIENT SETNAME in subscribed mode on RESP2: %v, want the server's refusal", err)
				}
				return
			}
			if err := ps.ClientSetName(ctx, name+"-2"); err != nil {
				t.Fatal(err)
			}
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			var before []string
			for i, s := range servers {
				if before = named(s, name+"-2"); len(before) != 1 {
					t.Fatalf("shard-%d: connections %v named %s-2 after the rename, want 1", i, before, name)
				}
			}
			// Kill shard-1's subscriber connection: the link reconnects,
			// resubscribes and names its new connection again.
			if err := servers[1].Client(t).ClientKillByFilter(ctx, "ID", before[0]).Err(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for ids := named(servers[1], name+"-2"); len(ids) != 1 || ids[0] == before[0]; ids = named(servers[1], name+"-2") {
				if time.Now().After(deadline) {
					t.Fatalf("shard-1: the reconnected subscriber connection was not named again")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestPubSubShardFrozen: a shard that stops answering (SIGSTOP: its
// connections stay open, nothing comes back) under a subscription, on
// RESP2 and RESP3, with the heartbeat off, so that no shard is marked down
// and no connection severed: only the link's probe can notice. Its PING
// goes unanswered, so Receive reports the shard's failure while the other
// shard keeps delivering; once the server is thawed the link is back, and
// messages published afterwards on both shards arrive, each exactly once.
func TestPubSubShardFrozen(t *testing.T) {
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) {
			ctx := context.Background()
			servers := []*redistest.Server{redistest.Start(t), redistest.Start(t)}
			c, err := redshard.NewClient(&redshard.Options{
				Shards: []redshard.Shard{
					{Name: "shard-0", Addr: servers[0].Addr()},
					{Name: "shard-1", Addr: servers[1].Addr()},
				},
				ShardOptions: &redis.Options{Protocol: protocol},
				Health:       &redshard.HealthOptions{Disable: true}, // the probe: a PING after 3s of silence, 3s to answer
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			keys := conformance.KeyPerShard(c.ShardFor, "fz", "shard-0", "shard-1")
			a, b := keys[0], keys[1] // channels of shard-0 and shard-1
			ps := c.Subscribe(ctx, a, b)
			defer ps.Close()
			for range 2 {
				if _, err := ps.Receive(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// receive returns the next message, failing the test on an
			// error other than shard-1's when tolerated.
			receive := func(what string, timeout time.Duration, shard1Errors bool) (*redis.Message, error) {
				t.Helper()
				for {
					msg, err := ps.ReceiveTimeout(ctx, timeout)
					if err != nil {
						if shard1Errors && strings.Contains(err.Error(), "shard-1") {
							continue
						}
						return nil, err
					}
					if m, ok := msg.(*redis.Message); ok {
						return m, nil
					}
					t.Fatalf("%s: got %#v", what, msg)
				}
			}

			servers[1].Freeze()
			defer servers[1].Thaw()
			// Nothing is published on the frozen shard: only the probe
			// can tell the subscriber. The watchdog is generous.
			if _, err := ps.ReceiveTimeout(ctx, 30*time.Second); err == nil || !strings.Contains(err.Error(), "shard-1") {
				t.Fatalf("Receive while shard-1 is frozen: %v, want shard-1's failure", err)
			}
			if err := c.Publish(ctx, a, "during").Err(); err != nil {
				t.Fatal(err)
			}
			if m, err := receive("shard-0 while shard-1 is frozen", 10*time.Second, true); err != nil || m.Payload != "during" {
				t.Fatalf("shard-0's message while shard-1 is frozen: %v, %v", m, err)
			}

			servers[1].Thaw()
			// Back once a message published on shard-1 arrives: publish
			// markers until one does.
			deadline := time.Now().Add(30 * time.Second)
			for back := false; !back; {
				if time.Now().After(deadline) {
					t.Fatal("no message of shard-1 arrived after the thaw")
				}
				if err := c.Publish(ctx, b, "marker").Err(); err != nil {
					t.Fatalf("PUBLISH on the thawed shard: %v", err)
				}
				m, err := receive("a marker", time.Second, true)
				var ne interface{ Timeout() bool }
				switch {
				case err == nil:
					back = m.Channel == b
				case errors.As(err, &ne) && ne.Timeout():
				default:
					t.Fatalf("waiting for a marker: %v", err)
				}
			}

			const n = 50
			for i := range n {
				for _, ch := range []string{a, b} {
					if err := c.Publish(ctx, ch, fmt.Sprint(i)).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, ch := range []string{a, b} {
				if err := c.Publish(ctx, ch, "end").Err(); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string]map[string]int{a: {}, b: {}}
			for got[a]["end"] == 0 || got[b]["end"] == 0 {
				m, err := receive("after the thaw", 10*time.Second, false)
				if err != nil {
					t.Fatalf("after the thaw, with %v: %v", got, err)
				}
				if m.Payload != "marker" {
					got[m.Channel][m.Payload]++
				}
			}
			for _, ch := range []string{a, b} {
				if len(got[ch]) != n+1 {
					t.Errorf("%s: %d distinct messages after the thaw, want %d", ch, len(got[ch]), n+1)
				}
				for p, k := range got[ch] {
					if k != 1 {
						t.Errorf("%s: message %q arrived %d times", ch, p, k)
					}
				}
			}
		})
	}
}
