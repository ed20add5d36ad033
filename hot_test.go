package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
)

// hotFrozenDetector turns a key hot after a handful of commands, and only when
// HotKeys (or Stats) refreshes the hot set: its clock never moves, so
// nothing decays and nothing happens behind the test's back.
func hotFrozenDetector() *hotkey.Config {
	t0 := time.Unix(1_700_000_000, 0)
	return &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: func() time.Time { return t0 }}
}

// hotCluster is a cluster of miniredis shards with a hot-key client.
type hotCluster struct {
	*cluster
	opt redshard.HotKeyOptions
}

// newHotCluster starts n miniredis shards and a client with hot-key
// options hk (Detector defaults to hotFrozenDetector); edit may change the
// client's options further.
func newHotCluster(t testing.TB, n int, hk redshard.HotKeyOptions, edit func(*redshard.Options)) *hotCluster {
	t.Helper()
	cl := &cluster{mini: map[string]*miniredis.Miniredis{}}
	for i := 0; i < n; i++ {
		m := miniredis.RunT(t)
		name := fmt.Sprintf("shard-%d", i)
		cl.mini[name] = m
		cl.shards = append(cl.shards, redshard.Shard{Name: name, Addr: m.Addr()})
	}
	if hk.Detector == nil {
		hk.Detector = hotFrozenDetector()
	}
	opt := &redshard.Options{Shards: cl.shards, HotKeys: &hk}
	if edit != nil {
		edit(opt)
	}
	c, err := redshard.NewClient(opt)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cl.c = c
	return &hotCluster{cluster: cl, opt: hk}
}

// hotWarm sends enough reads of keys to make them hot with hotFrozenDetector
// (each key must get 5% of the traffic) and checks that they are.
func hotWarm(t testing.TB, c *redshard.Client, keys ...string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		for _, k := range keys {
			_ = c.Type(ctx, k).Err()
		}
	}
	hot := map[string]bool{}
	for _, k := range c.HotKeys() {
		hot[k.Key] = k.Hot
	}
	for _, k := range keys {
		if !hot[k] {
			t.Fatalf("key %q is not hot after 20 reads: %+v", k, c.HotKeys())
		}
	}
}

// owner returns the miniredis that owns key.
func (hc *hotCluster) owner(key string) *miniredis.Miniredis {
	name, _ := hc.c.ShardFor(key)
	return hc.mini[name]
}

func TestHotKeysBadOptions(t *testing.T) {
	m := miniredis.RunT(t)
	shards := []redshard.Shard{{Name: "a", Addr: m.Addr()}}
	for _, tc := range []struct {
		name string
		opt  redshard.HotKeyOptions
	}{
		{"no mitigation", redshard.HotKeyOptions{}},
		{"unknown mitigation", redshard.HotKeyOptions{Mitigation: 7}},
		{"copies above shards", redshard.HotKeyOptions{Mitigation: redshard.SplitCopies, Copies: 2}},
		{"negative copies", redshard.HotKeyOptions{Mitigation: redshard.SplitCopies, Copies: -1}},
		{"negative staleness", redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: -time.Second}},
		{"negative cache bytes", redshard.HotKeyOptions{Mitigation: redshard.LocalCache, CacheBytes: -1}},
		{"unknown tracking", redshard.HotKeyOptions{Mitigation: redshard.LocalCache, Tracking: 9}},
		{"bad detector", redshard.HotKeyOptions{Mitigation: redshard.LocalCache, Detector: &hotkey.Config{MinShare: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redshard.NewClient(&redshard.Options{Shards: shards, HotKeys: &tc.opt})
			if err == nil {
				c.Close()
				t.Fatal("NewClient accepted the options")
			}
			if !errors.Is(err, redshard.ErrInvalidHotKeyOptions) {
				t.Fatalf("error %v does not wrap ErrInvalidHotKeyOptions", err)
			}
		})
	}
	c, err := redshard.NewClient(&redshard.Options{Shards: shards, HotKeys: &redshard.HotKeyOptions{Mitigation: redshard.SplitCopies}})
	if err != nil {
		t.Fatalf("Split with default Copies on one shard: %v", err)
	}
	c.Close()
}

