package integration_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/redistest"
)

// hotClientWith is hotClient with shard options.
func hotClientWith(t *testing.T, n int, hk redshard.HotKeyOptions, so *redis.Options) *redshard.Client {
	t.Helper()
	t0 := time.Unix(1_700_000_000, 0)
	hk.Detector = &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: func() time.Time { return t0 }}
	var shards []redshard.Shard
	for i := 0; i < n; i++ {
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: redistest.Start(t).Addr()})
	}
	c, err := redshard.NewClient(&redshard.Options{Shards: shards, HotKeys: &hk, ShardOptions: so})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestHotReplyTypesMatchCold: a hot key's reply, from the local cache
// (tracked reads) or a split copy, has the Go type and shape of the reply
// the owner gives when the key is cold, on RESP3 and RESP2, through the
// typed methods and through Do.
func TestHotReplyTypesMatchCold(t *testing.T) {
	ctx := context.Background()
	for _, protocol := range []int{3, 2} {
		for _, m := range []redshard.Mitigation{redshard.LocalCache, redshard.SplitCopies} {
			t.Run(fmt.Sprintf("%v/RESP%d", m, protocol), func(t *testing.T) {
				hk := redshard.HotKeyOptions{Mitigation: m, MaxStaleness: time.Hour}
				if m == redshard.SplitCopies {
					hk.Copies = 3
				}
				c := hotClientWith(t, 3, hk, &redis.Options{Protocol: protocol})
				c.Set(ctx, "r:str", "v", 0)
				c.ZAdd(ctx, "r:zset", redis.Z{Score: 1.5, Member: "m"})
				c.HSet(ctx, "r:hash", "f", "v")
				c.SAdd(ctx, "r:set", "a")
				reads := []struct {
					name string
					key  string
					read func() any
				}{
					{"Do GET", "r:str", func() any { return c.Do(ctx, "get", "r:str").Val() }},
					{"Do ZSCORE", "r:zset", func() any { return c.Do(ctx, "zscore", "r:zset", "m").Val() }},
					{"Do ZRANGE WITHSCORES", "r:zset", func() any { return c.Do(ctx, "zrange", "r:zset", 0, -1, "withscores").Val() }},
					{"Do HGETALL", "r:hash", func() any { return c.Do(ctx, "hgetall", "r:hash").Val() }},
					{"Do SMEMBERS", "r:set", func() any { return c.Do(ctx, "smembers", "r:set").Val() }},
					{"GET", "r:str", func() any { return c.Get(ctx, "r:str").Val() }},
					{"ZSCORE", "r:zset", func() any { return c.ZScore(ctx, "r:zset", "m").Val() }},
					{"ZRANGE WITHSCORES", "r:zset", func() any { return c.ZRangeWithScores(ctx, "r:zset", 0, -1).Val() }},
					{"HGETALL", "r:hash", func() any { return c.HGetAll(ctx, "r:hash").Val() }},
					{"SMEMBERS", "r:set", func() any { return c.SMembers(ctx, "r:set").Val() }},
				}
				cold := make([]any, len(reads))
				for i, r := range reads {
					cold[i] = r.read()
				}
				if protocol == 3 {
					if _, ok := cold[1].(float64); !ok {
						t.Fatalf("cold Do ZSCORE on RESP3 = %T %v, want float64", cold[1], cold[1])
					}
				}
				warm(t, c, "r:str", "r:zset", "r:hash", "r:set")
				before := c.Stats().Hot
				for i, r := range reads {
					eventually(t, r.name+" served hot", func() bool {
						st := c.Stats().Hot
						for n := 0; n < 20; n++ {
							if got := r.read(); !reflect.DeepEqual(got, cold[i]) {
								t.Fatalf("%s hot = %T %#v, cold = %T %#v", r.name, got, got, cold[i], cold[i])
							}
						}
						now := c.Stats().Hot
						return now.CacheHits > st.CacheHits || now.SplitReads > st.SplitReads
					})
				}
				if m == redshard.SplitCopies {
					// Copies that vanish (evicted, say) are noticed whatever
					// the reply's shape: the owner answers.
					for _, sh := range c.Shards() {
						cl, _ := c.ShardClient(sh.Name)
						for _, k := range cl.Keys(ctx, redshard.SplitCopyPrefix+"*").Val() {
							cl.Del(ctx, k)
						}
					}
					for i, r := range reads {
						for n := 0; n < 20; n++ {
							if got := r.read(); !reflect.DeepEqual(got, cold[i]) {
								t.Fatalf("%s with its copies gone = %T %#v, want %T %#v", r.name, got, got, cold[i], cold[i])
							}
						}
					}
				}
				after := c.Stats().Hot
				if after.CacheHits == before.CacheHits && after.SplitReads == before.SplitReads {
					t.Fatal("no hot read was served from the cache or a copy")
				}
				if m == redshard.LocalCache && !slices.ContainsFunc(after.Shards, func(s redshard.HotShardStats) bool {
					return s.Invalidation == redshard.InvalidationTracking
				}) {
					t.Fatalf("no shard tracks: %+v", after.Shards)
				}
			})
		}
	}
}

