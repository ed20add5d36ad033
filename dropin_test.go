package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// A server's error that comes back through a split, a fan-out or a
// pipeline is still a redis.Error, with the server's prefix first and the
// shard named after it.
func TestShardErrorKeepsRedisErrorType(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 1, 1)
	a, b := cl.twoShardKeys(t)
	bad := cl.mini["shard-1"]

	cases := []struct {
		name string
		run  func() error
	}{
		{"MGET split", func() error { return cl.c.MGet(ctx, a, b).Err() }},
		{"MSET split", func() error { return cl.c.MSet(ctx, a, 1, b, 2).Err() }},
		{"DEL split", func() error { return cl.c.Del(ctx, a, b).Err() }},
		{"EXISTS split", func() error { return cl.c.Exists(ctx, a, b).Err() }},
		{"FLUSHDB fan-out", func() error { return cl.c.FlushDB(ctx).Err() }},
		{"DBSIZE fan-out", func() error { return cl.c.DBSize(ctx).Err() }},
		{"KEYS fan-out", func() error { return cl.c.Keys(ctx, "*").Err() }},
		{"SCAN", func() error {
			_, cur, err := cl.c.Scan(ctx, 0, "", 10).Result()
			for err == nil && cur != 0 {
				_, cur, err = cl.c.Scan(ctx, cur, "", 10).Result()
			}
			return err
		}},
		{"Do MGET split", func() error { return cl.c.Do(ctx, "mget", a, b).Err() }},
		{"pipeline split", func() error {
			var mget *redis.SliceCmd
			_, _ = cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
				mget = p.MGet(ctx, a, b)
				return nil
			})
			return mget.Err()
		}},
		{"pipeline direct", func() error {
			var get *redis.StringCmd
			_, _ = cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
				get = p.Get(ctx, b)
				return nil
			})
			return get.Err()
		}},
	}
	bad.SetError("WRONGTYPE Operation against a key holding the wrong kind of value")
	defer bad.SetError("")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "WRONGTYPE ") {
				t.Errorf("error %q does not start with the server's prefix", err)
			}
			if _, ok := err.(redis.Error); !ok {
				t.Errorf("err.(redis.Error) fails for %T %q", err, err)
			}
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				t.Errorf("errors.As(redis.Error) fails for %q", err)
			}
			if !redis.HasErrorPrefix(err, "WRONGTYPE") {
				t.Errorf("redis.HasErrorPrefix fails for %q", err)
			}
			if strings.Contains(tc.name, "split") || strings.Contains(tc.name, "fan-out") || tc.name == "SCAN" {
				if !strings.Contains(err.Error(), "shard-1") {
					t.Errorf("error %q does not name the shard", err)
				}
			}
		})
	}
}

// WithTimeout's client routes like the client: keyed commands, splits,
// pipelines and transactions reach the keys' owners.
func TestWithTimeoutRoutes(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 1, 1)
	a, b := cl.twoShardKeys(t)
	w := cl.c.WithTimeout(time.Minute)
	defer w.Close()

	if err := w.Set(ctx, a, "1", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := w.MSet(ctx, b, "2").Err(); err != nil {
		t.Fatalf("MSET: %v", err)
	}
	if got, err := w.MGet(ctx, a, b).Result(); err != nil || got[0] != "1" || got[1] != "2" {
		t.Fatalf("MGET = %v, %v", got, err)
	}
	var get *redis.StringCmd
	if _, err := w.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, a)
		get = p.Get(ctx, b)
		return nil
	}); err != nil || get.Val() != "2" {
		t.Fatalf("pipeline: %v, GET %v", err, get)
	}
	if _, err := w.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, a)
		return nil
	}); err != nil {
		t.Fatalf("transaction: %v", err)
	}
	// Shard hooks see each command once, also through the clone.
	var seen countHook
	cl.c.AddHook(&seen)
	if err := w.Get(ctx, a).Err(); err != nil || seen.n.Load() != 1 {
		t.Fatalf("GET: %v; the shard hook saw %d commands, want 1", err, seen.n.Load())
	}
	for k, want := range map[string]string{a: "3", b: "2"} {
		name, _ := cl.c.ShardFor(k)
		if got, _ := cl.mini[name].Get(k); got != want {
			t.Errorf("%s on its owner %s = %q, want %q", k, name, got, want)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("closing the WithTimeout client: %v", err)
	}
	if err := cl.c.Get(ctx, a).Err(); err != nil {
		t.Fatalf("the client after closing its WithTimeout client: %v", err)
	}
}