func TestHotKeysLocalCacheServesLocally(t *testing.T) {
	hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour}, nil)
	c := hc.c
	const key = "celebrity"
	if err := c.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	hotWarm(t, c, key)
	// The first hot read probes tracking (refused by miniredis) and reads
	// the key; the next ones are answered locally.
	if got, err := c.Get(ctx, key).Result(); err != nil || got != "v1" {
		t.Fatalf("GET = %q, %v", got, err)
	}
	m := hc.owner(key)
	before := m.CommandCount()
	for i := 0; i < 100; i++ {
		if got, err := c.Get(ctx, key).Result(); err != nil || got != "v1" {
			t.Fatalf("GET = %q, %v", got, err)
		}
	}
	if d := m.CommandCount() - before; d != 0 {
		t.Errorf("owner served %d commands for 100 cached hot GETs, want 0", d)
	}
	st := c.Stats().Hot
	if st.Mitigation != redshard.LocalCache || st.CacheHits < 100 {
		t.Errorf("Stats.Hot = %+v, want LocalCache with >= 100 hits", st)
	}
	if len(st.Keys) == 0 || st.Keys[0].Key != key || st.Keys[0].Rate <= 0 {
		t.Errorf("Stats.Hot.Keys = %+v, want %q first", st.Keys, key)
	}
	name, _ := c.ShardFor(key)
	for _, s := range st.Shards {
		want := redshard.InvalidationUnprobed
		if s.Name == name {
			want = redshard.InvalidationStalenessOnly
		}
		if s.Invalidation != want {
			t.Errorf("shard %s: tracking %v, want %v", s.Name, s.Invalidation, want)
		}
	}
}