// TestRawPubSubNumSubLikeOneServer: Do PUBSUB NUMSUB and SHARDNUMSUB through
// redshard on four shards reply exactly as one server with the same
// subscriptions, on RESP3 and RESP2.
func TestRawPubSubNumSubLikeOneServer(t *testing.T) {
	ctx := context.Background()
	for _, protocol := range []int{3, 2} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) {
			opt := &redis.Options{Protocol: protocol}
			srv := redistest.Start(t)
			single := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: protocol})
			defer single.Close()
			var shards []redshard.Shard
			for i := range 4 {
				shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: redistest.Start(t).Addr()})
			}
			c, err := redshard.NewClient(&redshard.Options{Shards: shards, ShardOptions: opt})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()

			channels := []string{"news", "sport", "weather", "tv", "idle"}
			subscribe := func(ps *redis.PubSub) {
				t.Helper()
				if _, err := ps.Receive(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, ch := range channels[:4] {
				for _, cl := range []redis.UniversalClient{single, c} {
					ps := cl.Subscribe(ctx, ch)
					defer ps.Close()
					subscribe(ps)
					sps := cl.SSubscribe(ctx, ch)
					defer sps.Close()
					subscribe(sps)
				}
			}
			for _, sub := range []string{"numsub", "shardnumsub"} {
				args := []interface{}{"pubsub", sub, "weather", "idle", "news", "tv", "sport"}
				want, err := single.Do(ctx, args...).Result()
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.Do(ctx, args...).Result()
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Do PUBSUB %s:\n  redshard: %#v\n  one server: %#v", sub, got, want)
				}
			}
		})
	}
}

// TestSortPatterns: on a one-shard ring SORT with BY and GET patterns
// works as on one server (every key is on that shard); on four shards it is
// refused with ErrCrossShard unless its patterns carry the sorted key's
// hash tag, while BY nosort and GET # are plain keyed reads.
func TestSortPatterns(t *testing.T) {
	ctx := context.Background()
	load := func(c redis.UniversalClient, tag string) {
		t.Helper()
		for i, v := range []string{"b", "c", "a"} {
			c.RPush(ctx, "list"+tag, v)
			c.Set(ctx, "w_"+tag+"_"+v, 3-i, 0)
			c.HSet(ctx, "o_"+tag+"_"+v, "name", "N"+v)
		}
	}
	sorts := func(tag string) []*redis.Sort {
		return []*redis.Sort{
			{By: "w_" + tag + "_*"},
			{By: "nosort", Get: []string{"#"}},
			{Alpha: true, Get: []string{"#", "o_" + tag + "_*->name"}},
			{By: "w_" + tag + "_*", Get: []string{"o_" + tag + "_*->name"}},
		}
	}
	single := redistest.Start(t).Client(t)
	one, _ := startShards(t, 1)
	four, _ := startShards(t, 1, 1, 1, 1)
	for _, c := range []redis.UniversalClient{single, one, four} {
		load(c, "")
		load(c, "{t}")
	}
	for _, tag := range []string{"", "{t}"} {
		for _, s := range sorts(tag) {
			want, err := single.Sort(ctx, "list"+tag, s).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got, err := one.Sort(ctx, "list"+tag, s).Result(); err != nil || !slices.Equal(got, want) {
				t.Errorf("one shard: SORT %+v = %q, %v; want %q", s, got, err, want)
			}
			got, err := four.Sort(ctx, "list"+tag, s).Result()
			reads := tag == "" && (strings.Contains(s.By, "*") || len(s.Get) > 1)
			switch {
			case reads && !errors.Is(err, redshard.ErrCrossShard):
				t.Errorf("four shards: SORT %+v = %q, %v; want ErrCrossShard", s, got, err)
			case !reads && (err != nil || !slices.Equal(got, want)):
				t.Errorf("four shards: SORT %+v = %q, %v; want %q", s, got, err, want)
			}
		}
	}
}

// TestServerErrorsKeepTheirType: errors real servers give through a
// fan-out, a split and a pipeline are redis.Errors with the server's
// prefix first, and name the shard.
func TestServerErrorsKeepTheirType(t *testing.T) {
	ctx := context.Background()
	c, servers := startShards(t, 1, 1)
	full := servers[1].Client(t) // noeviction and no memory: writes fail with OOM
	if err := full.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := full.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer full.ConfigSet(ctx, "maxmemory", "0")
	var keys []string // one key per shard
	for i := 0; len(keys) < 2; i++ {
		k := fmt.Sprintf("k%d", i)
		if name, _ := c.ShardFor(k); name == fmt.Sprintf("shard-%d", len(keys)) {
			keys = append(keys, k)
		}
	}
	var piped *redis.StatusCmd
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		piped = p.MSet(ctx, keys[0], 1, keys[1], 2)
		return nil
	})
	oneServer := full.ConfigSet(ctx, "no-such-parameter", "1").Err()
	for name, tc := range map[string]struct {
		err    error
		prefix string
	}{
		"MSET split":      {c.MSet(ctx, keys[0], 1, keys[1], 2).Err(), "OOM "},
		"Do MSET split":   {c.Do(ctx, "mset", keys[0], 1, keys[1], 2).Err(), "OOM "},
		"pipelined split": {piped.Err(), "OOM "},
		// One shard fails: its error, naming it.
		"FUNCTION LOAD fan-out, one shard fails": {c.FunctionLoad(ctx, "#!lua name=errtype\nredis.register_function('f', function() return 1 end)").Err(), "OOM "},
	} {
		err := tc.err
		if _, ok := err.(redis.Error); !ok || !strings.HasPrefix(fmt.Sprint(err), tc.prefix) {
			t.Errorf("%s: %T %v; want a redis.Error starting %q", name, err, err, tc.prefix)
			continue
		}
		var rerr redis.Error
		if !errors.As(err, &rerr) || !strings.Contains(err.Error(), "(shard shard-") {
			t.Errorf("%s: %v does not name its shard", name, err)
		}
	}
	// Every shard gives the same error: it is one server's, as it is.
	err := c.ConfigSet(ctx, "no-such-parameter", "1").Err()
	if _, ok := err.(redis.Error); !ok || oneServer == nil || err.Error() != oneServer.Error() {
		t.Errorf("CONFIG SET fan-out, every shard fails: %T %v; want one server's %v", err, err, oneServer)
	}
}
