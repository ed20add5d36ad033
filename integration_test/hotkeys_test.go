package integration_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/redistest"
)

// hotClient starts n redis-servers and a client with hot-key options hk
// whose detector never lets time pass: a key turns hot after a handful of
// commands, when HotKeys refreshes the hot set.
func hotClient(t *testing.T, n int, hk redshard.HotKeyOptions) (*redshard.Client, map[string]*redistest.Server) {
	t.Helper()
	t0 := time.Unix(1_700_000_000, 0)
	hk.Detector = &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: func() time.Time { return t0 }}
	servers := map[string]*redistest.Server{}
	var shards []redshard.Shard
	for i := 0; i < n; i++ {
		s := redistest.Start(t)
		name := fmt.Sprintf("shard-%d", i)
		servers[name] = s
		shards = append(shards, redshard.Shard{Name: name, Addr: s.Addr()})
	}
	c, err := redshard.NewClient(&redshard.Options{Shards: shards, HotKeys: &hk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, servers
}

// warm reads keys until they are hot.
func warm(t *testing.T, c *redshard.Client, keys ...string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		for _, k := range keys {
			c.Type(ctx, k)
		}
	}
	hot := map[string]bool{}
	for _, k := range c.HotKeys() {
		hot[k.Key] = k.Hot
	}
	for _, k := range keys {
		if !hot[k] {
			t.Fatalf("%q not hot: %+v", k, c.HotKeys())
		}
	}
}

// eventually polls cond until it holds, failing the test after a
// generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hotShard returns the hot-key stats of the named shard.
func hotShard(c *redshard.Client, name string) redshard.HotShardStats {
	for _, s := range c.Stats().Hot.Shards {
		if s.Name == name {
			return s
		}
	}
	return redshard.HotShardStats{}
}

// subscriberID finds the client ID of the connection subscribed to the
// invalidation channel on a server (0 if none).
func subscriberID(t *testing.T, admin *redis.Client) int64 {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " sub=0 ") { // the subscriber has 2: invalidations and refill marks
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "id="); ok {
				id, _ := strconv.ParseInt(v, 10, 64)
				return id
			}
		}
	}
	return 0
}

// cachedAndTracked reads key until a read is answered from the local cache
// while the shard's invalidation connection is up.
func cachedAndTracked(t *testing.T, c *redshard.Client, shard, key, want string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, "a tracked, cached read of "+key, func() bool {
		if !hotShard(c, shard).Connected {
			c.Get(ctx, key) // the first hot read starts tracking
			return false
		}
		before := c.Stats().Hot.CacheHits
		got1, got2 := c.Get(ctx, key).Val(), c.Get(ctx, key).Val()
		if got1 != want || got2 != want {
			t.Fatalf("GET %s = %q, %q; want %q", key, got1, got2, want)
		}
		return c.Stats().Hot.CacheHits > before
	})
}

// TestHotKeysTrackingInvalidation: with MaxStaleness of an hour, another
// process's write is seen promptly through server-assisted invalidation
// alone; killing the invalidation connection drops the shard's cached
// replies and tracking comes back; FLUSHALL drops them too.
func TestHotKeysTrackingInvalidation(t *testing.T) {
	ctx := context.Background()
	c, servers := hotClient(t, 2, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour})
	const key = "celebrity"
	shard, _ := c.ShardFor(key)
	other := servers[shard].Client(t) // another process's client, and our admin
	if err := c.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	warm(t, c, key)
	cachedAndTracked(t, c, shard, key, "v1")
	if st := hotShard(c, shard); st.Invalidation != redshard.InvalidationTracking {
		t.Fatalf("shard %s tracking = %v, want %v", shard, st.Invalidation, redshard.InvalidationTracking)
	}

	// Another process writes: the invalidation, not MaxStaleness, makes the
	// new value visible.
	if err := other.Set(ctx, key, "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "another process's write to be seen", func() bool { return c.Get(ctx, key).Val() == "v2" })
	if n := hotShard(c, shard).Invalidations; n == 0 {
		t.Error("no invalidation message counted")
	}

	// Kill the invalidation connection: the shard's cached replies go, and
	// tracking comes back on a new connection.
	cachedAndTracked(t, c, shard, key, "v2")
	id := subscriberID(t, other)
	if id == 0 {
		t.Fatal("no subscribed connection on the shard")
	}
	lost := c.Stats().Hot.TrackingLost
	if err := other.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lost connection to be noticed", func() bool { return c.Stats().Hot.TrackingLost > lost })
	misses := c.Stats().Hot.CacheMisses
	if got := c.Get(ctx, key).Val(); got != "v2" {
		t.Fatalf("GET after the kill = %q", got)
	}
	if c.Stats().Hot.CacheMisses == misses {
		t.Error("the cached reply survived the loss of the invalidation connection")
	}
	cachedAndTracked(t, c, shard, key, "v2")
	if nid := subscriberID(t, other); nid == id || nid == 0 {
		t.Errorf("subscriber id after the kill = %d (was %d)", nid, id)
	}
	if err := other.Set(ctx, key, "v3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a write after the reconnection to be seen", func() bool { return c.Get(ctx, key).Val() == "v3" })

	// FLUSHALL sends an invalidation without keys: everything goes.
	cachedAndTracked(t, c, shard, key, "v3")
	if err := other.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "FLUSHALL to be seen", func() bool { return c.Get(ctx, key).Err() == redis.Nil })
}