// WithTimeout's timeout reaches the shards: a command on a server that
// never answers fails with a timeout although the shard's own ReadTimeout
// is infinite.
func TestWithTimeoutAppliesTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() { // accepts, reads, never answers
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				_, _ = io.Copy(io.Discard, cn)
				cn.Close()
			})
		}
	})
	c, err := redshard.NewClient(&redshard.Options{
		Shards:       []redshard.Shard{{Name: "silent", Addr: ln.Addr().String()}},
		ShardOptions: &redis.Options{Protocol: 2, DisableIdentity: true, ReadTimeout: -1, MaxRetries: -1},
		Health:       &redshard.HealthOptions{Disable: true}, // the silent server would be marked down
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	done := make(chan error, 1)
	go func() { done <- c.WithTimeout(20*time.Millisecond).Get(context.Background(), "k").Err() }()
	select {
	case err := <-done:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("GET through WithTimeout: %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second): // a watchdog, not a measurement
		t.Fatal("GET through WithTimeout did not time out: the timeout did not reach the shard")
	}
}

// countHook counts the commands it sees.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// Raw PUBSUB NUMSUB answers as one server would: one (channel, count) pair
// per channel asked, in the order asked, each counted on its owner.
func TestRawPubSubNumSub(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 1, 1, 1, 1)
	var channels []string
	for i := range 4 {
		channels = append(channels, cl.keysOn(t, fmt.Sprintf("shard-%d", i), "ch", 1)[0])
	}
	ps := cl.c.Subscribe(ctx, channels[:3]...)
	defer ps.Close()
	for range 3 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	args := []interface{}{"pubsub", "numsub"}
	want := []interface{}{}
	for i, ch := range []string{channels[2], channels[0], channels[3], channels[1]} {
		args = append(args, ch)
		n := int64(1)
		if i == 2 {
			n = 0 // not subscribed
		}
		want = append(want, ch, n)
	}
	got, err := cl.c.Do(ctx, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Do PUBSUB NUMSUB = %#v, want %#v", got, want)
	}
}

// PUBSUB NUMPAT counts a pattern once, though redshard subscribes it on
// every shard: the typed method and Do agree with one server.
func TestPubSubNumPatCountsPatternsOnce(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 1, 1, 1, 1)
	ps := cl.c.PSubscribe(ctx, "news.*", "sport.*")
	defer ps.Close()
	for range 2 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := cl.c.PubSubNumPat(ctx).Result(); err != nil || n != 2 {
		t.Fatalf("PubSubNumPat = %d, %v; want 2", n, err)
	}
	if v, err := cl.c.Do(ctx, "pubsub", "numpat").Result(); err != nil || v != int64(2) {
		t.Fatalf("Do PUBSUB NUMPAT = %#v, %v; want int64(2)", v, err)
	}
}

// A SCAN cursor made before SetShards is refused after it, rather than
// scan a shard twice and the new one never; cursor 0 starts again.
func TestScanCursorBoundToShardList(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 1, 1)
	for i := range 50 {
		cl.c.Set(ctx, fmt.Sprintf("k:%d", i), i, 0)
	}
	_, cur, err := cl.c.Scan(ctx, 0, "", 5).Result()
	if err != nil || cur == 0 {
		t.Fatalf("first SCAN page: cursor %d, %v", cur, err)
	}
	if err := cl.c.SetShards(ctx, cl.addShard(t, "shard-new", 1)); err != nil {
		t.Fatal(err)
	}
	for _, do := range []func() error{
		func() error { return cl.c.Scan(ctx, cur, "", 5).Err() },
		func() error { return cl.c.Do(ctx, "scan", cur, "count", 5).Err() },
	} {
		if err := do(); !errors.Is(err, redshard.ErrStaleCursor) {
			t.Fatalf("SCAN with a cursor of the previous shard list: %v, want ErrStaleCursor", err)
		}
	}
	_, cur, err = cl.c.Scan(ctx, 0, "", 5).Result()
	if err != nil {
		t.Fatalf("SCAN from 0 after SetShards: %v", err)
	}
	if err := cl.c.Scan(ctx, cur, "", 5).Err(); err != nil {
		t.Fatalf("SCAN with a cursor of the current shard list: %v", err)
	}
}

