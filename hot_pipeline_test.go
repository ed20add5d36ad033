package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
)

// TestHotPipelineServesCachedKeys: a 16-command pipeline with a celebrity
// key never sends the celebrity to its shard while its reply is cached,
// through every way of pipelining (Pipeline, Pipelined, the client's
// AutoPipeliner, Options.AutoPipeline); the other reads go as before, in
// their places, and a write through the client is read back at once.
func TestHotPipelineServesCachedKeys(t *testing.T) {
	type pipeFn func(c *redshard.Client, fill func(redis.Pipeliner) []redis.Cmder) ([]redis.Cmder, error)
	pipelined := func(c *redshard.Client, fill func(redis.Pipeliner) []redis.Cmder) ([]redis.Cmder, error) {
		var cmds []redis.Cmder
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmds = fill(p)
			return nil
		})
		return cmds, err
	}
	for _, tc := range []struct {
		name     string
		autopipe bool
		run      pipeFn
	}{
		{"Pipelined", false, pipelined},
		{"Pipeline+Exec", false, func(c *redshard.Client, fill func(redis.Pipeliner) []redis.Cmder) ([]redis.Cmder, error) {
			p := c.Pipeline()
			cmds := fill(p)
			_, err := p.Exec(ctx)
			return cmds, err
		}},
		{"AsyncAutoPipeline", false, func(c *redshard.Client, fill func(redis.Pipeliner) []redis.Cmder) ([]redis.Cmder, error) {
			ap, err := c.AsyncAutoPipeline()
			if err != nil {
				return nil, err
			}
			var cmds []redis.Cmder
			_, err = ap.Pipelined(ctx, func(p redis.Pipeliner) error {
				cmds = fill(p)
				return nil
			})
			return cmds, err
		}},
		{"Options.AutoPipeline", true, pipelined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour},
				func(o *redshard.Options) { o.AutoPipeline = tc.autopipe })
			c := hc.c
			const celeb = "celebrity"
			c.Set(ctx, celeb, "v1", 0)
			keys := []string{celeb}
			for i := 0; i < 15; i++ {
				k := fmt.Sprint("fan:", i)
				keys = append(keys, k)
				if i%3 != 0 {
					c.Set(ctx, k, "f"+fmt.Sprint(i), 0)
				}
			}
			keys[0], keys[7] = keys[7], keys[0] // the celebrity in the middle
			hotWarm(t, c, celeb)
			h := newAPCountHook()
			c.AddHook(h)

			check := func(want string) {
				t.Helper()
				cmds, err := tc.run(c, func(p redis.Pipeliner) []redis.Cmder {
					var out []redis.Cmder
					for _, k := range keys {
						out = append(out, p.Get(ctx, k))
					}
					return out
				})
				if !errors.Is(err, redis.Nil) { // fan:0 is missing: the first error of the pipeline
					t.Fatalf("pipeline error = %v, want redis.Nil", err)
				}
				if len(cmds) != len(keys) {
					t.Fatalf("%d commands, want %d", len(cmds), len(keys))
				}
				for i, k := range keys {
					got, err := cmds[i].(*redis.StringCmd).Result()
					w, wErr := "", error(redis.Nil)
					switch {
					case k == celeb:
						w, wErr = want, nil
					case atoi(k[len("fan:"):])%3 != 0:
						w, wErr = "f"+k[len("fan:"):], nil
					}
					if got != w || err != wErr {
						t.Fatalf("GET %s = %q, %v; want %q, %v", k, got, err, w, wErr)
					}
				}
			}
			check("v1") // fills the cache: one GET of the celebrity
			if n := h.count("get", celeb); n != 1 {
				t.Fatalf("the first pipeline read the celebrity %d times, want 1 (the read that fills the cache)", n)
			}
			rate := func() float64 {
				for _, k := range c.HotKeys() {
					if k.Key == celeb {
						return k.Rate
					}
				}
				return 0
			}
			r0 := rate()
			for i := 0; i < 50; i++ {
				check("v1")
			}
			if r := rate(); r <= r0 { // the detector's clock is frozen: only counts move it
				t.Fatalf("the celebrity's rate went from %v to %v: reads answered locally were not counted", r0, r)
			}
			if n := h.count("get", celeb); n != 1 {
				t.Fatalf("the celebrity was sent to its shard %d times while cached, want 1 (the fill)", n)
			}
			if n := h.count("get", keys[0]); n != 51 {
				t.Fatalf("a cold key was sent %d times, want 51", n)
			}
			c.Set(ctx, celeb, "v2", 0) // evicts the cached reply before it returns
			check("v2")
			if n := h.count("get", celeb); n != 2 {
				t.Fatalf("after a write, the celebrity was read %d times, want 2", n)
			}
			// A pipeline of cached reads sends nothing at all.
			before := h.cmds.Load() + h.pipes.Load()
			cmds, err := tc.run(c, func(p redis.Pipeliner) []redis.Cmder {
				return []redis.Cmder{p.Get(ctx, celeb), p.Get(ctx, celeb)}
			})
			if err != nil || cmds[0].(*redis.StringCmd).Val() != "v2" || cmds[1].(*redis.StringCmd).Val() != "v2" {
				t.Fatalf("pipeline GET celebrity x2 = %v, %v", cmds, err)
			}
			if after := h.cmds.Load() + h.pipes.Load(); after != before {
				t.Fatalf("a pipeline of cached reads sent %d commands or pipelines", after-before)
			}
		})
	}
}

