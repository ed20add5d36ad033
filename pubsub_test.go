package redshard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/conformance"
)

// pubsubScript drives a PubSub the way applications and go-redis's own
// tests do, and returns everything it received, one line per event. Every
// publish is received before the next one, so shards cannot reorder them.
func pubsubScript(t *testing.T, c redis.UniversalClient, a, b string) []string {
	t.Helper()
	ctx := context.Background()
	ps := c.Subscribe(ctx)
	defer ps.Close()
	ev := conformance.NewPubSubEvents(ps)
	step := func(name string, err error, n int) { ev.Step(ctx, name, err, n) }
	pub := func(ch, payload string, n int) {
		step("PUBLISH "+ch, c.Publish(ctx, ch, payload).Err(), n)
	}
	step("PING", ps.Ping(ctx), 1)
	step("PING x", ps.Ping(ctx, "x"), 1)
	step("SUBSCRIBE a b", ps.Subscribe(ctx, a, b), 2)
	step("PSUBSCRIBE", ps.PSubscribe(ctx, "p:*"), 1)
	step("SUBSCRIBE a again", ps.Subscribe(ctx, a), 1)
	step("PING subscribed", ps.Ping(ctx), 1)
	step("PING y subscribed", ps.Ping(ctx, "y"), 1)
	pub(a, "1", 1)
	pub(b, "2", 1)
	pub("p:1", "3", 1)
	pub("p:2", "4", 1)
	step("UNSUBSCRIBE a", ps.Unsubscribe(ctx, a), 1)
	step("UNSUBSCRIBE never", ps.Unsubscribe(ctx, "never"), 1)
	pub(a, "gone", 0)
	pub(b, "5", 1)
	step("UNSUBSCRIBE all", ps.Unsubscribe(ctx), 1)
	step("PUNSUBSCRIBE all", ps.PUnsubscribe(ctx), 1)
	step("UNSUBSCRIBE all again", ps.Unsubscribe(ctx), 1) // with a pattern left, miniredis's count differs from Redis's
	step("PUNSUBSCRIBE all again", ps.PUnsubscribe(ctx), 1)
	step("PING unsubscribed", ps.Ping(ctx), 1)
	step("SUBSCRIBE b again", ps.Subscribe(ctx, b), 1)
	pub(b, "6", 1)
	return ev.Events
}

