package localcache_test

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redshard/redshard/localcache"
)

func TestNewValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  *localcache.Config
		ok   bool
	}{
		{"nil config", nil, true},
		{"zero config", &localcache.Config{}, true},
		{"all set", &localcache.Config{MaxBytes: 1 << 20, NumCounters: 1000, BufferItems: 64, KeyStripes: 3}, true},
		{"negative MaxBytes", &localcache.Config{MaxBytes: -1}, false},
		{"negative NumCounters", &localcache.Config{NumCounters: -1}, false},
		{"negative BufferItems", &localcache.Config{BufferItems: -1}, false},
		{"negative KeyStripes", &localcache.Config{KeyStripes: -1}, false},
		{"huge KeyStripes", &localcache.Config{KeyStripes: localcache.MaxKeyStripes + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := localcache.New(tt.cfg)
			if tt.ok {
				if err != nil || c == nil {
					t.Fatalf("New = %v, %v; want a cache", c, err)
				}
				c.Close()
				return
			}
			if !errors.Is(err, localcache.ErrInvalidConfig) || c != nil {
				t.Fatalf("New = %v, %v; want ErrInvalidConfig", c, err)
			}
		})
	}
}

func TestGetSet(t *testing.T) {
	c := newCache(t, nil)
	if _, ok := c.Get(0, "k", "get"); ok {
		t.Fatal("hit on an empty cache")
	}
	sets := []struct {
		shard    int
		key, cmd string
		val      string
	}{
		{0, "k", "get", "v0"},
		{1, "k", "get", "v1"}, // same key read from another shard
		{0, "k", "strlen", "2"},
		{0, "h", "hget\x00f1", "a"},
		{0, "h", "hget\x00f2", "b"},
	}
	for _, s := range sets {
		if !c.Set(s.shard, s.key, s.cmd, s.val, int64(len(s.val)), hour) {
			t.Fatalf("Set(%d, %q, %q) dropped", s.shard, s.key, s.cmd)
		}
	}
	c.Wait()
	for _, s := range sets {
		if v, ok := c.Get(s.shard, s.key, s.cmd); !ok || v != s.val {
			t.Errorf("Get(%d, %q, %q) = %v, %v; want %q", s.shard, s.key, s.cmd, v, ok, s.val)
		}
	}
	// An existing entry is replaced at once, without Wait.
	c.Set(0, "k", "get", "v0'", 3, hour)
	if v, _ := c.Get(0, "k", "get"); v != "v0'" {
		t.Errorf("after overwrite Get = %v, want v0'", v)
	}
	misses := []struct {
		shard    int
		key, cmd string
	}{{2, "k", "get"}, {0, "k", "getrange"}, {0, "other", "get"}, {0, "h", "hget\x00f3"}}
	for _, m := range misses {
		if v, ok := c.Get(m.shard, m.key, m.cmd); ok {
			t.Errorf("Get(%d, %q, %q) = %v, want a miss", m.shard, m.key, m.cmd, v)
		}
	}
	st := c.Stats()
	if st.Hits != uint64(len(sets))+1 || st.Misses != uint64(len(misses))+1 || st.Sets != uint64(len(sets))+1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestSetRefused(t *testing.T) {
	c := newCache(t, &localcache.Config{MaxBytes: 1 << 20})
	tests := []struct {
		name string
		set  func() bool
	}{
		{"negative size", func() bool { return c.Set(0, "k", "get", "v", -1, hour) }},
		{"zero TTL", func() bool { return c.Set(0, "k", "get", "v", 1, 0) }},
		{"negative TTL", func() bool { return c.Set(0, "k", "get", "v", 1, -time.Second) }},
		{"larger than MaxBytes", func() bool { return c.Set(0, "k", "get", "v", 1<<20, hour) }},
		{"zero ticket", func() bool { return c.SetWithTicket(localcache.Ticket{}, "get", "v", 1, hour) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.set() {
				t.Fatal("Set accepted")
			}
		})
	}
	other := newCache(t, nil)
	if c.SetWithTicket(other.Ticket(0, "k"), "get", "v", 1, hour) {
		t.Error("ticket of another cache accepted")
	}
	c.Wait()
	if _, ok := c.Get(0, "k", "get"); ok {
		t.Error("refused Set cached anyway")
	}
	if st := c.Stats(); st.Dropped != uint64(len(tests))+1 {
		t.Errorf("Dropped = %d, want %d", st.Dropped, len(tests)+1)
	}
}

func TestTTL(t *testing.T) {
	clk := newFakeClock()
	c := newCache(t, &localcache.Config{Now: clk.Now})
	c.Set(0, "short", "get", "s", 1, time.Minute)
	c.Set(0, "long", "get", "l", 1, 10*time.Minute)
	c.Wait()
	steps := []struct {
		advance     time.Duration
		short, long bool
	}{
		{0, true, true},
		{time.Minute - time.Nanosecond, true, true},
		{time.Nanosecond, false, true}, // exactly at the TTL: expired
		{9 * time.Minute, false, false},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		_, short := c.Get(0, "short", "get")
		_, long := c.Get(0, "long", "get")
		if short != s.short || long != s.long {
			t.Fatalf("at +%v: short %v long %v, want %v %v", s.advance, short, long, s.short, s.long)
		}
	}
	if st := c.Stats(); st.Expired != 3 {
		t.Errorf("Expired = %d, want 3", st.Expired)
	}
	// A new Set restarts the TTL.
	c.Set(0, "short", "get", "s2", 2, time.Minute)
	if v, ok := c.Get(0, "short", "get"); !ok || v != "s2" {
		t.Errorf("after refresh Get = %v, %v", v, ok)
	}
}

// TestTTLRealClock checks ristretto's own expiry, used when no clock is
// injected, by polling up to a generous deadline (never a fixed sleep).
func TestTTLRealClock(t *testing.T) {
	c := newCache(t, nil)
	if !c.Set(0, "k", "get", "v", 1, 50*time.Millisecond) {
		t.Fatal("Set dropped")
	}
	c.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := c.Get(0, "k", "get"); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("entry with a 50ms TTL still cached after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInvalidation(t *testing.T) {
	type ref struct {
		shard    int
		key, cmd string
	}
	all := []ref{
		{0, "a", "get"}, {0, "a", "strlen"}, {1, "a", "get"},
		{0, "b", "get"}, {1, "b", "hget\x00f"},
		{localcache.ShardStripes + 1, "c", "get"}, // shares shard 1's generation
	}
	tests := []struct {
		name       string
		invalidate func(*localcache.Cache)
		gone       []ref
	}{
		{"key, all sub-keys and shards", func(c *localcache.Cache) { c.InvalidateKey("a") }, all[:3]},
		{"unknown key", func(c *localcache.Cache) { c.InvalidateKey("zzz") }, nil},
		{"shard", func(c *localcache.Cache) { c.InvalidateShard(1) }, []ref{all[2], all[4], all[5]}},
		{"unknown shard", func(c *localcache.Cache) { c.InvalidateShard(7) }, nil},
		{"all", func(c *localcache.Cache) { c.Clear() }, all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Few key stripes would make "a" and "b" collide by chance;
			// the default makes it very unlikely, and the hashes are fixed.
			c := newCache(t, nil)
			for _, r := range all {
				c.Set(r.shard, r.key, r.cmd, r.key+r.cmd, 8, hour)
			}
			c.Wait()
			tt.invalidate(c)
			gone := map[ref]bool{}
			for _, r := range tt.gone {
				gone[r] = true
			}
			for _, r := range all {
				if _, ok := c.Get(r.shard, r.key, r.cmd); ok == gone[r] {
					t.Errorf("Get%v hit = %v, want %v", r, ok, !gone[r])
				}
			}
			// Fresh replies can be cached again.
			for _, r := range tt.gone {
				c.Set(r.shard, r.key, r.cmd, "new", 3, hour)
			}
			c.Wait()
			for _, r := range tt.gone {
				if v, ok := c.Get(r.shard, r.key, r.cmd); !ok || v != "new" {
					t.Errorf("after refill Get%v = %v, %v", r, v, ok)
				}
			}
		})
	}
}

// TestLateSet covers the ways an old reply can try to come back after an
// invalidation: whether or not Set accepts it, Get must not return it.
func TestLateSet(t *testing.T) {
	tests := []struct {
		name        string
		run         func(c *localcache.Cache) (setOK bool)
		wantRefused bool
	}{
		{"ticket taken before the invalidation", func(c *localcache.Cache) bool {
			tk := c.Ticket(0, "k")                            // the read is sent...
			c.InvalidateKey("k")                              // ...a write lands and invalidates...
			return c.SetWithTicket(tk, "get", "old", 3, hour) // ...the old reply arrives
		}, true},
		{"shard invalidated in between", func(c *localcache.Cache) bool {
			tk := c.Ticket(0, "k")
			c.InvalidateShard(0)
			return c.SetWithTicket(tk, "get", "old", 3, hour)
		}, true},
		{"cleared in between", func(c *localcache.Cache) bool {
			tk := c.Ticket(0, "k")
			c.Clear()
			return c.SetWithTicket(tk, "get", "old", 3, hour)
		}, true},
		{"overwrite of a cached entry, ticket before the invalidation", func(c *localcache.Cache) bool {
			c.Set(0, "k", "get", "older", 5, hour)
			c.Wait()
			tk := c.Ticket(0, "k")
			c.InvalidateKey("k")
			return c.SetWithTicket(tk, "get", "old", 3, hour)
		}, true},
		{"set still in ristretto's buffer when invalidated", func(c *localcache.Cache) bool {
			ok := c.Set(0, "k", "get", "old", 3, hour) // accepted, applied later
			c.InvalidateKey("k")
			return ok
		}, false},
		{"invalidated between the ticket check and the store", func(c *localcache.Cache) bool {
			c.SetBeforeStore(func() { c.InvalidateKey("k") })
			defer c.SetBeforeStore(nil)
			return c.Set(0, "k", "get", "old", 3, hour)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, nil)
			if ok := tt.run(c); ok == tt.wantRefused {
				t.Errorf("Set returned %v, want %v", ok, !tt.wantRefused)
			}
			c.Wait() // let ristretto apply whatever it buffered
			if v, ok := c.Get(0, "k", "get"); ok {
				t.Fatalf("Get = %v after the invalidation; want a miss", v)
			}
		})
	}
}