// TestHotPipelineReadsItsOwnWrites: a read of a cached hot key that follows
// a write of the key in the same pipeline, through any kind of write, sees
// the write; a read before it is answered locally with the value it had.
func TestHotPipelineReadsItsOwnWrites(t *testing.T) {
	hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour}, nil)
	c := hc.c
	const k = "ryw:celebrity"
	other := hc.keysOn(t, "shard-0", "other", 1)[0]
	hotWarm(t, c, k)
	for _, tc := range []struct {
		name  string
		fill  func(p redis.Pipeliner, get func() *redis.StringCmd)
		want  []string // the GETs' values in order, "(nil)" for redis.Nil
		after string   // what a GET after the pipeline reads
		local int      // how many of the GETs are answered locally
	}{
		{"SET then GET", func(p redis.Pipeliner, get func() *redis.StringCmd) {
			p.Set(ctx, k, "v2", 0)
			get()
		}, []string{"v2"}, "v2", 0},
		{"GET, SET, GET", func(p redis.Pipeliner, get func() *redis.StringCmd) {
			get()
			p.Set(ctx, k, "v2", 0)
			get()
		}, []string{"v1", "v2"}, "v2", 1},
		{"DEL then GET", func(p redis.Pipeliner, get func() *redis.StringCmd) {
			p.Del(ctx, k)
			get()
		}, []string{"(nil)"}, "(nil)", 0},
		{"MSET across shards then GET", func(p redis.Pipeliner, get func() *redis.StringCmd) {
			get()
			p.MSet(ctx, other, "x", k, "v2")
			get()
		}, []string{"v1", "v2"}, "v2", 1},
		{"APPEND then GET", func(p redis.Pipeliner, get func() *redis.StringCmd) {
			p.Append(ctx, k, "+")
			get()
			get()
		}, []string{"v1+", "v1+"}, "v1+", 0},
		{"EVAL then GET", func(p redis.Pipeliner, get func() *redis.StringCmd) {
			p.Eval(ctx, "return redis.call('set', KEYS[1], ARGV[1])", []string{k}, "v2")
			get()
		}, []string{"v2"}, "v2", 0},
		{"FLUSHDB then GET", func(p redis.Pipeliner, get func() *redis.StringCmd) {
			get()
			p.FlushDB(ctx)
			get()
		}, []string{"v1", "(nil)"}, "(nil)", 1},
		{"a write of another key does not stop local reads", func(p redis.Pipeliner, get func() *redis.StringCmd) {
			p.Set(ctx, other, "y", 0)
			get()
		}, []string{"v1"}, "v1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Set(ctx, k, "v1", 0)
			if v, err := c.Get(ctx, k).Result(); err != nil || v != "v1" { // cached again
				t.Fatalf("GET = %q, %v", v, err)
			}
			hits := c.Stats().Hot.CacheHits
			var gets []*redis.StringCmd
			_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
				tc.fill(p, func() *redis.StringCmd {
					g := p.Get(ctx, k)
					gets = append(gets, g)
					return g
				})
				return nil
			})
			for i, g := range gets {
				if got := strVal(g); got != tc.want[i] {
					t.Errorf("GET #%d = %s, want %s", i, got, tc.want[i])
				}
			}
			if got := strVal(c.Get(ctx, k)); got != tc.after {
				t.Errorf("GET after the pipeline = %s, want %s", got, tc.after)
			}
			if n := c.Stats().Hot.CacheHits - hits; n < int64(tc.local) || n > int64(tc.local)+1 { // +1: the GET after
				t.Errorf("%d cache hits, want %d (+1 for the GET after)", n, tc.local)
			}
		})
	}
}