// SORT with a BY or GET pattern that reads keys of any shard is refused
// with ErrCrossShard before anything is sent, in every path.
func TestSortPatternsCrossShard(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 1, 1)
	var sent countHook // heartbeats are not shown to shard hooks
	cl.c.AddHook(&sent)
	checks := map[string]error{
		"SORT BY":     cl.c.Sort(ctx, "list", &redis.Sort{By: "w_*"}).Err(),
		"SORT GET":    cl.c.Sort(ctx, "list", &redis.Sort{Get: []string{"#", "o_*->f"}}).Err(),
		"SORT_RO GET": cl.c.SortRO(ctx, "list", &redis.Sort{Get: []string{"o_*"}}).Err(),
		"SORT STORE":  cl.c.SortStore(ctx, "list", "dest", &redis.Sort{By: "w_*"}).Err(),
		"Do SORT":     cl.c.Do(ctx, "sort", "list", "by", "w_*").Err(),
	}
	_, err := cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Sort(ctx, "list", &redis.Sort{By: "w_*"})
		return nil
	})
	checks["pipeline"] = err
	_, err = cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Sort(ctx, "list", &redis.Sort{By: "w_*"})
		return nil
	})
	checks["transaction"] = err
	for name, err := range checks {
		if !errors.Is(err, redshard.ErrCrossShard) || !strings.Contains(err.Error(), "BY or GET pattern") {
			t.Errorf("%s: %v, want ErrCrossShard naming the pattern", name, err)
		}
	}
	if n := sent.n.Load(); n != 0 {
		t.Errorf("%d commands reached the shards", n)
	}
}

// fakeTracking answers CLIENT TRACKING OFF and CLIENT ID itself, so that
// redshard takes a miniredis for a server that tracks and opens every kind
// of connection it has.
type fakeTracking struct{}

func (fakeTracking) DialHook(next redis.DialHook) redis.DialHook { return next }

func (fakeTracking) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := fmt.Sprint(cmd.Args())
		switch c := cmd.(type) {
		case *redis.Cmd:
			if args == "[client tracking off]" {
				c.SetVal("OK")
				return nil
			}
		case *redis.IntCmd:
			if args == "[client id]" {
				c.SetVal(1)
				return nil
			}
		}
		return next(ctx, cmd)
	}
}