// TestHotKeysLocalCacheReplies checks that every kind of cached reply is
// the shard's reply, that a read with other arguments gets its own reply,
// and that a caller modifying its reply does not modify the cache.
func TestHotKeysLocalCacheReplies(t *testing.T) {
	hc := newHotCluster(t, 3, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour}, nil)
	c := hc.c
	c.Set(ctx, "s", "hello world", 0)
	c.HSet(ctx, "h", "f1", "one", "f2", "two")
	c.RPush(ctx, "l", "a", "b", "c")
	c.SAdd(ctx, "set", "x", "y")
	c.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "m1"}, redis.Z{Score: 2, Member: "m2"})
	hotWarm(t, c, "s", "h", "l", "set", "z", "missing")

	reads := []struct {
		name, key string
		run       func(redis.Cmdable) redis.Cmder
	}{
		{"GET", "s", func(r redis.Cmdable) redis.Cmder { return r.Get(ctx, "s") }},
		{"GET missing", "missing", func(r redis.Cmdable) redis.Cmder { return r.Get(ctx, "missing") }},
		{"GETRANGE", "s", func(r redis.Cmdable) redis.Cmder { return r.GetRange(ctx, "s", 0, 4) }},
		{"GETRANGE other", "s", func(r redis.Cmdable) redis.Cmder { return r.GetRange(ctx, "s", 6, -1) }},
		{"STRLEN", "s", func(r redis.Cmdable) redis.Cmder { return r.StrLen(ctx, "s") }},
		{"Do GET", "s", func(r redis.Cmdable) redis.Cmder {
			cmd := redis.NewCmd(ctx, "get", "s")
			_ = r.(interface {
				Process(context.Context, redis.Cmder) error
			}).Process(ctx, cmd)
			return cmd
		}},
		{"HGET f1", "h", func(r redis.Cmdable) redis.Cmder { return r.HGet(ctx, "h", "f1") }},
		{"HGET f2", "h", func(r redis.Cmdable) redis.Cmder { return r.HGet(ctx, "h", "f2") }},
		{"HGET none", "h", func(r redis.Cmdable) redis.Cmder { return r.HGet(ctx, "h", "f3") }},
		{"HMGET", "h", func(r redis.Cmdable) redis.Cmder { return r.HMGet(ctx, "h", "f2", "f3", "f1") }},
		{"HGETALL", "h", func(r redis.Cmdable) redis.Cmder { return r.HGetAll(ctx, "h") }},
		{"HEXISTS", "h", func(r redis.Cmdable) redis.Cmder { return r.HExists(ctx, "h", "f1") }},
		{"HLEN", "h", func(r redis.Cmdable) redis.Cmder { return r.HLen(ctx, "h") }},
		{"HKEYS", "h", func(r redis.Cmdable) redis.Cmder { return r.HKeys(ctx, "h") }},
		{"LRANGE", "l", func(r redis.Cmdable) redis.Cmder { return r.LRange(ctx, "l", 0, -1) }},
		{"LRANGE part", "l", func(r redis.Cmdable) redis.Cmder { return r.LRange(ctx, "l", 1, 1) }},
		{"LLEN", "l", func(r redis.Cmdable) redis.Cmder { return r.LLen(ctx, "l") }},
		{"LINDEX", "l", func(r redis.Cmdable) redis.Cmder { return r.LIndex(ctx, "l", 2) }},
		{"SMEMBERS", "set", func(r redis.Cmdable) redis.Cmder { return r.SMembers(ctx, "set") }},
		{"SISMEMBER", "set", func(r redis.Cmdable) redis.Cmder { return r.SIsMember(ctx, "set", "y") }},
		{"SISMEMBER no", "set", func(r redis.Cmdable) redis.Cmder { return r.SIsMember(ctx, "set", "q") }},
		{"SCARD", "set", func(r redis.Cmdable) redis.Cmder { return r.SCard(ctx, "set") }},
		{"ZRANGE", "z", func(r redis.Cmdable) redis.Cmder { return r.ZRange(ctx, "z", 0, -1) }},
		{"ZRANGE WITHSCORES", "z", func(r redis.Cmdable) redis.Cmder { return r.ZRangeWithScores(ctx, "z", 0, -1) }},
		{"ZREVRANGE", "z", func(r redis.Cmdable) redis.Cmder { return r.ZRevRange(ctx, "z", 0, -1) }},
		{"ZSCORE", "z", func(r redis.Cmdable) redis.Cmder { return r.ZScore(ctx, "z", "m2") }},
		{"ZCARD", "z", func(r redis.Cmdable) redis.Cmder { return r.ZCard(ctx, "z") }},
		{"ZRANK", "z", func(r redis.Cmdable) redis.Cmder { return r.ZRank(ctx, "z", "m2") }},
		{"TYPE", "h", func(r redis.Cmdable) redis.Cmder { return r.Type(ctx, "h") }},
	}
	shardOf := func(key string) redis.Cmdable {
		_, cl := c.ShardFor(key)
		return cl
	}
	for _, rd := range reads {
		t.Run(rd.name, func(t *testing.T) {
			want := rd.run(shardOf(rd.key))
			for i := 0; i < 3; i++ { // a miss, then hits
				got := rd.run(c)
				if got.String() != want.String() || !errors.Is(got.Err(), want.Err()) && got.Err() != want.Err() {
					t.Fatalf("read %d: got %s (err %v), shard says %s (err %v)", i, got, got.Err(), want, want.Err())
				}
			}
		})
	}
	if st := c.Stats().Hot; st.CacheHits < int64(2*len(reads)) {
		t.Errorf("CacheHits = %d, want >= %d", st.CacheHits, 2*len(reads))
	}

	// A caller that modifies its reply must not change the next caller's.
	got := c.HGetAll(ctx, "h").Val()
	got["f1"] = "changed"
	l := c.LRange(ctx, "l", 0, -1).Val()
	l[0] = "changed"
	if v := c.HGetAll(ctx, "h").Val()["f1"]; v != "one" {
		t.Errorf("HGETALL after a caller changed its map: f1 = %q", v)
	}
	if v := c.LRange(ctx, "l", 0, -1).Val()[0]; v != "a" {
		t.Errorf("LRANGE after a caller changed its slice: [0] = %q", v)
	}
}