// strVal is a GET's value, or "(nil)" for redis.Nil, or its error.
func strVal(g *redis.StringCmd) string {
	v, err := g.Result()
	switch {
	case err == redis.Nil:
		return "(nil)"
	case err != nil:
		return "error: " + err.Error()
	}
	return v
}

// orderHook holds the first single GET of key on its shard until a
// pipeline carrying a write of the key arrives, or until release; it
// records whether the write arrived while the GET was held.
type orderHook struct {
	key      string
	release  <-chan time.Time
	mu       sync.Mutex
	reading  bool
	overlap  bool
	reads    int
	writeIn  chan struct{}
	seenOnce sync.Once
}

func (h *orderHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *orderHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "get" || cmd.Args()[1] != h.key {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		h.reading, h.reads = true, h.reads+1
		h.mu.Unlock()
		select { // a correct client sends the write only after this read: the timer frees it
		case <-h.writeIn:
		case <-h.release:
		}
		err := next(ctx, cmd)
		h.mu.Lock()
		h.reading = false
		h.mu.Unlock()
		return err
	}
}
func (h *orderHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "set" && cmd.Args()[1] == h.key {
				h.mu.Lock()
				h.overlap = h.overlap || h.reading
				h.mu.Unlock()
				h.seenOnce.Do(func() { close(h.writeIn) })
			}
		}
		return next(ctx, cmds)
	}
}

// TestHotPipelineMissBeforeLaterWrite: GET k; SET k v3 in one pipeline,
// where k is hot but not cached: the GET fills the cache through a shared
// read, and that read must happen before the SET is sent, or it could
// return v3, which no single connection would.
func TestHotPipelineMissBeforeLaterWrite(t *testing.T) {
	hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour}, nil)
	c := hc.c
	const k = "order:celebrity"
	hotWarm(t, c, k)
	c.Set(ctx, k, "v2", 0) // not cached: the next read misses
	h := &orderHook{key: k, release: time.After(200 * time.Millisecond), writeIn: make(chan struct{})}
	c.AddHook(h)
	misses := c.Stats().Hot.CacheMisses
	var get *redis.StringCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, k)
		p.Set(ctx, k, "v3", 0)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strVal(get); got != "v2" {
		t.Fatalf("GET before SET v3 in the pipeline = %s, want v2", got)
	}
	if h.overlap || h.reads != 1 || c.Stats().Hot.CacheMisses != misses+1 {
		t.Fatalf("the shared read overlapped the pipeline's SET (%v), or reads %d != 1, or no miss", h.overlap, h.reads)
	}
	if got := strVal(c.Get(ctx, k)); got != "v3" {
		t.Fatalf("GET after the pipeline = %s, want v3", got)
	}
}

// TestHotPipelineKeyTurnsHotMidPipeline: the detector counts a pipeline's
// reads as it routes them, so a key can turn hot between two commands of one
// pipeline. A key whose reply is still cached from an earlier hot spell,
// written cold at the head of a pipeline, is read back by the later reads
// once hot: they must see the write, not the cached reply.
func TestHotPipelineKeyTurnsHotMidPipeline(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var ticking atomic.Bool
	var ticks atomic.Int64
	now := func() time.Time { // frozen until ticking; then each reading is 1s later
		if ticking.Load() {
			return t0.Add(time.Duration(ticks.Add(1)) * time.Second)
		}
		return t0.Add(time.Duration(ticks.Load()) * time.Second)
	}
	det := &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: now}
	hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour, Detector: det}, nil)
	c := hc.c
	const k = "turns:hot"
	c.Set(ctx, k, "v1", 0)
	hotWarm(t, c, k)
	if got := strVal(c.Get(ctx, k)); got != "v1" { // cached
		t.Fatalf("GET = %s", got)
	}
	isHot := func() bool {
		for _, hk := range c.HotKeys() {
			if hk.Key == k {
				return hk.Hot
			}
		}
		return false
	}
	cool := func() { // other keys' traffic takes k's share below the threshold
		t.Helper()
		ticking.Store(false)
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < 3000; i++ {
				p.Exists(ctx, fmt.Sprint("filler:", i%50))
			}
			return nil
		})
		if isHot() {
			t.Fatal("the key is still hot")
		}
	}
	h := newAPCountHook()
	c.AddHook(h)
	const n = 200
	readAll := func(write bool) []*redis.StringCmd {
		var gets []*redis.StringCmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if write {
				p.Set(ctx, k, "v2", 0)
			}
			for i := 0; i < n; i++ {
				gets = append(gets, p.Get(ctx, k))
			}
			return nil
		})
		return gets
	}

	// Without a write, the key turns hot partway: the later reads are answered locally.
	cool()
	ticking.Store(true)
	for i, g := range readAll(false) {
		if got := strVal(g); got != "v1" {
			t.Fatalf("GET #%d = %s, want v1", i, got)
		}
	}
	if sent := h.count("get", k); sent == 0 || sent == n {
		t.Fatalf("%d of %d reads were sent: the key did not turn hot partway through the pipeline", sent, n)
	}

	// With a cold write first, every read is sent and sees it.
	cool()
	before := h.count("get", k)
	ticking.Store(true)
	for i, g := range readAll(true) {
		if got := strVal(g); got != "v2" {
			t.Fatalf("GET #%d after SET v2 in the pipeline = %s", i, got)
		}
	}
	if sent := h.count("get", k) - before; sent != n {
		t.Fatalf("%d of %d reads after a write were sent, want all", sent, n)
	}
	if !isHot() {
		t.Fatal("the key did not turn hot: the second pipeline proves nothing")
	}
}