func (fakeTracking) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestNewFailoverShardClient: for a Sentinel shard, NewFailoverShardClient
// gets the shard's FailoverOptions, with each connection's settings applied,
// for every kind of connection redshard opens: commands, heartbeat, tracked
// reads and the invalidation subscriber. NewShardClient, whose options would
// have no address, is not called.
func TestNewFailoverShardClient(t *testing.T) {
	m := miniredis.RunT(t)
	sentinels := []string{"sentinel-1.invalid:26379", "sentinel-2.invalid:26379"}
	type call struct {
		fo   redis.FailoverOptions
		addr string
	}
	calls := make(chan call, 16)
	c, err := redshard.NewClient(&redshard.Options{
		Shards: []redshard.Shard{{Name: "s", Failover: &redis.FailoverOptions{
			MasterName: "mymaster", SentinelAddrs: sentinels,
		}}},
		Health:  &redshard.HealthOptions{Interval: 10 * time.Millisecond, Timeout: time.Second},
		HotKeys: &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, Detector: hotFrozenDetector()},
		NewShardClient: func(s redshard.Shard, opt *redis.Options) *redis.Client {
			t.Errorf("NewShardClient called for Sentinel shard %v (opt.Addr %q)", s, opt.Addr)
			return redis.NewClient(&redis.Options{Addr: m.Addr()})
		},
		NewFailoverShardClient: func(s redshard.Shard, fo *redis.FailoverOptions) *redis.Client {
			if s.Failover != fo {
				t.Errorf("s.Failover %p is not the options handed over (%p)", s.Failover, fo)
			}
			calls <- call{fo: *fo}
			cl := redis.NewClient(&redis.Options{ // the "master", from the prepared options
				Addr: m.Addr(), Protocol: fo.Protocol, PoolSize: fo.PoolSize, MaxRetries: fo.MaxRetries,
				ReadTimeout: fo.ReadTimeout, OnConnect: fo.OnConnect,
			})
			cl.AddHook(fakeTracking{})
			return cl
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()

	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var got []call
	heartbeat := func(c call) bool { return c.fo.PoolSize == 1 && c.fo.MaxRetries == -1 }
	for !slices.ContainsFunc(got, heartbeat) { // the monitor opens the heartbeat
		select {
		case c := <-calls:
			got = append(got, c)
		case <-time.After(10 * time.Second): // a watchdog, not a measurement
			t.Fatalf("no heartbeat client among NewFailoverShardClient calls %+v", got)
		}
	}
	hotWarm(t, c, "k")
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" { // the first hot read opens the tracking clients
		t.Fatalf("GET = %q, %v", v, err)
	}
	for len(calls) > 0 {
		got = append(got, <-calls)
	}
	subscriber := func(c call) bool { return c.fo.Protocol == 2 && c.fo.OnConnect != nil }
	if len(got) != 4 || !slices.ContainsFunc(got, subscriber) {
		t.Fatalf("NewFailoverShardClient calls %+v; want 4: commands, heartbeat, tracked reads, subscriber", got)
	}
	for _, c := range got {
		if c.fo.MasterName != "mymaster" || !slices.Equal(c.fo.SentinelAddrs, sentinels) {
			t.Errorf("NewFailoverShardClient got Failover %q %q; want mymaster %q", c.fo.MasterName, c.fo.SentinelAddrs, sentinels)
		}
	}
}

// TestNewShardClientNotForSentinel: a NewShardClient hook written for
// addressed shards (redis.NewClient(opt)) is never handed a Sentinel
// shard's address-less options, which would reach localhost:6379: the
// shard's clients are redis.NewFailoverClient's.
func TestNewShardClientNotForSentinel(t *testing.T) {
	m := miniredis.RunT(t)
	var mu sync.Mutex
	var built []string // the Addr of each client NewShardClient built
	c, err := redshard.NewClient(&redshard.Options{
		Shards: []redshard.Shard{
			{Name: "plain", Addr: m.Addr()},
			{Name: "sentinel", Failover: &redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"127.0.0.1:1"}}},
		},
		Health: &redshard.HealthOptions{Disable: true},
		NewShardClient: func(s redshard.Shard, opt *redis.Options) *redis.Client {
			mu.Lock()
			built = append(built, opt.Addr)
			mu.Unlock()
			return redis.NewClient(opt)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(built, []string{m.Addr()}) {
		t.Errorf("NewShardClient built clients for %q; want only the plain shard's %q", built, m.Addr())
	}
}

// On RESP3 shards a hot key's replies from the local cache have the Go
// types the owner's have (doubles, maps). miniredis does not track, so this
// is the staleness-only path; integration_test checks tracked reads and
// split copies (miniredis cannot DUMP sorted sets or hashes).
func TestHotCacheRepliesRESP3(t *testing.T) {
	ctx := context.Background()
	hc := newHotCluster(t, 3, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour}, func(o *redshard.Options) {
		o.ShardOptions = &redis.Options{Protocol: 3}
	})
	c := hc.c
	c.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: "m"})
	c.HSet(ctx, "h", "f", "v")
	reads := map[string]func() any{
		"Do ZSCORE":            func() any { return c.Do(ctx, "zscore", "z", "m").Val() },
		"Do ZRANGE WITHSCORES": func() any { return c.Do(ctx, "zrange", "z", 0, -1, "withscores").Val() },
		"Do HGETALL":           func() any { return c.Do(ctx, "hgetall", "h").Val() },
	}
	cold := map[string]any{}
	for name, read := range reads {
		cold[name] = read()
	}
	if _, ok := cold["Do ZSCORE"].(float64); !ok {
		t.Fatalf("cold Do ZSCORE = %T, want float64 (RESP3)", cold["Do ZSCORE"])
	}
	hotWarm(t, c, "z", "h")
	for name, read := range reads {
		for range 5 {
			if got := read(); !reflect.DeepEqual(got, cold[name]) {
				t.Fatalf("%s hot = %T %#v, want %T %#v", name, got, got, cold[name], cold[name])
			}
		}
	}
	if st := c.Stats().Hot; st.CacheHits == 0 {
		t.Fatalf("no hot read was served from the cache: %+v", st)
	}
}

// CLIENT SETNAME then GETNAME in a pipeline names the connection of every
// shard and reads the name back, as on one server.
func TestClientSetNameGetNamePipeline(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 1, 1, 1)
	p := cl.c.Pipeline()
	set := p.ClientSetName(ctx, "worker-7")
	get := p.ClientGetName(ctx)
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if !set.Val() || get.Val() != "worker-7" {
		t.Fatalf("SETNAME %v, %v; GETNAME %q, %v", set.Val(), set.Err(), get.Val(), get.Err())
	}
}
