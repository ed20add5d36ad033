package hot

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/redistest"
)

// fakeCacheClock makes the Paths built from now on measure their entries'
// lifetimes on a clock that moves only when the returned function moves
// it on.
func fakeCacheClock(t *testing.T) (advance func(time.Duration)) {
	t.Helper()
	base := time.Now()
	var off atomic.Int64
	cacheClock = func() time.Time { return base.Add(time.Duration(off.Load())) }
	t.Cleanup(func() { cacheClock = nil })
	return func(d time.Duration) { off.Add(int64(d)) }
}

// ttlConfig is the layer's configuration as the root resolves a
// MaxStaleness left zero: 1s for untracked replies, a long lifetime for
// tracked ones.
func ttlConfig(long time.Duration) *Config {
	return &Config{Mitigation: LocalCache, MaxStaleness: time.Second, TrackedLifetime: long,
		CacheBytes: 1 << 20, Tracking: TrackingOn}
}

// TestTrackedFillOutlivesMaxStaleness: a tracked reply of a key without a
// TTL lives the tracked lifetime, not the 1s MaxStaleness, and not longer.
func TestTrackedFillOutlivesMaxStaleness(t *testing.T) {
	advance := fakeCacheClock(t)
	h, b, admin := newTestPathConfig(t, ttlConfig(time.Minute))
	ctx := context.Background()
	if err := admin.Set(ctx, "nottl", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cacheKeyAgain(t, h, b, "nottl")
	id := b.HotState().id

	advance(2 * time.Second)
	hits := h.stats.hits.Load()
	if v, err := get(t, h, b, "nottl"); err != nil || v != "v" {
		t.Fatalf("GET nottl = %q, %v", v, err)
	}
	if h.stats.hits.Load() != hits+1 {
		t.Fatal("2s after its fill, past MaxStaleness (1s), a tracked reply of a key without TTL was not served from the cache")
	}
	advance(time.Minute)
	if h.cache.Holds(id, "nottl", getSubKey) {
		t.Fatal("a tracked reply outlived the tracked lifetime (1m)")
	}
}

// cacheKeyAgain caches key's GET reply as the reply of a key read again:
// its first read is cached (without PTTL), hidden, and read again.
func cacheKeyAgain(t *testing.T, h *Path, b *testBackend, key string) {
	t.Helper()
	cacheKey(t, h, b, key)
	h.cache.InvalidateKey(key)
	cacheKey(t, h, b, key)
}

// TestFirstReadWithoutPTTL: the first read of a key that is not hot is
// two commands (no PTTL), and its reply lives MaxStaleness (1s), not the
// tracked lifetime; once the key is read again, its miss sends PTTL and
// its reply lives the tracked lifetime.
func TestFirstReadWithoutPTTL(t *testing.T) {
	advance := fakeCacheClock(t)
	h, b, admin := newTestPathConfig(t, ttlConfig(time.Minute))
	ctx := context.Background()
	cacheKey(t, h, b, "probe") // starts tracking
	if err := admin.Set(ctx, "once", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pttls := commandCount(t, admin, "pttl")
	if v, err := get(t, h, b, "once"); err != nil || v != "v" {
		t.Fatalf("GET once = %q, %v", v, err)
	}
	id := b.HotState().id
	if !h.cache.Holds(id, "once", getSubKey) {
		t.Fatal("the first read of once was not cached")
	}
	if n := commandCount(t, admin, "pttl") - pttls; n != 0 {
		t.Fatalf("the first read of once sent %d PTTL; want none", n)
	}
	advance(2 * time.Second)
	if h.cache.Holds(id, "once", getSubKey) {
		t.Fatal("the reply of a first read, whose key's TTL is not known, outlived MaxStaleness (1s)")
	}
	cacheKey(t, h, b, "once") // read again: a miss that learns the TTL
	if n := commandCount(t, admin, "pttl") - pttls; n != 1 {
		t.Fatalf("the miss of a key read again sent %d PTTL; want 1", n)
	}
	advance(30 * time.Second)
	if !h.cache.Holds(id, "once", getSubKey) {
		t.Fatal("the reply of a key read again (no TTL) did not live the tracked lifetime")
	}
}

// TestTrackedFillBoundedByKeyTTL: a tracked reply of a key with a TTL
// lives no longer than what remained of the TTL, though the server still
// holds the key, and longer than MaxStaleness while the TTL runs.
func TestTrackedFillBoundedByKeyTTL(t *testing.T) {
	advance := fakeCacheClock(t)
	h, b, admin := newTestPathConfig(t, ttlConfig(2*time.Hour))
	ctx := context.Background()
	if err := admin.Set(ctx, "ttl", "v", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	cacheKeyAgain(t, h, b, "ttl")
	id := b.HotState().id

	advance(30 * time.Minute)
	if !h.cache.Holds(id, "ttl", getSubKey) {
		t.Fatal("a tracked reply of a key with 1h of TTL left was gone after 30m (of the cache's clock)")
	}
	advance(30 * time.Minute)
	if h.cache.Holds(id, "ttl", getSubKey) {
		t.Fatal("a tracked reply outlived its key's TTL (1h)")
	}
	if n, err := admin.Exists(ctx, "ttl").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS ttl = %d, %v: the server's key should live on (the cache's clock is fake)", n, err)
	}
}

// TestTrackedFillNotServedPastKeyTTL, on a real clock: a key whose TTL
// has passed but which the server has not deleted yet (active expiry off)
// is not answered from the cache.
func TestTrackedFillNotServedPastKeyTTL(t *testing.T) {
	h, b, admin := newTestPathConfig(t, ttlConfig(time.Hour), redistest.Args("--enable-debug-command", "yes"))
	ctx := context.Background()
	if err := admin.Do(ctx, "debug", "set-active-expire", "0").Err(); err != nil {
		t.Fatal(err)
	}
	cacheKey(t, h, b, "probe")  // starts tracking (a missing key's reply)
	const ttl = 2 * time.Second // long enough to be cached first on a loaded machine (else the test skips)
	if err := admin.Set(ctx, "short", "v", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	gone := time.Now().Add(ttl + 2*time.Millisecond) // the key's expiry is before this
	// A first read is sent without PTTL (its reply lives MaxStaleness):
	// count one read of short, and hide its reply, so that the reads
	// below are of a key read again, which learn its TTL.
	if _, err := get(t, h, b, "short"); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	h.cache.InvalidateKey("short")
	filled := false
	for !filled && time.Now().Before(gone) {
		hits := h.stats.hits.Load()
		v, err := get(t, h, b, "short")
		if err == redis.Nil {
			break // the whole TTL went by already (a slow machine): nothing to show
		}
		if err != nil || v != "v" {
			t.Fatalf("GET short = %q, %v", v, err)
		}
		filled = h.stats.hits.Load() == hits && h.cache.Holds(b.HotState().id, "short", getSubKey)
	}
	if !filled {
		t.Skip("the key's TTL passed before its reply was cached")
	}
	time.Sleep(time.Until(gone))
	if n, err := admin.DBSize(ctx).Result(); err != nil || n != 1 {
		// DBSIZE expires nothing: short is still there (probe never was).
		t.Fatalf("DBSIZE = %d, %v; want 1 (the server must not have deleted short yet)", n, err)
	}
	hits := h.stats.hits.Load()
	if v, err := get(t, h, b, "short"); err != redis.Nil {
		t.Fatalf("GET short past its TTL = %q, %v; want redis.Nil", v, err)
	}
	if h.stats.hits.Load() != hits {
		t.Fatal("GET short past its TTL was answered from the cache")
	}
}

// TestTrackedKeyTTLChangesInvalidate checks, on the server the tests run,
// the claim the lifetime's argument rests on (Path.lifetime): changing
// only a tracked key's TTL (EXPIRE, PEXPIRE, PERSIST) invalidates it, so
// that a TTL read after the read cannot be made wrong by a later change.
func TestTrackedKeyTTLChangesInvalidate(t *testing.T) {
	h, b, admin := newTestPathConfig(t, ttlConfig(time.Hour))
	ctx := context.Background()
	if err := admin.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, change := range [][]interface{}{
		{"expire", "k", 3600},
		{"pexpire", "k", 7200000},
		{"persist", "k"},
	} {
		cacheKey(t, h, b, "k")
		before := b.HotState().invalidations.Load()
		if err := admin.Do(ctx, change...).Err(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for b.HotState().invalidations.Load() == before {
			if time.Now().After(deadline) {
				t.Fatalf("%v: no invalidation of k within 10s", change)
			}
			time.Sleep(time.Millisecond)
		}
		if h.cache.Holds(b.HotState().id, "k", getSubKey) {
			t.Fatalf("%v: k still cached after its invalidation", change)
		}
	}
}

// TestTrackedLifetime: how PTTL's reply bounds a tracked reply's
// lifetime.
func TestTrackedLifetime(t *testing.T) {
	h := &Path{opt: Config{MaxStaleness: time.Second, TrackedLifetime: time.Minute}}
	pttl := func(ms int64, err error) *trackedReq {
		c := redis.NewCmd(context.Background(), "pttl", "k")
		c.SetVal(ms)
		c.SetErr(err)
		return &trackedReq{pttl: c, sent: time.Now()}
	}
	trackedLifetime := func(r *trackedReq, errNil error) time.Duration { return h.lifetime(r.pttl, r.sent, errNil) }
	if got := trackedLifetime(pttl(-1, nil), nil); got != time.Minute {
		t.Errorf("no TTL: %v; want the tracked lifetime, 1m", got)
	}
	if got := trackedLifetime(pttl(-2, nil), nil); got > 0 {
		t.Errorf("PTTL -2 after a read that found the key: %v; want nothing cached", got)
	}
	if got := trackedLifetime(pttl(-2, nil), redis.Nil); got != time.Minute {
		t.Errorf("PTTL -2 after a read that found no key: %v; want the tracked lifetime, 1m", got)
	}
	if got := trackedLifetime(pttl(3_600_000, nil), nil); got != time.Minute {
		t.Errorf("1h of TTL: %v; want the tracked lifetime, 1m", got)
	}
	if got := trackedLifetime(pttl(30_000, nil), nil); got > 30*time.Second-time.Millisecond || got <= 0 {
		t.Errorf("30s of TTL: %v; want at most 30s less a millisecond (counted from the batch's send)", got)
	}
	if got := trackedLifetime(pttl(1, nil), nil); got > 0 {
		t.Errorf("1ms of TTL: %v; want nothing cached (PTTL truncates)", got)
	}
	if got := trackedLifetime(pttl(0, errors.New("NOPERM")), nil); got != time.Second {
		t.Errorf("PTTL refused: %v; want MaxStaleness, 1s", got)
	}
}

// TestRefillLivesItsKeysTTL: a write-through refill learns its key's TTL
// in the write's round trip: after SET without a TTL its reply lives the
// tracked lifetime (past MaxStaleness), after SET PX it lives no longer
// than the TTL the write set.
func TestRefillLivesItsKeysTTL(t *testing.T) {
	advance := fakeCacheClock(t)
	h, b, _ := newTestPathConfig(t, ttlConfig(time.Minute))
	ctx := context.Background()
	cacheKey(t, h, b, "w") // held: its writes are refills
	id := b.HotState().id

	// write sends a write of the cached key w, which must be refilled.
	write := func(args ...any) {
		t.Helper()
		refills := h.stats.refills.Load()
		if err := do(t, h, b, redis.NewStatusCmd(ctx, args...)).Err(); err != nil {
			t.Fatal(err)
		}
		if h.stats.refills.Load() != refills+1 || !h.cache.Holds(id, "w", getSubKey) {
			t.Fatalf("%v of a cached key was not refilled", args)
		}
	}
	write("set", "w", "v1")
	advance(2 * time.Second)
	if !h.cache.Holds(id, "w", getSubKey) {
		t.Fatal("a refill of a key without TTL did not outlive MaxStaleness (1s)")
	}
	advance(time.Minute)
	if h.cache.Holds(id, "w", getSubKey) {
		t.Fatal("a refill outlived the tracked lifetime (1m)")
	}

	cacheKey(t, h, b, "w")
	write("set", "w", "v2", "px", 5000)
	advance(2 * time.Second)
	if !h.cache.Holds(id, "w", getSubKey) {
		t.Fatal("a refill of a key with 5s of TTL was gone after 2s")
	}
	advance(3 * time.Second)
	if h.cache.Holds(id, "w", getSubKey) {
		t.Fatal("a refill outlived the TTL its write set (5s)")
	}
}