// TestHotPipelineShardDown: a hot, cached key whose shard is down gets the
// shard's ErrShardDown in a pipeline, as it does alone; the other commands
// of the pipeline are answered.
func TestHotPipelineShardDown(t *testing.T) {
	events := make(chan redshard.ShardStateChange, 16)
	hc := newHotCluster(t, 3, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour},
		func(o *redshard.Options) {
			o.ShardOptions = &redis.Options{MaxRetries: -1, DialTimeout: 200 * time.Millisecond}
			o.Health = &redshard.HealthOptions{Interval: 10 * time.Millisecond, Timeout: time.Second, FailureThreshold: 2,
				RecoveryThreshold: 2, OnShardStateChange: func(e redshard.ShardStateChange) { events <- e }}
		})
	c := hc.c
	hot := hc.keysOn(t, "shard-1", "hot", 1)[0]
	live := hc.keysOn(t, "shard-0", "live", 1)[0]
	c.Set(ctx, hot, "v1", 0)
	c.Set(ctx, live, "l", 0)
	hotWarm(t, c, hot)
	if got := strVal(c.Get(ctx, hot)); got != "v1" {
		t.Fatalf("GET = %s", got)
	}
	hc.mini["shard-1"].Close()
	waitEvent(t, events, "shard-1", true)
	single := c.Get(ctx, hot).Err()
	var getHot, getLive *redis.StringCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		getHot, getLive = p.Get(ctx, hot), p.Get(ctx, live)
		return nil
	})
	if !errors.Is(single, redshard.ErrShardDown) || !errors.Is(getHot.Err(), redshard.ErrShardDown) ||
		getHot.Err().Error() != single.Error() || !errors.Is(err, redshard.ErrShardDown) {
		t.Fatalf("hot key on a down shard: alone %v, in a pipeline %v (pipeline %v); want ErrShardDown both", single, getHot.Err(), err)
	}
	if strVal(getLive) != "l" {
		t.Fatalf("GET on a live shard in the same pipeline = %s", strVal(getLive))
	}
	if err := hc.mini["shard-1"].Restart(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, "shard-1", false)
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		getHot = p.Get(ctx, hot)
		return nil
	})
	if got := strVal(getHot); got != "v1" {
		t.Fatalf("GET once the shard is back = %s", got)
	}
}

// TestHotPipelineDuringChange: while a membership change is handed off, a
// pipelined read of a cached hot key goes to its shard (through the
// handoff); once the change is over it is answered locally again.
func TestHotPipelineDuringChange(t *testing.T) {
	hc := newHotCluster(t, 3, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour}, nil)
	c := hc.c
	const k = "change:celebrity"
	c.Set(ctx, k, "v1", 0)
	hotWarm(t, c, k)
	pipeGet := func() string {
		var g *redis.StringCmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			g = p.Get(ctx, k)
			return nil
		})
		return strVal(g)
	}
	if got := pipeGet(); got != "v1" { // cached
		t.Fatalf("GET = %s", got)
	}
	h := newAPCountHook()
	c.AddHook(h)
	if err := c.SetShards(ctx, hc.addShard(t, "shard-new", 1)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if got := pipeGet(); got != "v1" {
			t.Fatalf("GET during the change = %s", got)
		}
	}
	if n := h.count("get", k); n != 3 {
		t.Fatalf("the key was sent %d times in 3 pipelines during the change, want 3", n)
	}
	if _, err := c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if got := pipeGet(); got != "v1" {
			t.Fatalf("GET after the change = %s", got)
		}
	}
	if n := h.count("get", k); n > 4 {
		t.Fatalf("after the change the key was sent %d more times, want at most one fill", n-3)
	}
}