// hotVersion tracks, per key, what a read that starts now may return: a
// value of at least min, or a nil reply if nilOK (a DEL is in flight or
// returned since the last write) or if a DEL starts during the read (dels
// counts the DELs started).
type hotVersion struct {
	p    atomic.Pointer[hotFloor]
	dels atomic.Int64
}

type hotFloor struct {
	min   int64
	nilOK bool
}

func (v *hotVersion) set(min int64, nilOK bool) { v.p.Store(&hotFloor{min, nilOK}) }

func (v *hotVersion) load() *hotFloor {
	if f := v.p.Load(); f != nil {
		return f
	}
	return &hotFloor{}
}

// ok reports whether got (isNil: a nil reply) is acceptable for a read that
// started at floor f.
func (f *hotFloor) ok(got int64, isNil bool) bool {
	if isNil {
		return f.nilOK
	}
	return got >= f.min
}

// TestHotKeysReadYourWrites mixes reads and writes of hot keys through
// every write path (single commands, split commands, pipelines,
// transactions, Watch), read singly and in pipelines: a read that starts
// after a write returned never sees an older value, and a pipeline's read
// after its own write sees the write.
func TestHotKeysReadYourWrites(t *testing.T) {
	for _, mit := range []redshard.Mitigation{redshard.LocalCache, redshard.SplitCopies} {
		t.Run(mit.String(), func(t *testing.T) {
			hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: mit, MaxStaleness: time.Hour, Copies: 4}, nil)
			c := hc.c
			strKeys := []string{"ryw:a", "ryw:b", "ryw:c"}
			const hashKey = "ryw:h"
			for _, k := range strKeys {
				c.Set(ctx, k, 0, 0)
			}
			c.HSet(ctx, hashKey, "v", 0)
			hotWarm(t, c, append(strKeys, hashKey)...)

			states := map[string]*hotVersion{}
			for _, k := range append(strKeys, hashKey) {
				states[k] = &hotVersion{}
			}
			var stale, reads atomic.Int64
			var errMu sync.Mutex
			var errs []error
			fail := func(err error) {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
			done := make(chan struct{})
			var writers, readers sync.WaitGroup

			// One writer per key, so its versions only grow.
			for w, k := range strKeys {
				writers.Go(func() {
					st := states[k]
					ver := int64(0)
					for n := 0; n < 150; n++ {
						next := ver + 1
						var err error
						switch (n + w) % 7 {
						case 0:
							err = c.Set(ctx, k, next, 0).Err()
						case 1:
							// Always after case 0 (a SET), never after a DEL.
							next, err = c.Incr(ctx, k).Result()
							if err == nil && next != ver+1 {
								err = fmt.Errorf("INCR returned %d after version %d", next, ver)
							}
						case 2:
							var get *redis.StringCmd
							_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
								p.Set(ctx, k, next, 0)
								get = p.Get(ctx, k)
								return nil
							})
							if got, gerr := get.Int64(); err == nil && (gerr != nil || got != next) {
								err = fmt.Errorf("GET after SET %d in one pipeline = %d, %v", next, got, gerr)
							}
						case 3:
							_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
								p.Set(ctx, k, next, 0)
								return nil
							})
						case 4:
							err = c.Watch(ctx, func(tx *redis.Tx) error {
								_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
									p.Set(ctx, k, next, 0)
									return nil
								})
								return err
							}, k)
						case 5:
							err = c.MSet(ctx, k, next, fmt.Sprintf("other:%d", n), n).Err()
						case 6:
							// DEL, then the next write brings the key back.
							st.set(ver, true)
							st.dels.Add(1)
							if err = c.Del(ctx, k).Err(); err == nil {
								st.set(ver+1, true)
							}
							next = ver
						}
						if err != nil {
							fail(fmt.Errorf("write %d of %s: %w", n, k, err))
							return
						}
						if next != ver {
							ver = next
							st.set(ver, false)
						}
					}
				})
			}
			writers.Go(func() {
				st := states[hashKey]
				for ver := int64(1); ver <= 150; ver++ {
					var err error
					if ver%2 == 0 {
						err = c.HSet(ctx, hashKey, "v", ver).Err()
					} else {
						_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
							p.HSet(ctx, hashKey, "v", ver)
							return nil
						})
					}
					if err != nil {
						fail(fmt.Errorf("HSET: %w", err))
						return
					}
					st.set(ver, false)
				}
			})
			for r := 0; r < 6; r++ {
				readers.Go(func() {
					for n := 0; ; n++ {
						select {
						case <-done:
							return
						default:
						}
						var k string
						var got int64
						var err error
						var floor *hotFloor
						var dels int64
						if n%5 == 4 {
							k = hashKey
							floor = states[k].load()
							got, err = c.HGet(ctx, k, "v").Int64()
						} else {
							k = strKeys[(n+r)%len(strKeys)]
							// dels first: a DEL starting after it changes it (its
							// nil is excused below); one starting before it set
							// its floor's nilOK first, which the floor shows.
							dels = states[k].dels.Load()
							floor = states[k].load()
							if n%5 == 3 { // a pipelined read, answered locally as a single one
								var get *redis.StringCmd
								_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
									get = p.Get(ctx, k)
									return nil
								})
								got, err = get.Int64()
							} else {
								got, err = c.Get(ctx, k).Int64()
							}
						}
						if err != nil && err != redis.Nil {
							fail(fmt.Errorf("read %s: %w", k, err))
							return
						}
						reads.Add(1)
						if !floor.ok(got, err == redis.Nil) && !(err == redis.Nil && states[k].dels.Load() != dels) {
							stale.Add(1)
							fail(fmt.Errorf("read of %s started at state %+v returned %d (nil=%v)", k, *floor, got, err == redis.Nil))
						}
					}
				})
			}
			writers.Wait()
			close(done)
			readers.Wait()
			for i, err := range errs {
				if i == 10 {
					t.Errorf("... and %d more", len(errs)-10)
					break
				}
				t.Error(err)
			}
			st := c.Stats().Hot
			t.Logf("%d reads, %d stale; hits %d, misses %d, coalesced %d, split reads %d, fallbacks %d, fills %d",
				reads.Load(), stale.Load(), st.CacheHits, st.CacheMisses, st.Coalesced, st.SplitReads, st.SplitFallbacks, st.CopyFills)
			if mit == redshard.LocalCache && st.CacheHits == 0 {
				t.Error("no read was served by the local cache: the test proves nothing")
			}
			if mit == redshard.SplitCopies && st.SplitReads == 0 {
				t.Error("no read was served by a split copy: the test proves nothing")
			}
		})
	}
}