// The standard Pub/Sub API through redshard on four shards gives, event for
// event, what go-redis gives on one server: confirmations and their counts,
// PONGs inside and outside subscribed mode, unsubscribe replies, messages
// of channels on every shard and of patterns. Also on RESP3 shards.
func TestPubSubLikeOneServer(t *testing.T) {
	single := miniredis.RunT(t)
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) {
			plain := redis.NewClient(&redis.Options{Addr: single.Addr(), Protocol: protocol})
			defer plain.Close()
			cl := newClusterWith(t, func(o *redshard.Options) { o.ShardOptions = &redis.Options{Protocol: protocol} }, 1, 1, 1, 1)
			a, b := cl.twoShardKeys(t)
			want := pubsubScript(t, plain, a, b)
			got := pubsubScript(t, cl.c, a, b)
			if protocol == 3 { // miniredis answers PING in subscribed mode as in RESP2; Redis (integration_test) does not
				for _, events := range [][]string{want, got} {
					i := slices.Index(events, "PING subscribed")
					events[i+1] = "pong"
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("through redshard:\n  %s\ngo-redis on one server:\n  %s",
					strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// Messages of channels on every shard and of a pattern arrive on one
// Channel(), with rdb.Subscribe(ctx) followed by ps.Subscribe, the common
// idiom.
func TestPubSubChannelAllShards(t *testing.T) {
	cl := newCluster(t, 1, 1, 1, 1)
	ps := cl.c.Subscribe(ctx)
	defer ps.Close()
	var chans []string
	for i := range 4 {
		chans = append(chans, cl.keysOn(t, fmt.Sprintf("shard-%d", i), "ch", 2)...)
	}
	if err := ps.Subscribe(ctx, chans...); err != nil {
		t.Fatal(err)
	}
	if err := ps.PSubscribe(ctx, "ev:*"); err != nil {
		t.Fatal(err)
	}
	for range len(chans) + 1 {
		if msg, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		} else if _, ok := msg.(*redis.Subscription); !ok {
			t.Fatalf("got %T %v before the confirmations", msg, msg)
		}
	}
	ch := ps.Channel()
	want := map[string]bool{}
	for i, c := range chans {
		cl.c.Publish(ctx, c, "m")
		ev := fmt.Sprintf("ev:%d", i)
		cl.c.Publish(ctx, ev, "e")
		want[c], want[ev] = true, true
	}
	for len(want) > 0 {
		select {
		case msg := <-ch:
			if !want[msg.Channel] {
				t.Fatalf("unexpected %v", msg)
			}
			delete(want, msg.Channel)
		case <-time.After(10 * time.Second): // a watchdog
			t.Fatalf("messages never arrived: %v", want)
		}
	}
}

// Receive with no subscription waits, as on a server; a timeout is a
// timeout, and the PubSub works afterwards.
func TestPubSubReceiveWithoutSubscription(t *testing.T) {
	cl := newCluster(t, 1, 1)
	ps := cl.c.Subscribe(ctx)
	defer ps.Close()
	_, err := ps.ReceiveTimeout(ctx, 20*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("ReceiveTimeout with nothing subscribed: %v, want a timeout", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := ps.ReceiveMessage(tctx); err == nil {
		t.Fatal("ReceiveMessage with nothing subscribed returned")
	}
	if err := ps.Subscribe(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	if msg, err := ps.Receive(ctx); err != nil || msg.(*redis.Subscription).Count != 1 {
		t.Fatalf("subscribe after a timeout: %v, %v", msg, err)
	}
	cl.c.Publish(ctx, "after", "x")
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "x" {
		t.Fatalf("message after a timeout: %v, %v", msg, err)
	}
}

// numSub is how many subscribers the server m has on channel ch.
func numSub(m *miniredis.Miniredis, ch string) int { return m.PubSubNumSub(ch)[ch] }

// waitFor polls cond (a server-side count redshard cannot signal) until it
// holds or a watchdog expires.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A channel whose owner moves with SetShards is subscribed on its new
// owner; during the change also on the old one (processes still on the
// previous ring publish there), and only on the new one once it is over.
// A pattern follows to the new shard too.
func TestPubSubFollowsMembership(t *testing.T) {
	cl := newCluster(t, 1)
	next := cl.addShard(t, "shard-1", 1)
	cl.shards = cl.shards[:1]
	var ch string
	for i := 0; ; i++ { // a channel shard-1 will own
		ch = fmt.Sprintf("moving:%d", i)
		if cl.c.Ring().Lookup(ch) == "shard-0" && ringWith(t, next).Lookup(ch) == "shard-1" {
			break
		}
	}
	ps := cl.c.Subscribe(ctx, ch)
	defer ps.Close()
	if err := ps.PSubscribe(ctx, "moving:*"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	old, neu := cl.mini["shard-0"], cl.mini["shard-1"]
	if numSub(old, ch) != 1 || numSub(neu, ch) != 0 {
		t.Fatalf("before SetShards: %d subscribers on shard-0, %d on shard-1", numSub(old, ch), numSub(neu, ch))
	}
	if err := cl.c.SetShards(ctx, next); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the subscription on the new owner", func() bool {
		return numSub(neu, ch) == 1 && neu.PubSubNumPat() == 1
	})
	// expect receives the two deliveries of one publish: the channel's and
	// the pattern's, in either order.
	expect := func(payload string) {
		t.Helper()
		seen := map[string]bool{}
		for len(seen) < 2 {
			msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
			if err != nil {
				t.Fatalf("waiting for %q: %v", payload, err)
			}
			if m, ok := msg.(*redis.Message); ok {
				if m.Payload != payload || seen[m.Pattern] {
					t.Fatalf("got %+v, want payload %q once per subscription", m, payload)
				}
				seen[m.Pattern] = true
			}
		}
	}
	// Through redshard: the new owner. Each publish reaches one server, so
	// the channel and the pattern each deliver it once.
	if n := cl.c.Publish(ctx, ch, "new").Val(); n != 2 {
		t.Fatalf("PUBLISH reached %d subscribers, want 2 (channel and pattern)", n)
	}
	expect("new")
	// A process still on the old ring publishes on the old owner.
	if n := old.Publish(ch, "old"); n != 2 {
		t.Fatalf("PUBLISH on the old owner during the change reached %d, want 2", n)
	}
	expect("old")
	if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old owner's subscription to end", func() bool { return numSub(old, ch) == 0 })
	if numSub(neu, ch) != 1 || old.PubSubNumPat() != 1 {
		t.Fatalf("after the change: %d on the new owner, %d patterns on the old shard (still on the ring)",
			numSub(neu, ch), old.PubSubNumPat())
	}
}

// During a change a moved channel is subscribed on its previous owner and
// its new one: PUBSUB CHANNELS lists it once, as one server does. Before,
// the merge concatenated the shards' lists and named it twice (go-redis's
// "should sharded pub/sub channels" spec under membership churn,
// internal/goredissuite rs4churn-resp2).
func TestPubSubChannelsDuringChange(t *testing.T) {
	cl := newCluster(t, 1)
	next := cl.addShard(t, "shard-1", 1)
	cl.shards = cl.shards[:1]
	var ch string
	for i := 0; ; i++ { // a channel shard-1 will own
		ch = fmt.Sprintf("moving:%d", i)
		if cl.c.Ring().Lookup(ch) == "shard-0" && ringWith(t, next).Lookup(ch) == "shard-1" {
			break
		}
	}
	ps := cl.c.Subscribe(ctx, ch)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.SetShards(ctx, next); err != nil {
		t.Fatal(err)
	}
	old, neu := cl.mini["shard-0"], cl.mini["shard-1"]
	waitFor(t, "the subscription on the new owner", func() bool { return numSub(neu, ch) == 1 })
	if numSub(old, ch) != 1 {
		t.Fatalf("during the change: %d subscribers on the previous owner, want 1 (the test needs both)", numSub(old, ch))
	}
	got, err := cl.c.PubSubChannels(ctx, "moving:*").Result()
	if err != nil || !slices.Equal(got, []string{ch}) {
		t.Errorf("PUBSUB CHANNELS during the change = %q, %v; want [%s]", got, err, ch)
	}
	raw, err := cl.c.Do(ctx, "PUBSUB", "CHANNELS", "moving:*").Result()
	if err != nil || fmt.Sprint(raw) != fmt.Sprint([]interface{}{ch}) {
		t.Errorf("PUBSUB CHANNELS (Do) during the change = %v, %v; want [%s]", raw, err, ch)
	}
}

// During a change PUBSUB CHANNELS asks the servers of both rings: a
// channel whose subscribers are still on a server that leaves the ring
// (another process not switched yet, or this client's PubSubs before they
// follow the change) is active, and listed. Before, only the new ring's
// servers were asked (go-redis's "should pub/sub channels" spec under
// membership churn, internal/goredissuite rs4churn-resp2, found one of
// two channels).
func TestPubSubChannelsOnALeavingServer(t *testing.T) {
	cl := newCluster(t, 1, 1)
	leaving := cl.mini["shard-1"]
	other := redis.NewClient(&redis.Options{Addr: leaving.Addr()})
	defer other.Close()
	ps := other.Subscribe(ctx, "leaving:x")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.SetShards(ctx, cl.shards[:1]); err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"leaving:*", "*"} {
		got, err := cl.c.PubSubChannels(ctx, pattern).Result()
		if err != nil || !slices.Contains(got, "leaving:x") {
			t.Errorf("PUBSUB CHANNELS %s during the change = %q, %v; want leaving:x, active on the server being drained", pattern, got, err)
		}
	}
	raw, err := cl.c.Do(ctx, "PUBSUB", "CHANNELS", "leaving:*").Result()
	if err != nil || fmt.Sprint(raw) != "[leaving:x]" {
		t.Errorf("PUBSUB CHANNELS (Do) during the change = %v, %v; want [leaving:x]", raw, err)
	}
	if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.c.PubSubChannels(ctx, "leaving:*").Result(); err != nil || len(got) != 0 {
		t.Errorf("PUBSUB CHANNELS once the server has left = %q, %v; want none", got, err)
	}
}

func ringWith(t *testing.T, shards []redshard.Shard) interface{ Lookup(string) string } {
	t.Helper()
	c, err := redshard.NewClient(&redshard.Options{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Ring()
}

// Subscribing to a channel whose shard is down: Receive says so once, and
// the subscription is made (and confirmed) when the shard is back. The
// other shards' subscriptions are not held up.
func TestPubSubShardDown(t *testing.T) {
	cl := newCluster(t, 1, 1)
	a, b := cl.twoShardKeys(t)
	down := cl.mini["shard-1"]
	down.Close()
	ps := cl.c.Subscribe(ctx, b, a) // b's shard is down
	defer ps.Close()
	var events []string
	for len(events) < 2 {
		msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		switch {
		case err != nil && strings.Contains(err.Error(), "shard-1"):
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				t.Fatalf("the shard's failure is %T, want a redis.Error", err)
			}
			events = append(events, "error")
		case err != nil:
			t.Fatal(err)
		default:
			sub := msg.(*redis.Subscription)
			if sub.Channel != a || sub.Count != 1 {
				t.Fatalf("confirmation %+v, want %s, count 1", sub, a)
			}
			events = append(events, "a")
		}
	}
	cl.c.Publish(ctx, a, "up")
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "up" {
		t.Fatalf("message of the shard that is up: %v, %v", msg, err)
	}
	if err := down.Restart(); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		if err != nil && strings.Contains(err.Error(), "shard-1") {
			continue // still reconnecting
		}
		if err != nil {
			t.Fatal(err)
		}
		if sub := msg.(*redis.Subscription); sub.Channel != b || sub.Count != 2 {
			t.Fatalf("late confirmation %+v, want %s, count 2", sub, b)
		}
		break
	}
	down.Publish(b, "back")
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "back" {
		t.Fatalf("message after the shard came back: %v, %v", msg, err)
	}
}

// A shard that restarts while subscribed: the subscription is made again
// on it, and Channel() keeps delivering.
func TestPubSubShardRestarts(t *testing.T) {
	cl := newCluster(t, 1, 1)
	_, b := cl.twoShardKeys(t)
	m := cl.mini["shard-1"]
	ps := cl.c.Subscribe(ctx, b)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	ch := ps.Channel()
	m.Close()
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the subscription on the restarted shard", func() bool { return numSub(m, b) == 1 })
	m.Publish(b, "again")
	select {
	case msg := <-ch:
		if msg.Payload != "again" {
			t.Fatalf("got %v", msg)
		}
	case <-time.After(10 * time.Second): // a watchdog
		t.Fatal("no message after the shard restarted")
	}
}

// Closing the PubSub, or the Client, while a shard is down and its link
// retries stops everything (goleak checks the goroutines at the end), and
// a PubSub left open sees its Channel closed when the Client closes.
func TestPubSubCloseDuringReconnect(t *testing.T) {
	cl := newCluster(t, 1, 1)
	a, b := cl.twoShardKeys(t)
	cl.mini["shard-1"].Close()
	ps := cl.c.Subscribe(ctx, a, b)
	if _, err := ps.Receive(ctx); err != nil && !strings.Contains(err.Error(), "shard-1") {
		t.Fatal(err)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	open := cl.c.Subscribe(ctx, a, b)
	defer open.Close()
	msgs := open.Channel()
	if err := cl.c.Close(); err != nil {
		t.Fatal(err)
	}
	for range msgs { // closed once the PubSub learns the Client is closed
	}
	if err := cl.c.Subscribe(ctx, a).Ping(ctx); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v, want redis.ErrClosed", err)
	}
}

// A Client closed before its first Subscribe gives PubSubs that report
// redis.ErrClosed.
func TestPubSubAfterClose(t *testing.T) {
	cl := newCluster(t, 1)
	cl.c.Close()
	ps := cl.c.Subscribe(ctx, "x")
	defer ps.Close()
	if _, err := ps.Receive(ctx); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("Receive: %v, want redis.ErrClosed", err)
	}
}

// A pattern subscribed while one shard is down is confirmed once the shards
// that are up have it, and their messages arrive meanwhile (they used to be
// held until the down shard was back, and dropped past 1024).
func TestPubSubPatternWhileShardDown(t *testing.T) {
	cl := newCluster(t, 1, 1)
	a, _ := cl.twoShardKeys(t) // a lives on shard-0
	cl.mini["shard-1"].Close()
	ps := cl.c.PSubscribe(ctx, "*")
	defer ps.Close()
	confirmed := false
	for !confirmed {
		msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		switch {
		case err != nil && strings.Contains(err.Error(), "shard-1"):
		case err != nil:
			t.Fatal(err)
		default:
			if sub, ok := msg.(*redis.Subscription); !ok || sub.Kind != "psubscribe" || sub.Count != 1 {
				t.Fatalf("got %#v, want the pattern's confirmation", msg)
			}
			confirmed = true
		}
	}
	for i := 0; i < 3; i++ {
		if n, err := cl.c.Publish(ctx, a, fmt.Sprint("m", i)).Result(); err != nil || n != 1 {
			t.Fatalf("PUBLISH on the shard that is up: %d, %v", n, err)
		}
		msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		for err != nil && strings.Contains(err.Error(), "shard-1") { // reconnect attempts
			msg, err = ps.ReceiveTimeout(ctx, 5*time.Second)
		}
		if m, ok := msg.(*redis.Message); err != nil || !ok || m.Payload != fmt.Sprint("m", i) {
			t.Fatalf("message %d: %#v, %v", i, msg, err)
		}
	}
}

// Subscribe returns once every shard has the subscription, as one server
// has it once SUBSCRIBE is written: a PUBLISH right after it, before any
// Receive, reaches the subscriber on every shard.
func TestPubSubPublishRightAfterSubscribe(t *testing.T) {
	cl := newCluster(t, 1, 1, 1, 1)
	// Each round has channels of its own: a closed PubSub's connection
	// leaves the server's subscriber list when the server notices the
	// close, which may be after the next round's PUBLISH.
	const rounds = 5
	perShard := make([][]string, 4)
	for i := range perShard {
		perShard[i] = cl.keysOn(t, fmt.Sprintf("shard-%d", i), "ch", rounds)
	}
	for round := 0; round < rounds; round++ {
		var channels []string
		for _, chs := range perShard {
			channels = append(channels, chs[round])
		}
		ps := cl.c.Subscribe(ctx, channels...)
		for _, ch := range channels {
			if n, err := cl.c.Publish(ctx, ch, "x").Result(); err != nil || n != 1 {
				t.Fatalf("round %d: PUBLISH %s right after Subscribe reached %d subscribers (%v), want 1", round, ch, n, err)
			}
		}
		ps.Close()
	}
}

// Messages a shard sent before an UNSUBSCRIBE reach the PubSub before its
// confirmation, as on one connection.
func TestPubSubMessagesBeforeUnsubscribe(t *testing.T) {
	cl := newCluster(t, 1, 1)
	a, b := cl.twoShardKeys(t)
	ps := cl.c.Subscribe(ctx, a, b)
	defer ps.Close()
	for range 2 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const n = 200
	for i := 0; i < n; i++ {
		cl.c.Publish(ctx, a, fmt.Sprint(i))
		cl.c.Publish(ctx, b, fmt.Sprint(i))
	}
	if err := ps.Unsubscribe(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	got := 0
	for unsubs := 0; unsubs < 2; {
		msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("after %d messages: %v", got, err)
		}
		switch msg := msg.(type) {
		case *redis.Message:
			if unsubs > 0 {
				t.Fatalf("message %q after an unsubscribe confirmation", msg.Payload)
			}
			got++
		case *redis.Subscription:
			unsubs++
		}
	}
	if got != 2*n {
		t.Fatalf("%d messages before the unsubscribe confirmations, want %d", got, 2*n)
	}
}

// A channel subscribed while its shard's link is already failing (the
// PubSub was told of the failure) is confirmed late, when the shard is
// back, without holding up the replies that follow it: a confirmation of
// a shard that is up and a PING answer arrive meanwhile.
func TestPubSubSubscribeWhileShardFailing(t *testing.T) {
	cl := newCluster(t, 1, 1)
	up := cl.keysOn(t, "shard-0", "up", 1)[0]
	downs := cl.keysOn(t, "shard-1", "down", 2)
	down := cl.mini["shard-1"]
	down.Close()
	ps := cl.c.Subscribe(ctx, downs[0])
	defer ps.Close()
	if _, err := ps.ReceiveTimeout(ctx, 10*time.Second); err == nil || !strings.Contains(err.Error(), "shard-1") {
		t.Fatalf("first Receive: %v, want shard-1's failure", err)
	}
	if err := ps.Subscribe(ctx, downs[1]); err != nil {
		t.Fatal(err)
	}
	if err := ps.Subscribe(ctx, up); err != nil {
		t.Fatal(err)
	}
	if err := ps.Ping(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		switch {
		case err != nil && strings.Contains(err.Error(), "shard-1"):
			continue // its reconnect attempts
		case err != nil:
			t.Fatalf("after %v: %v (a confirmation on the failing shard holds up the replies)", got, err)
		}
		switch msg := msg.(type) {
		case *redis.Subscription:
			got = append(got, msg.Channel)
		case *redis.Pong:
			got = append(got, "pong "+msg.Payload)
		default:
			t.Fatalf("got %#v", msg)
		}
	}
	if want := []string{up, "pong after"}; !slices.Equal(got, want) {
		t.Fatalf("replies while shard-1 is down: %v, want %v", got, want)
	}
	if err := down.Restart(); err != nil {
		t.Fatal(err)
	}
	late := map[string]bool{}
	for len(late) < 2 {
		msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		if err != nil && strings.Contains(err.Error(), "shard-1") {
			continue
		}
		if err != nil {
			t.Fatalf("late confirmations %v: %v", late, err)
		}
		sub, ok := msg.(*redis.Subscription)
		if !ok || sub.Kind != "subscribe" {
			t.Fatalf("got %#v, want the late confirmations", msg)
		}
		late[sub.Channel] = true
	}
	if !late[downs[0]] || !late[downs[1]] {
		t.Fatalf("late confirmations %v, want %v", late, downs)
	}
}

// silencer is a TCP proxy in front of a server whose silence makes the
// connections that subscribed half-open: what either side sends on them is
// dropped, as after a partition or a NAT that forgot them, while other and
// new connections (the heartbeat's, a reconnect) go through.
type silencer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[*silencedConn]bool
	wg     sync.WaitGroup
	all    atomic.Bool // every connection goes silent once it subscribes
}

type silencedConn struct {
	client, server net.Conn
	subscribed     atomic.Bool // it carried a (P|S)SUBSCRIBE
	silent         atomic.Bool
}

func newSilencer(t *testing.T, target string) *silencer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silencer{ln: ln, target: target, conns: map[*silencedConn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *silencer) accept() {
	defer s.wg.Done()
	for {
		client, err := s.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", s.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &silencedConn{client: client, server: server}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(2)
		go s.pipe(c, client, server, true)
		go s.pipe(c, server, client, false)
	}
}

// pipe copies from src to dst until either closes, dropping what a
// silent connection carries.
func (s *silencer) pipe(c *silencedConn, src, dst net.Conn, fromClient bool) {
	defer s.wg.Done()
	defer c.client.Close()
	defer c.server.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if fromClient && bytes.Contains(bytes.ToLower(buf[:n]), []byte("subscribe")) {
			c.subscribed.Store(true)
			if s.all.Load() {
				c.silent.Store(true)
			}
		}
		if c.silent.Load() {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// silence makes every connection that subscribed so far half-open.
func (s *silencer) silence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.subscribed.Load() {
			c.silent.Store(true)
		}
	}
}

func (s *silencer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.client.Close()
		c.server.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// A subscriber connection that goes half-open while its shard is fine
// (the heartbeat's connection still answers, so nothing marks the shard
// down): the link's probe PING goes unanswered, Receive reports the
// shard's failure, the link subscribes again on a new connection, and
// messages published afterwards on both shards arrive, each once. On RESP2
// and RESP3 shards.
func TestPubSubProbeHalfOpenLink(t *testing.T) {
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) {
			minis := []*miniredis.Miniredis{miniredis.RunT(t), miniredis.RunT(t)}
			proxy := newSilencer(t, minis[1].Addr())
			c, err := redshard.NewClient(&redshard.Options{
				Shards: []redshard.Shard{
					{Name: "shard-0", Addr: minis[0].Addr()},
					{Name: "shard-1", Addr: proxy.ln.Addr().String()},
				},
				ShardOptions: &redis.Options{Protocol: protocol},
				Health:       &redshard.HealthOptions{Interval: 50 * time.Millisecond, Timeout: 100 * time.Millisecond},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			keys := conformance.KeyPerShard(c.ShardFor, "ho", "shard-0", "shard-1")
			a, b := keys[0], keys[1] // channels of shard-0 and shard-1
			ps := c.Subscribe(ctx, a, b)
			defer ps.Close()
			for range 2 {
				if _, err := ps.Receive(ctx); err != nil {
					t.Fatal(err)
				}
			}
			proxy.silence()
			if _, err := ps.ReceiveTimeout(ctx, 10*time.Second); err == nil || !strings.Contains(err.Error(), "shard-1") {
				t.Fatalf("Receive after shard-1's subscriber connection went silent: %v, want shard-1's failure", err)
			}
			// Resubscribed once a message published on shard-1 arrives.
			deadline := time.Now().Add(10 * time.Second)
			for back := false; !back; {
				if time.Now().After(deadline) {
					t.Fatal("no message of shard-1 arrived after the failure")
				}
				if err := c.Publish(ctx, b, "marker").Err(); err != nil {
					t.Fatal(err)
				}
				msg, err := ps.ReceiveTimeout(ctx, 200*time.Millisecond)
				var ne net.Error
				switch {
				case err == nil:
					m, ok := msg.(*redis.Message)
					back = ok && m.Channel == b
				case errors.As(err, &ne) && ne.Timeout(), strings.Contains(err.Error(), "shard-1"):
				default:
					t.Fatal(err)
				}
			}
			const n = 20
			for i := range n {
				for _, ch := range []string{a, b} {
					if err := c.Publish(ctx, ch, fmt.Sprint(i)).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, ch := range []string{a, b} {
				c.Publish(ctx, ch, "end")
			}
			got := map[string]map[string]int{a: {}, b: {}}
			for got[a]["end"] == 0 || got[b]["end"] == 0 {
				msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
				if err != nil {
					t.Fatalf("after the reconnect, with %v: %v", got, err)
				}
				if m, ok := msg.(*redis.Message); ok && m.Payload != "marker" {
					got[m.Channel][m.Payload]++
				}
			}
			for _, ch := range []string{a, b} {
				if len(got[ch]) != n+1 {
					t.Errorf("%s: %d distinct messages after the reconnect, want %d", ch, len(got[ch]), n+1)
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

// A shard marked down by the heartbeat and up again leaves its Pub/Sub
// links alone: the link watches its own connection (a dead server fails
// its reads, a frozen one its probe), while the heartbeat's verdict can
// come after the link has already resubscribed on a restarted server, or
// be wrong on a loaded machine. Cut by markDown, the link reported a
// failure and lost what was published while it resubscribed
// (TestPubSubShardKilled's flake): here the first thing Receive returns
// after the mark is a message, not the shard's failure.
func TestPubSubShardMarkedDown(t *testing.T) {
	cl := newCluster(t, 1, 1)
	_, ch := cl.twoShardKeys(t) // on shard-1
	ps := cl.c.Subscribe(ctx, ch)
	defer ps.Close()
	if err := ps.PSubscribe(ctx, "b:*"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		if err := cl.c.MarkShardDown("shard-1"); err != nil {
			t.Fatal(err)
		}
		if err := cl.c.MarkShardUp("shard-1"); err != nil {
			t.Fatal(err)
		}
		payload := fmt.Sprint("after-mark-", round)
		if err := cl.c.Publish(ctx, ch, payload).Err(); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{} // by subscription: the channel's, the pattern's
		for len(got) < 2 {
			msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
			if err != nil {
				t.Fatalf("round %d: Receive after the shard was marked down and up: %v, want the messages published after", round, err)
			}
			m, ok := msg.(*redis.Message)
			if !ok || m.Payload != payload {
				t.Fatalf("round %d: got %#v, want a message %q", round, msg, payload)
			}
			if got[m.Pattern]++; got[m.Pattern] > 1 {
				t.Fatalf("round %d: %q delivered twice by subscription %q", round, payload, m.Pattern)
			}
		}
	}
}

// SetShards returns once the channels whose owner changed are subscribed
// on their new owner: a PUBLISH right after it, one per moved channel,
// reaches the subscriber, as when the shard is added and when it is
// removed again (after the first change was released, the old owners no
// longer carry those channels).
func TestPubSubPublishRightAfterSetShards(t *testing.T) {
	cl := newCluster(t, 1, 1)
	base := slices.Clone(cl.shards)
	grown := cl.addShard(t, "shard-2", 1)
	next := ringWith(t, grown)
	var moving []string
	for i := 0; len(moving) < 5; i++ {
		if ch := fmt.Sprint("ch:", i); next.Lookup(ch) == "shard-2" {
			moving = append(moving, ch)
		}
	}
	ps := cl.c.Subscribe(ctx, moving...)
	defer ps.Close()
	for range moving {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for round, shards := range [][]redshard.Shard{grown, base} {
		if err := cl.c.SetShards(ctx, shards); err != nil {
			t.Fatal(err)
		}
		payload := fmt.Sprint("round-", round)
		for _, ch := range moving {
			if n, err := cl.c.Publish(ctx, ch, payload).Result(); err != nil || n != 1 {
				owner, _ := cl.c.ShardFor(ch)
				t.Fatalf("round %d: PUBLISH %s (now on %s) right after SetShards reached %d subscribers (%v), want 1", round, ch, owner, n, err)
			}
		}
		got := map[string]bool{}
		for len(got) < len(moving) {
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if msg.Payload != payload || got[msg.Channel] {
				t.Fatalf("round %d: got %s %q, want %q once per channel", round, msg.Channel, msg.Payload, payload)
			}
			got[msg.Channel] = true
		}
		if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// In a fleet, a process acknowledges a phase only once its PubSubs are
// subscribed on every ring of it: as soon as a subscriber has acknowledged
// Prepare (after which Migrate may be published, whose processes publish
// on the next ring), a PUBLISH on the moved channel's next owner reaches
// it. Rounds change the shard count up and down.
func TestFleetPubSubSubscribedBeforeAck(t *testing.T) {
	f := newFleet(t, 2)
	f.apply(t, ctx, f.doc(1))
	c := f.client(t, f.openSteady(t), "sub")
	moving, _ := keyMoving(t, f, 1)
	ps := c.Subscribe(ctx, moving)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	for round, n := range []int{2, 1, 2} {
		cur, err := f.reg.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		prep := cur.Begin(f.doc(n), fmt.Sprint("pubsub-", round), "test")
		if err := f.reg.Publish(ctx, cur, prep); err != nil {
			t.Fatal(err)
		}
		waitVersion(t, c, prep.Version())
		owner := f.mini[n-1] // moving is on s1 with two shards, s0 with one
		if got := owner.Publish(moving, "x"); got != 1 {
			t.Fatalf("round %d: PUBLISH on the next owner right after the subscriber acknowledged Prepare reached %d, want 1", round, got)
		}
		if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "x" {
			t.Fatalf("round %d: %v, %v", round, msg, err)
		}
		for cfg := prep; cfg.InFlight(); { // migrate, commit, stable: no data to move
			next, err := cfg.Advance()
			if err != nil {
				t.Fatal(err)
			}
			if err := f.reg.Publish(ctx, cfg, next); err != nil {
				t.Fatal(err)
			}
			waitVersion(t, c, next.Version())
			cfg = next
		}
	}
}

// SetShards onto a shard that takes the SUBSCRIBE of a moved channel and
// never answers (nothing has noticed yet: the heartbeat is off, the
// probe takes 3s+3s) returns after a bounded wait, and the PubSub's
// Receive says that the shard has not confirmed what it takes over.
func TestPubSubSetShardsToSilentShard(t *testing.T) {
	old, neu := miniredis.RunT(t), miniredis.RunT(t)
	proxy := newSilencer(t, neu.Addr())
	proxy.all.Store(true)
	shards := []redshard.Shard{{Name: "shard-0", Addr: old.Addr()}, {Name: "shard-1", Addr: proxy.ln.Addr().String()}}
	c, err := redshard.NewClient(&redshard.Options{Shards: shards[:1], Health: &redshard.HealthOptions{Disable: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next := ringWith(t, shards)
	var ch string
	for i := 0; ch == ""; i++ {
		if k := fmt.Sprint("silent:", i); next.Lookup(k) == "shard-1" {
			ch = k
		}
	}
	ps := c.Subscribe(ctx, ch)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.SetShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	_, err = ps.ReceiveTimeout(ctx, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "shard-1 has not confirmed") {
		t.Fatalf("Receive after SetShards onto a silent shard: %v, want shard-1 reported as not confirming", err)
	}
}

// TestPubSubPublishRightAfterTheSwitch: a message published by the client
// the moment SetShards has switched the ring, before SetShards returns,
// reaches a subscriber of a channel whose owner changed. The PubSubs
// follow the new ring before the switch; when they followed only after it
// (Hub.Follow after the switch), that PUBLISH went to the new owner before
// the subscription had, and was lost (go-redis's "should ReceiveMessage
// without a subscription" hung on it under churn).
func TestPubSubPublishRightAfterTheSwitch(t *testing.T) {
	cl := newCluster(t, 1, 1)
	before := cl.c.Ring()
	after := ringWith(t, cl.shards[:1])
	ch := ""
	for i := 0; ch == ""; i++ {
		if name := fmt.Sprint("moving:", i); before.Lookup(name) != after.Lookup(name) {
			ch = name
		}
	}
	ps := cl.c.Subscribe(ctx, ch)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	published := make(chan error, 1)
	redshard.SetSwitchHook(func() { published <- cl.c.Publish(ctx, ch, "right after").Err() })
	defer redshard.SetSwitchHook(nil)
	if err := cl.c.SetShards(ctx, cl.shards[:1]); err != nil {
		t.Fatal(err)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("the message published right after the switch was not received: %v", err)
	}
	if m, ok := msg.(*redis.Message); !ok || m.Channel != ch || m.Payload != "right after" {
		t.Fatalf("received %#v; want the message on %s", msg, ch)
	}
}