// TestHotPipelineTxNotLocal: a transaction's reads always go to the shard.
func TestHotPipelineTxNotLocal(t *testing.T) {
	hc := newHotCluster(t, 3, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour}, nil)
	c := hc.c
	const k = "tx:celebrity"
	c.Set(ctx, k, "v1", 0)
	hotWarm(t, c, k)
	c.Get(ctx, k) // cached
	h := newAPCountHook()
	c.AddHook(h)
	for i := 0; i < 3; i++ {
		var g *redis.StringCmd
		if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			g = p.Get(ctx, k)
			return nil
		}); err != nil || strVal(g) != "v1" {
			t.Fatalf("TxPipelined GET = %s, %v", strVal(g), err)
		}
	}
	if n := h.count("get", k); n != 3 {
		t.Fatalf("3 transactions sent the key %d times, want 3", n)
	}
}

// TestHotPipelineRepliesAsCold: with the shards spoken to in RESP2 and in
// RESP3, every supported read in a pipeline, typed or through Do, gives the
// same Go type and value whether it is answered locally (a miss, then hits)
// or by the shard, and so do errors and nil replies; Pipelined returns the
// same first error.
func TestHotPipelineRepliesAsCold(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("RESP", proto), func(t *testing.T) {
			hc := newHotCluster(t, 3, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour},
				func(o *redshard.Options) { o.ShardOptions = &redis.Options{Protocol: proto} })
			c := hc.c
			c.Set(ctx, "s", "hello world", 0)
			c.HSet(ctx, "h", "f1", "one", "f2", "two")
			c.RPush(ctx, "l", "a", "b", "c")
			c.SAdd(ctx, "set", "x", "y")
			c.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "m1"}, redis.Z{Score: 2.5, Member: "m2"})
			hotWarm(t, c, "s", "h", "l", "set", "z", "missing")
			fill := func(p redis.Pipeliner) []redis.Cmder {
				return []redis.Cmder{
					p.Get(ctx, "s"),
					p.Get(ctx, "missing"),
					p.Get(ctx, "h"), // WRONGTYPE
					p.GetRange(ctx, "s", 0, 4),
					p.StrLen(ctx, "s"),
					p.HGet(ctx, "h", "f1"),
					p.HMGet(ctx, "h", "f2", "nope", "f1"),
					p.HGetAll(ctx, "h"),
					p.HExists(ctx, "h", "f1"),
					p.HKeys(ctx, "h"),
					p.LRange(ctx, "l", 0, -1),
					p.LIndex(ctx, "l", 2),
					p.SMembers(ctx, "set"),
					p.SIsMember(ctx, "set", "y"),
					p.SMIsMember(ctx, "set", "x", "q"),
					p.ZRangeWithScores(ctx, "z", 0, -1),
					p.ZScore(ctx, "z", "m2"),
					p.ZMScore(ctx, "z", "m1", "m2"),
					p.ZRank(ctx, "z", "m2"),
					p.Type(ctx, "h"),
					p.Exists(ctx, "l"),
					p.Do(ctx, "get", "s"),
					p.Do(ctx, "get", "missing"),
					p.Do(ctx, "hgetall", "h"),
					p.Do(ctx, "hmget", "h", "f1", "nope"),
					p.Do(ctx, "smembers", "set"),
					p.Do(ctx, "sismember", "set", "x"),
					p.Do(ctx, "zrange", "z", 0, -1, "withscores"),
					p.Do(ctx, "zscore", "z", "m2"),
					p.Do(ctx, "hexists", "h", "f1"),
					p.Do(ctx, "type", "z"),
					p.Do(ctx, "lrange", "l", 0, -1),
				}
			}
			// The cold replies: the same pipeline sent to the owners' own
			// clients, one command each (they speak the same protocol).
			var want []redis.Cmder
			var wantErr error
			for _, cmd := range fill(c.Pipeline()) {
				_, owner := c.ShardFor(fmt.Sprint(cmd.Args()[1]))
				_, err := owner.Pipelined(ctx, func(p redis.Pipeliner) error {
					return p.Process(ctx, cmd)
				})
				if wantErr == nil {
					wantErr = err
				}
				want = append(want, cmd)
			}
			hits := c.Stats().Hot.CacheHits
			for round := 0; round < 3; round++ { // misses, then hits
				var got []redis.Cmder
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					got = fill(p)
					return nil
				})
				if err != wantErr && (err == nil || wantErr == nil || err.Error() != wantErr.Error()) {
					t.Fatalf("round %d: Pipelined error %v, cold %v", round, err, wantErr)
				}
				for i := range got {
					gv, wv := cmdVal(got[i]), cmdVal(want[i])
					if reflect.TypeOf(gv) != reflect.TypeOf(wv) || !reflect.DeepEqual(gv, wv) {
						t.Errorf("round %d: %v = %#v (%T), cold %#v (%T)", round, got[i].Args(), gv, gv, wv, wv)
					}
					ge, we := got[i].Err(), want[i].Err()
					if (ge == nil) != (we == nil) || ge != nil && ge.Error() != we.Error() ||
						errors.Is(ge, redis.Nil) != errors.Is(we, redis.Nil) {
						t.Errorf("round %d: %v error %v, cold %v", round, got[i].Args(), ge, we)
					}
				}
			}
			// Every read but the WRONGTYPE GET (errors are not cached) was a hit in rounds 2 and 3.
			if n := c.Stats().Hot.CacheHits - hits; n < int64(2*(len(want)-1)) {
				t.Errorf("%d cache hits, want >= %d: the reads were not answered locally", n, 2*(len(want)-1))
			}
		})
	}
}