// TestHotKeysOtherWriterBoundedStaleness: a write made by another client is
// not seen at once (the cache really serves), and is seen once MaxStaleness
// has passed.
func TestHotKeysOtherWriterBoundedStaleness(t *testing.T) {
	const staleness = 100 * time.Millisecond
	for _, mit := range []redshard.Mitigation{redshard.LocalCache, redshard.SplitCopies} {
		t.Run(mit.String(), func(t *testing.T) {
			hc := newHotCluster(t, 2, redshard.HotKeyOptions{Mitigation: mit, MaxStaleness: staleness, Copies: 2}, nil)
			c := hc.c
			const key = "stale:k"
			other := redis.NewClient(&redis.Options{Addr: hc.owner(key).Addr()})
			defer other.Close()
			hotWarm(t, c, key)
			sawStale := false
			for attempt := 0; attempt < 20 && !sawStale; attempt++ {
				old, next := fmt.Sprint("v", 2*attempt), fmt.Sprint("v", 2*attempt+1)
				if err := c.Set(ctx, key, old, 0).Err(); err != nil {
					t.Fatal(err)
				}
				// Read until a mitigated read returns the value (the cache
				// holds it, or with Split a copy of it was made): counted,
				// not a number of reads, which a loaded machine can run
				// before the cache fill or the copy is made.
				mitigated := func() int64 { st := c.Stats().Hot; return st.CacheHits + st.SplitReads }
				before := mitigated()
				served := time.Now().Add(10 * time.Second)
				for i := 0; i < 50 || mitigated() == before; i++ {
					if got := c.Get(ctx, key).Val(); got != old {
						t.Fatalf("GET after our own SET = %q, want %q", got, old)
					}
					if time.Now().After(served) {
						t.Fatalf("no read of %s served by the %v within 10s", key, mit)
					}
				}
				start := time.Now()
				if err := other.Set(ctx, key, next, 0).Err(); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 20; i++ {
					if c.Get(ctx, key).Val() == old {
						sawStale = true
					}
				}
				if !sawStale && time.Since(start) < staleness/2 {
					t.Fatalf("another client's write was seen at once: nothing was served by the %v", mit)
				}
				// Fresh within MaxStaleness (polled with a generous deadline).
				// (20 fresh reads in a row: with Split, every copy is fresh.)
				deadline := time.Now().Add(10 * time.Second)
				for fresh := 0; fresh < 20; {
					if c.Get(ctx, key).Val() == next {
						fresh++
						continue
					}
					fresh = 0
					if time.Now().After(deadline) {
						t.Fatalf("another client's write not seen after %v", time.Since(start))
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if !sawStale {
				t.Fatal("never saw a stale read: the mitigation served nothing")
			}
		})
	}
}

// hotGetHook counts the GETs of one key that reach a shard client once
// armed, and holds the first of them until release is closed.
type hotGetHook struct {
	key     string
	armed   *atomic.Bool
	gets    *atomic.Int64
	release chan struct{}
}

func (h hotGetHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h hotGetHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); h.armed.Load() && len(a) == 2 && cmd.Name() == "get" && a[1] == h.key {
			if h.gets.Add(1) == 1 {
				<-h.release
			}
		}
		return next(ctx, cmd)
	}
}
func (h hotGetHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestHotKeysCoalescing: a thousand goroutines missing the same hot key at
// once send one GET to its shard.
func TestHotKeysCoalescing(t *testing.T) {
	const key, n = "coalesce:k", 1000
	hook := hotGetHook{key: key, armed: &atomic.Bool{}, gets: &atomic.Int64{}, release: make(chan struct{})}
	hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour},
		func(o *redshard.Options) {
			o.NewShardClient = func(s redshard.Shard, opt *redis.Options) *redis.Client {
				cl := redis.NewClient(opt)
				cl.AddHook(hook)
				return cl
			}
		})
	c := hc.c
	if err := hc.owner(key).Set(key, "value"); err != nil {
		t.Fatal(err)
	}
	hotWarm(t, c, key)
	hook.armed.Store(true)

	var wrong atomic.Int64
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Go(func() {
			<-gate
			if v, err := c.Get(ctx, key).Result(); err != nil || v != "value" {
				wrong.Add(1)
			}
		})
	}
	close(gate)
	// The first GET is held until every goroutine has missed the cache
	// (and is about to join the flight, or has joined it).
	for c.Stats().Hot.CacheMisses < n {
		runtime.Gosched()
	}
	close(hook.release)
	wg.Wait()
	if g := hook.gets.Load(); g != 1 {
		t.Errorf("%d goroutines missing the same hot key sent %d GETs, want 1", n, g)
	}
	if w := wrong.Load(); w != 0 {
		t.Errorf("%d goroutines got a wrong reply", w)
	}
	st := c.Stats().Hot
	t.Logf("hits %d, misses %d, coalesced %d", st.CacheHits, st.CacheMisses, st.Coalesced)
	if st.Coalesced < n/2 {
		t.Errorf("coalesced %d of %d", st.Coalesced, n)
	}
}