// TestHotKeysSplitAllTypes: on real servers, copies of every data type
// answer reads correctly, a write through the client is never followed by a
// stale read, and copies expire once the key cools.
func TestHotKeysSplitAllTypes(t *testing.T) {
	ctx := context.Background()
	const staleness = 300 * time.Millisecond
	c, servers := hotClient(t, 3, redshard.HotKeyOptions{Mitigation: redshard.SplitCopies, Copies: 3, MaxStaleness: staleness})
	c.Set(ctx, "t:string", "s1", 0)
	c.HSet(ctx, "t:hash", "a", "1", "b", "2")
	c.RPush(ctx, "t:list", "x", "y")
	c.SAdd(ctx, "t:set", "m1", "m2")
	c.ZAdd(ctx, "t:zset", redis.Z{Score: 1, Member: "z1"}, redis.Z{Score: 2, Member: "z2"})
	types := []struct {
		key   string
		read  func() any
		want  any
		write func() error
		then  any
	}{
		{"t:string", func() any { return c.Get(ctx, "t:string").Val() }, "s1",
			func() error { return c.Set(ctx, "t:string", "s2", 0).Err() }, "s2"},
		{"t:hash", func() any { return c.HGetAll(ctx, "t:hash").Val() }, map[string]string{"a": "1", "b": "2"},
			func() error { return c.HSet(ctx, "t:hash", "c", "3").Err() }, map[string]string{"a": "1", "b": "2", "c": "3"}},
		{"t:list", func() any { return c.LRange(ctx, "t:list", 0, -1).Val() }, []string{"x", "y"},
			func() error { return c.RPush(ctx, "t:list", "z").Err() }, []string{"x", "y", "z"}},
		{"t:set", func() any { v := c.SMembers(ctx, "t:set").Val(); slices.Sort(v); return v }, []string{"m1", "m2"},
			func() error { return c.SRem(ctx, "t:set", "m1").Err() }, []string{"m2"}},
		{"t:zset", func() any { return c.ZRangeWithScores(ctx, "t:zset", 0, -1).Val() },
			[]redis.Z{{Score: 1, Member: "z1"}, {Score: 2, Member: "z2"}},
			func() error { return c.ZIncrBy(ctx, "t:zset", 5, "z1").Err() },
			[]redis.Z{{Score: 2, Member: "z2"}, {Score: 6, Member: "z1"}}},
	}
	var keys []string
	for _, tc := range types {
		keys = append(keys, tc.key)
	}
	warm(t, c, keys...)
	for _, tc := range types {
		for i := 0; i < 60; i++ {
			if got := tc.read(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s read %d = %v, want %v", tc.key, i, got, tc.want)
			}
		}
	}
	st := c.Stats().Hot
	if st.SplitReads == 0 || st.CopyFills < int64(2*len(types)) {
		t.Fatalf("split reads %d, fills %d: copies did not serve", st.SplitReads, st.CopyFills)
	}
	for _, tc := range types {
		if err := tc.write(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 60; i++ {
			if got := tc.read(); !reflect.DeepEqual(got, tc.then) {
				t.Fatalf("%s read %d after a write = %v, want %v", tc.key, i, got, tc.then)
			}
		}
	}
	if c.Stats().Hot.SplitReads <= st.SplitReads {
		t.Error("no read served by a copy after the writes")
	}

	// Cooling: nobody reads any more; the copies expire on their own.
	copies := func() []string {
		var out []string
		for name, s := range servers {
			cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
			ks, _ := cl.Keys(ctx, redshard.SplitCopyPrefix+"*").Result()
			cl.Close()
			for _, k := range ks {
				out = append(out, name+"/"+k)
			}
		}
		return out
	}
	if len(copies()) == 0 {
		t.Fatal("no copies on the servers before cooling")
	}
	eventually(t, "the copies to expire", func() bool { return len(copies()) == 0 })
}

// trackingHook records whether it saw a tracked read: a pipeline that
// starts with CLIENT TRACKING ON.
type trackingHook struct{ tracked atomic.Int64 }

func (h *trackingHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *trackingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *trackingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && strings.HasPrefix(strings.ToLower(fmt.Sprint(cmds[0].Args())), "[client tracking on") {
			h.tracked.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestAddHookSeesTrackedReads: a hook added with AddHook, before or after
// tracking started, sees the tracked reads that the hot-key layer sends on
// its own connections.
func TestAddHookSeesTrackedReads(t *testing.T) {
	ctx := context.Background()
	c, _ := hotClient(t, 1, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour})
	before := &trackingHook{}
	c.AddHook(before)
	c.Set(ctx, "celebrity", "v", 0)
	warm(t, c, "celebrity")
	cachedAndTracked(t, c, "shard-0", "celebrity", "v")
	after := &trackingHook{}
	c.AddHook(after)
	c.Set(ctx, "celebrity", "w", 0) // invalidates: the next read is tracked again
	cachedAndTracked(t, c, "shard-0", "celebrity", "w")
	if before.tracked.Load() == 0 || after.tracked.Load() == 0 {
		t.Fatalf("tracked reads seen: hook added before %d, after %d", before.tracked.Load(), after.tracked.Load())
	}
}