// cmdVal is a command's reply value (Val) through reflection.
func cmdVal(cmd redis.Cmder) any {
	m := reflect.ValueOf(cmd).MethodByName("Val")
	return m.Call(nil)[0].Interface()
}

// TestHotPipelineMatchesColdClient: a pipeline mixing cached hot reads, cold
// reads, writes, nil replies, server errors and commands redshard refuses
// gives, command by command and in order, what the same pipeline gives
// through a client without hot keys.
func TestHotPipelineMatchesColdClient(t *testing.T) {
	hc := newHotCluster(t, 4, redshard.HotKeyOptions{Mitigation: redshard.LocalCache, MaxStaleness: time.Hour}, nil)
	c := hc.c
	cold, err := redshard.NewClient(&redshard.Options{Shards: hc.shards})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	a, b := hc.twoShardKeys(t)
	c.Set(ctx, "hot:s", "s1", 0)
	c.HSet(ctx, "hot:h", "f", "1")
	c.Set(ctx, a, "a", 0)
	hotWarm(t, c, "hot:s", "hot:h", "hot:none")
	fill := func(p redis.Pipeliner) {
		p.Get(ctx, "hot:s")
		p.Get(ctx, "hot:none")
		p.Rename(ctx, a, b) // refused: ErrCrossShard
		p.HGet(ctx, "hot:h", "f")
		p.Get(ctx, "hot:h") // WRONGTYPE
		p.Get(ctx, a)
		p.Incr(ctx, "hot:s") // ERR not an integer
		p.HIncrBy(ctx, "hot:h", "f", 1)
		p.HGet(ctx, "hot:h", "f") // after the write: 2
		p.Get(ctx, "hot:s")
		p.Do(ctx, "get", "hot:none")
	}
	for round := 0; round < 3; round++ {
		c.HSet(ctx, "hot:h", "f", "1")
		gotCmds, gotErr := c.Pipelined(ctx, func(p redis.Pipeliner) error { fill(p); return nil })
		c.HSet(ctx, "hot:h", "f", "1")
		wantCmds, wantErr := cold.Pipelined(ctx, func(p redis.Pipeliner) error { fill(p); return nil })
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("round %d: Pipelined error %v, cold client %v", round, gotErr, wantErr)
		}
		for i := range wantCmds {
			if g, w := gotCmds[i].String(), wantCmds[i].String(); g != w {
				t.Errorf("round %d: command %d: %s, cold client %s", round, i, g, w)
			}
		}
	}
	if c.Stats().Hot.CacheHits == 0 {
		t.Fatal("nothing was answered locally: the test proves nothing")
	}
}