// TestHotKeysSplit: reads of a hot key are spread over its owner and its
// copies, copies hold the value, and a write deletes them before it returns.
func TestHotKeysSplit(t *testing.T) {
	hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.SplitCopies, MaxStaleness: time.Hour}, nil)
	c := hc.c
	const key = "split:k"
	c.Set(ctx, key, "v1", 0)
	hotWarm(t, c, key)
	counts := map[string]int{}
	for name, m := range hc.mini {
		counts[name] = m.CommandCount()
	}
	const reads = 600
	for i := 0; i < reads; i++ {
		if got := c.Get(ctx, key).Val(); got != "v1" {
			t.Fatalf("GET = %q, want v1", got)
		}
	}
	replicas := c.Ring().Replicas(key, 3)
	for _, name := range replicas {
		d := hc.mini[name].CommandCount() - counts[name]
		t.Logf("%s served %d commands", name, d)
		if d < reads/6 {
			t.Errorf("%s (one of the key's 3 places) served %d of %d reads", name, d, reads)
		}
	}
	st := c.Stats().Hot
	if st.SplitReads == 0 || st.CopyFills != 2 {
		t.Errorf("split reads %d, fills %d; want > 0 and 2", st.SplitReads, st.CopyFills)
	}
	copies := func() []string {
		var out []string
		for _, name := range replicas[1:] {
			for _, k := range hc.mini[name].Keys() {
				if strings.HasPrefix(k, redshard.SplitCopyPrefix) {
					out = append(out, name+"/"+k)
				}
			}
		}
		return out
	}
	if got := copies(); len(got) != 2 {
		t.Fatalf("copies on the replicas: %v, want 2", got)
	}
	if err := c.Set(ctx, key, "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := copies(); len(got) != 0 {
		t.Fatalf("copies left after a write through the client: %v", got)
	}
	for i := 0; i < 100; i++ {
		if got := c.Get(ctx, key).Val(); got != "v2" {
			t.Fatalf("GET after SET = %q, want v2", got)
		}
	}
	// Rebalance leaves copies alone: they are not misplaced keys.
	rep, err := c.Rebalance(ctx, redshard.RebalanceOptions{})
	if err != nil || rep.Misplaced != 0 || rep.Moved != 0 {
		t.Errorf("Rebalance with copies present: %+v, %v", rep, err)
	}
}