// TestReadYourWritesRace runs writers, readers that fill the cache from a
// versioned backing store, and Gets, all at once. A writer bumps the
// version, then invalidates, as the client does before a write returns. A
// Get may never return a version older than the last completed write.
func TestReadYourWritesRace(t *testing.T) {
	c := newCache(t, &localcache.Config{KeyStripes: 1 << 10})
	keys := []string{"a", "b", "c", "d"}
	type backing struct{ version, done atomic.Int64 }
	store := make([]backing, len(keys))
	iters := 20_000
	if testing.Short() {
		iters = 2_000
	}
	stop := make(chan struct{})
	var writers, readers sync.WaitGroup
	for g := range 2 {
		writers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := (g + i) % len(keys)
				v := store[k].version.Add(1) // the write lands on the shard
				c.InvalidateKey(keys[k])     // then the client invalidates
				if i%50 == 0 {
					c.InvalidateShard(k % 2)
				}
				for { // the write has returned: done >= v from now on
					d := store[k].done.Load()
					if d >= v || store[k].done.CompareAndSwap(d, v) {
						break
					}
				}
				runtime.Gosched()
			}
		})
	}
	var violations atomic.Int64
	for g := range 4 {
		readers.Go(func() {
			for i := range iters {
				k := (g*7 + i) % len(keys)
				shard := k % 2
				floor := store[k].done.Load()
				if v, ok := c.Get(shard, keys[k], "get"); ok {
					if v.(int64) < floor {
						violations.Add(1)
					}
					continue
				}
				tk := c.Ticket(shard, keys[k])
				v := store[k].version.Load() // the read from the shard
				runtime.Gosched()            // let writes slip in between
				c.SetWithTicket(tk, "get", v, 8, hour)
				if i%1000 == 0 {
					c.Wait()
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	writers.Wait()
	st := c.Stats()
	t.Logf("stats: %+v", st)
	if n := violations.Load(); n > 0 {
		t.Fatalf("%d Gets returned a version older than a completed write", n)
	}
	if st.Hits == 0 || st.Outdated == 0 || st.Invalidated == 0 {
		t.Errorf("the race was not exercised: %+v", st)
	}
}

func TestByteBudget(t *testing.T) {
	const maxBytes = 1 << 20
	const size = 10 << 10
	c := newCache(t, &localcache.Config{MaxBytes: maxBytes})
	for i := range 1000 {
		c.Set(i%4, "key:"+strconv.Itoa(i), "get", i, size, hour)
		if i%100 == 0 {
			c.Wait()
		}
	}
	c.Wait()
	st := c.Stats()
	if st.Bytes > maxBytes || st.Bytes <= 0 || st.MaxBytes != maxBytes {
		t.Fatalf("Bytes = %d, MaxBytes = %d; want in (0, %d]", st.Bytes, st.MaxBytes, maxBytes)
	}
	cached := 0
	for i := range 1000 {
		if _, ok := c.Get(i%4, "key:"+strconv.Itoa(i), "get"); ok {
			cached++
		}
	}
	perEntry := size + len("key:000") + len("get") + localcache.EntryOverhead
	if cached == 0 || cached > maxBytes/perEntry+1 {
		t.Fatalf("%d entries of ~%d bytes cached in %d bytes", cached, perEntry, maxBytes)
	}
	t.Logf("%d entries cached, %d bytes used, %d evicted, %d rejected", cached, st.Bytes, st.Evicted, st.Rejected)
}

func TestClose(t *testing.T) {
	c, err := localcache.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Set(0, "k", "get", "v", 1, hour)
	c.Wait()
	// Close while other goroutines use the cache: no panic, no leak.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c.Get(0, "k", "get")
				c.Set(0, "k"+strconv.Itoa(i%100), "get", i, 8, hour)
				if i%64 == 0 {
					c.Wait()
					c.Clear()
				}
			}
		})
	}
	c.Close()
	c.Close() // idempotent
	close(stop)
	wg.Wait()
	if _, ok := c.Get(0, "k", "get"); ok {
		t.Error("hit after Close")
	}
	if c.Set(0, "k", "get", "v", 1, hour) {
		t.Error("Set accepted after Close")
	}
	c.Wait()
	c.Clear()
	c.InvalidateKey("k")
	c.InvalidateShard(0)
	_ = c.Stats()
}

func TestNilCache(t *testing.T) {
	var c *localcache.Cache
	if c.Set(0, "k", "get", "v", 1, hour) || c.SetWithTicket(c.Ticket(0, "k"), "get", "v", 1, hour) {
		t.Error("nil cache accepted a Set")
	}
	if _, ok := c.Get(0, "k", "get"); ok {
		t.Error("nil cache hit")
	}
	c.InvalidateKey("k")
	c.InvalidateShard(0)
	c.Clear()
	c.Wait()
	c.Close()
	if st := c.Stats(); st != (localcache.Stats{}) {
		t.Errorf("Stats = %+v", st)
	}
}