// hotRestoreGate holds the first RESTORE of a split copy until the test lets
// it go, so a write can land between a fill's DUMP and its RESTORE.
type hotRestoreGate struct {
	once    *sync.Once
	held    chan struct{} // closed when the RESTORE is held
	proceed chan struct{}
}

func (g hotRestoreGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g hotRestoreGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "restore" {
			g.once.Do(func() {
				close(g.held)
				<-g.proceed
			})
		}
		return next(ctx, cmd)
	}
}
func (g hotRestoreGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds { // a fill's RESTORE goes with its index entry
			if cmd.Name() == "restore" {
				g.once.Do(func() {
					close(g.held)
					<-g.proceed
				})
			}
		}
		return next(ctx, cmds)
	}
}

// TestHotKeysSplitFillRacesWrite: a fill reads the old value, a write
// through the client lands and returns, then the fill's RESTORE lands. The
// stale copy must never be read.
func TestHotKeysSplitFillRacesWrite(t *testing.T) {
	gate := hotRestoreGate{once: &sync.Once{}, held: make(chan struct{}), proceed: make(chan struct{})}
	hc := newHotCluster(t, 3, redshard.HotKeyOptions{Mitigation: redshard.SplitCopies, MaxStaleness: time.Hour, Copies: 3},
		func(o *redshard.Options) {
			o.NewShardClient = func(s redshard.Shard, opt *redis.Options) *redis.Client {
				cl := redis.NewClient(opt)
				cl.AddHook(gate)
				return cl
			}
		})
	c := hc.c
	const key = "race:k"
	c.Set(ctx, key, "old", 0)
	hotWarm(t, c, key)

	// Read until a read starts a fill of a copy; it blocks in the held
	// RESTORE, having dumped "old".
	reader := make(chan string, 1)
	go func() {
		var last string
		for {
			select {
			case <-gate.held:
				reader <- last
				return
			default:
			}
			last = c.Get(ctx, key).Val()
		}
	}()
	<-gate.held
	if err := c.Set(ctx, key, "new", 0).Err(); err != nil {
		t.Fatal(err)
	}
	close(gate.proceed) // the stale RESTORE lands now
	if got := <-reader; got != "old" && got != "new" {
		t.Fatalf("the read racing the write got %q", got)
	}
	for i := 0; i < 300; i++ {
		if got := c.Get(ctx, key).Val(); got != "new" {
			t.Fatalf("read %d after the write returned: %q, want new", i, got)
		}
	}
	if st := c.Stats().Hot; st.SplitReads == 0 {
		t.Errorf("no read served by a copy after the race: %+v", st)
	}
}

// TestHotKeysFlushDB: FLUSHDB through the client drops every cached reply.
func TestHotKeysFlushDB(t *testing.T) {
	for _, mit := range []redshard.Mitigation{redshard.LocalCache, redshard.SplitCopies} {
		t.Run(mit.String(), func(t *testing.T) {
			hc := newHotCluster(t, 2, redshard.HotKeyOptions{Mitigation: mit, MaxStaleness: time.Hour, Copies: 2}, nil)
			c := hc.c
			c.Set(ctx, "f", "v", 0)
			hotWarm(t, c, "f")
			for i := 0; i < 20; i++ {
				c.Get(ctx, "f")
			}
			if err := c.FlushDB(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20; i++ {
				if err := c.Get(ctx, "f").Err(); err != redis.Nil {
					t.Fatalf("GET after FLUSHDB: %v, want redis.Nil", err)
				}
			}
		})
	}
}

// TestHotKeysOffUnchanged: without HotKeyOptions nothing is counted or cached.
func TestHotKeysOffUnchanged(t *testing.T) {
	cl := newCluster(t, 1, 1)
	cl.c.Set(ctx, "k", "v", 0)
	for i := 0; i < 50; i++ {
		cl.c.Get(ctx, "k")
	}
	if hk := cl.c.HotKeys(); hk != nil {
		t.Errorf("HotKeys = %v, want nil", hk)
	}
	if st := cl.c.Stats().Hot; !reflect.DeepEqual(st, redshard.HotStats{}) {
		t.Errorf("Stats.Hot = %+v, want zero", st)
	}
}

// TestHotKeysTrackingOnWithoutServerSupport: with TrackingOn, a shard that
// refuses CLIENT TRACKING (miniredis) gets no cached replies, but its hot
// reads are still coalesced and answered right.
func TestHotKeysTrackingOnWithoutServerSupport(t *testing.T) {
	hc := newHotCluster(t, 2, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour, Tracking: redshard.TrackingOn}, nil)
	c := hc.c
	const key = "tracked-only"
	c.Set(ctx, key, "v", 0)
	hotWarm(t, c, key)
	m := hc.owner(key)
	c.Get(ctx, key) // probes
	before := m.CommandCount()
	for i := 0; i < 50; i++ {
		if got := c.Get(ctx, key).Val(); got != "v" {
			t.Fatalf("GET = %q", got)
		}
	}
	if d := m.CommandCount() - before; d != 50 {
		t.Errorf("owner served %d of 50 hot GETs, want all (nothing cached without tracking)", d)
	}
	name, _ := c.ShardFor(key)
	for _, s := range c.Stats().Hot.Shards {
		if s.Name == name && s.Invalidation != redshard.InvalidationStalenessOnly {
			t.Errorf("shard %s: tracking %v, want %v", name, s.Invalidation, redshard.InvalidationStalenessOnly)
		}
	}
	if hits := c.Stats().Hot.CacheHits; hits != 0 {
		t.Errorf("CacheHits = %d, want 0", hits)
	}
}
