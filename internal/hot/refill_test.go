package hot

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/flight"
	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/localcache"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBackend is one real redis-server as the layer sees it. Its reader
// connections go through a dialer that can hold the rest of a write-through
// refill's pipeline once its write is on the wire (hold), so that a test
// can act on the server between the write and the re-read.
type testBackend struct {
	addr      string
	client    *redis.Client
	heartbeat *redis.Client
	h         *Path
	once      sync.Once
	hs        *Shard

	mu      sync.Mutex
	dialed  []*redis.Client
	hold    func(local net.Addr) // runs between the write and the rest of a refill
	readers atomic.Int64         // reader connections dialed
	ap      bool                 // AutoPipelined's answer
}

func (b *testBackend) Client() *redis.Client { return b.client }
func (b *testBackend) Send(ctx context.Context, cmd redis.Cmder, _ bool) error {
	return b.client.Process(ctx, cmd)
}
func (b *testBackend) Down() bool                     { return false }
func (b *testBackend) HeartbeatClient() *redis.Client { return b.heartbeat }
func (b *testBackend) AutoPipelined() bool            { return b.ap }
func (b *testBackend) PeekClock() *atomic.Uint32      { return nil }
func (b *testBackend) HotState() *Shard {
	b.once.Do(func() { b.hs = b.h.NewShard(b, false) })
	return b.hs
}

func (b *testBackend) Dial(subscriber bool, onConnect func(context.Context, *redis.Conn) error) *redis.Client {
	opt := &redis.Options{Addr: b.addr, OnConnect: onConnect, PoolSize: 8}
	if subscriber {
		opt.Protocol = 2
	} else {
		opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			cn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			b.readers.Add(1)
			return &holdConn{Conn: cn, b: b}, nil
		}
	}
	cl := redis.NewClient(opt)
	b.mu.Lock()
	b.dialed = append(b.dialed, cl)
	b.mu.Unlock()
	return cl
}

// holdConn splits a refill's pipeline after its write: the write goes out,
// b.hold runs, then the rest (PUBLISH, CLIENT CACHING YES, GET).
type holdConn struct {
	net.Conn
	b *testBackend
}

var publishCmd = []byte("*3\r\n$7\r\npublish\r\n")

func (c *holdConn) Write(p []byte) (int, error) {
	c.b.mu.Lock()
	hold := c.b.hold
	c.b.mu.Unlock()
	i := bytes.Index(p, publishCmd)
	if hold == nil || i < 0 {
		return c.Conn.Write(p)
	}
	n, err := c.Conn.Write(p[:i])
	if err != nil {
		return n, err
	}
	hold(c.LocalAddr())
	m, err := c.Conn.Write(p[i:])
	return n + m, err
}

type testTopology struct{ b *testBackend }

func (t testTopology) Epoch() uint64                             { return 1 }
func (t testTopology) Guarded() bool                             { return false }
func (t testTopology) Shard(int) Backend                         { return t.b }
func (t testTopology) Owner(string) int                          { return 0 }
func (t testTopology) Replicas(_ string, buf []int, n int) []int { return append(buf, 0) }

// newTestPath returns a LocalCache layer with tracking on one real
// redis-server, its backend, and a plain client of that server.
func newTestPath(t *testing.T) (*Path, *testBackend, *redis.Client) {
	t.Helper()
	return newTestPathDetector(t, nil)
}

// newTestPathDetector is newTestPath with a detector configured by det.
func newTestPathDetector(t *testing.T, det *hotkey.Config) (*Path, *testBackend, *redis.Client) {
	t.Helper()
	return newTestPathConfig(t, &Config{Mitigation: LocalCache, MaxStaleness: time.Hour, CacheBytes: 1 << 20, Tracking: TrackingOn, Detector: det})
}

// newTestPathConfig is newTestPath with the layer configured by cfg and
// the server started with opts.
func newTestPathConfig(t *testing.T, cfg *Config, opts ...redistest.Option) (*Path, *testBackend, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t, opts...)
	flights := flight.New()
	b := &testBackend{addr: srv.Addr()}
	b.client = redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.heartbeat = redis.NewClient(&redis.Options{Addr: srv.Addr()})
	h, err := New(Env{Flights: flights, EachShard: func(func(*Shard)) {}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.h = h
	admin := srv.Client(t)
	t.Cleanup(func() {
		flights.Close()
		if b.hs != nil {
			b.hs.Close()
		}
		h.Close()
		b.mu.Lock()
		for _, cl := range b.dialed {
			_ = cl.Close()
		}
		b.mu.Unlock()
		_ = b.client.Close()
		_ = b.heartbeat.Close()
		_ = admin.Close()
	})
	return h, b, admin
}

// do runs args through Process as the root would, and returns the command.
func do(t *testing.T, h *Path, b *testBackend, cmd redis.Cmder) redis.Cmder {
	t.Helper()
	info, keys, err := command.Lookup(cmd.Args(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = h.Process(context.Background(), testTopology{b}, info, cmd, keys, 0)
	return cmd
}

func get(t *testing.T, h *Path, b *testBackend, key string) (string, error) {
	t.Helper()
	c := do(t, h, b, redis.NewStringCmd(context.Background(), "get", key)).(*redis.StringCmd)
	return c.Result()
}

// cacheKey reads key until the layer caches its GET reply and the shard's
// invalidation connection is live.
func cacheKey(t *testing.T, h *Path, b *testBackend, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !h.cache.Holds(b.HotState().id, key, getSubKey) || b.HotState().live.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s not cached after 10 s", key)
		}
		if _, err := get(t, h, b, key); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
	}
}

// commandCount returns how many times the server ran name (INFO
// commandstats, "get" or "client|caching").
func commandCount(t *testing.T, admin *redis.Client, name string) int64 {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	prefix := "cmdstat_" + name + ":calls="
	for _, line := range bytes.Split([]byte(info), []byte("\r\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			var n int64
			for _, c := range rest {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int64(c-'0')
			}
			return n
		}
	}
	return 0
}

// TestRefillAfterOwnWrite: after the client's own SET of a cached key, the
// next reads hit the cache, none misses, the server runs no GET for them
// (only the SET's own re-read), and they return the SET's value.
func TestRefillAfterOwnWrite(t *testing.T) {
	h, b, admin := newTestPath(t)
	ctx := context.Background()
	if err := admin.Set(ctx, "k", "v0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cacheKey(t, h, b, "k")
	for i := range 5 {
		v := "v" + string(rune('1'+i))
		gets, misses := commandCount(t, admin, "get"), h.stats.misses.Load()
		if err := do(t, h, b, redis.NewStatusCmd(ctx, "set", "k", v)).Err(); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			if got, err := get(t, h, b, "k"); err != nil || got != v {
				t.Fatalf("GET after own SET %s = %q, %v (read-your-writes)", v, got, err)
			}
		}
		if m := h.stats.misses.Load() - misses; m != 0 {
			t.Fatalf("SET %s: %d of the next 100 reads missed; want 0", v, m)
		}
		if g := commandCount(t, admin, "get") - gets; g != 1 {
			t.Fatalf("SET %s and 100 reads ran %d GETs on the server; want 1 (the SET's re-read)", v, g)
		}
	}
	if n := h.stats.refills.Load(); n != 5 {
		t.Fatalf("%d refills; want 5", n)
	}
}

// TestRefillAbsorbsInvalidationsOfTwoConnections: when two reader
// connections track the key, the write's invalidation comes twice (one for
// each) before the mark; both are absorbed and the refill is kept.
func TestRefillAbsorbsInvalidationsOfTwoConnections(t *testing.T) {
	h, b, admin := newTestPath(t)
	ctx := context.Background()
	cacheKey(t, h, b, "k")
	hs := b.HotState()
	id := hs.live.Load()
	first := hs.takeConn() // the connection whose read filled the cache
	other := hs.takeConn() // a second connection, made to track k too
	if first == other || other.redirect != 0 {
		t.Fatal("takeConn returned a connection in use")
	}
	hs.putConn(first, false)
	if _, err := other.cn.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "client", "tracking", "on", "redirect", id, "optin")
		p.Do(ctx, "client", "caching", "yes")
		p.Get(ctx, "k")
		return nil
	}); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	other.redirect = id
	hs.putConn(other, false)
	inv := hs.invalidations.Load()
	if err := do(t, h, b, redis.NewStatusCmd(ctx, "set", "k", "new")).Err(); err != nil {
		t.Fatal(err)
	}
	if n := hs.invalidations.Load() - inv; n != 2 {
		t.Fatalf("%d invalidations arrived before the write returned; want 2 (one per tracking connection)", n)
	}
	misses := h.stats.misses.Load()
	if got, err := get(t, h, b, "k"); err != nil || got != "new" || h.stats.misses.Load() != misses {
		t.Fatalf("GET after own SET = %q, %v, missed %v; want new from the cache", got, err, h.stats.misses.Load() != misses)
	}
	_ = admin
}

// TestRefillOtherWriteBetween holds the refill's pipeline after its write
// while another client writes the key: the re-read runs after both and
// reads the other client's value, which is what the cache then serves
// (the key was tracked by no one between the two writes, so no
// invalidation is owed).
func TestRefillOtherWriteBetween(t *testing.T) {
	h, b, admin := newTestPath(t)
	ctx := context.Background()
	cacheKey(t, h, b, "k")
	b.mu.Lock()
	b.hold = func(net.Addr) {
		waitValue(t, admin, "k", "ours") // our SET ran on the server
		if err := admin.Set(ctx, "k", "theirs", 0).Err(); err != nil {
			t.Error(err)
		}
	}
	b.mu.Unlock()
	if err := do(t, h, b, redis.NewStatusCmd(ctx, "set", "k", "ours")).Err(); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.hold = nil
	b.mu.Unlock()
	misses := h.stats.misses.Load()
	if got, err := get(t, h, b, "k"); err != nil || got != "theirs" {
		t.Fatalf("GET = %q, %v; want theirs (the re-read ran after both writes)", got, err)
	}
	if h.stats.misses.Load() != misses || h.stats.refills.Load() != 1 {
		t.Fatalf("misses +%d, refills %d; want a hit on the refill", h.stats.misses.Load()-misses, h.stats.refills.Load())
	}
}

// TestRefillOtherWriteAfterReRead: another client writes the key after the
// re-read ran, before the refill stores: that write's invalidation comes
// after the mark, so the refill is refused (or hidden), and the next read
// goes to the server and returns the other client's value.
func TestRefillOtherWriteAfterReRead(t *testing.T) {
	h, b, admin := newTestPath(t)
	ctx := context.Background()
	cacheKey(t, h, b, "k")
	hs := b.HotState()
	// Two invalidations come: our write's (one connection tracked k) and,
	// after the mark, theirs (the re-read tracked k again).
	inv := hs.invalidations.Load()
	refillHook = func(string) {
		if err := admin.Set(ctx, "k", "theirs", 0).Err(); err != nil {
			t.Error(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for hs.invalidations.Load() < inv+2 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // until their write's invalidation is in
		}
	}
	defer func() { refillHook = nil }()
	if err := do(t, h, b, redis.NewStatusCmd(ctx, "set", "k", "ours")).Err(); err != nil {
		t.Fatal(err)
	}
	refillHook = nil
	misses := h.stats.misses.Load()
	if got, err := get(t, h, b, "k"); err != nil || got != "theirs" {
		t.Fatalf("GET = %q, %v; want theirs: the refill of ours outlived a newer write", got, err)
	}
	if h.stats.misses.Load() != misses+1 || h.stats.refills.Load() != 0 {
		t.Fatalf("misses +%d, refills %d; want a miss and no refill", h.stats.misses.Load()-misses, h.stats.refills.Load())
	}
}

// TestRefillReaderKilledBetween kills the reader connection on the server
// after the refill's write ran and before its re-read: the write's outcome
// is sent again on the shard's client (as go-redis does when a command's
// connection fails), nothing is refilled, and the next reads return the
// written value.
func TestRefillReaderKilledBetween(t *testing.T) {
	h, b, admin := newTestPath(t)
	ctx := context.Background()
	cacheKey(t, h, b, "k")
	b.mu.Lock()
	b.hold = func(local net.Addr) {
		waitValue(t, admin, "k", "ours")
		if err := admin.ClientKillByFilter(ctx, "addr", local.String()).Err(); err != nil {
			t.Error(err)
		}
	}
	b.mu.Unlock()
	err := do(t, h, b, redis.NewStatusCmd(ctx, "set", "k", "ours")).Err()
	b.mu.Lock()
	b.hold = nil
	b.mu.Unlock()
	if err != nil {
		t.Fatalf("SET whose connection was killed under it = %v; want it sent again on the shard's client", err)
	}
	if n := h.stats.refills.Load(); n != 0 {
		t.Fatalf("%d refills from a killed connection", n)
	}
	for range 3 {
		if got, err := get(t, h, b, "k"); err != nil || got != "ours" {
			t.Fatalf("GET after the SET = %q, %v; want ours", got, err)
		}
	}
}

// waitValue waits until the server holds val at key.
func waitValue(t *testing.T, admin *redis.Client, key, val string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if v, _ := admin.Get(context.Background(), key).Result(); v == val {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Errorf("%s never became %s", key, val)
}

// TestRefillReaderWaits: a read that misses while its client's write of
// the key is on the wire (the write's own invalidation has hidden the
// cached reply) waits for the write's refill and is answered by it: no
// read of its own, no miss.
func TestRefillReaderWaits(t *testing.T) {
	h, b, admin := newTestPath(t)
	ctx := context.Background()
	cacheKey(t, h, b, "k")
	hs := b.HotState()
	inv := hs.invalidations.Load()
	waiting := make(chan struct{})
	awaitHook = func() { close(waiting) }
	defer func() { awaitHook = nil }()
	type result struct {
		v   string
		err error
	}
	read := make(chan result, 1)
	gets, misses := int64(0), int64(0)
	b.mu.Lock()
	b.hold = func(net.Addr) {
		deadline := time.Now().Add(10 * time.Second)
		for hs.invalidations.Load() == inv && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // until our write's invalidation is in
		}
		gets, misses = commandCount(t, admin, "get"), h.stats.misses.Load()
		go func() {
			v, err := get(t, h, b, "k")
			read <- result{v, err}
		}()
		<-waiting
	}
	b.mu.Unlock()
	if err := do(t, h, b, redis.NewStatusCmd(ctx, "set", "k", "ours")).Err(); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.hold = nil
	b.mu.Unlock()
	r := <-read
	if r.err != nil || r.v != "ours" {
		t.Fatalf("read during the write = %q, %v; want ours", r.v, r.err)
	}
	if m, g := h.stats.misses.Load()-misses, commandCount(t, admin, "get")-gets; m != 0 || g != 1 {
		t.Fatalf("the read during the write missed %d times and the server ran %d GETs; want 0 and 1 (the write's re-read)", m, g)
	}
}

// TestRefillHotKeyNotCached: a SET of a hot key whose GET reply is not
// cached (hidden by an invalidation, say a refused refill's) refills it
// too, so the hot key does not stay uncached until a reader reads it; a
// SET of a key neither cached nor hot is sent as it is.
func TestRefillHotKeyNotCached(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h, b, admin := newTestPathDetector(t, &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: func() time.Time { return t0 }})
	ctx := context.Background()
	cacheKey(t, h, b, "hot")
	for i := 0; ; i++ {
		h.Top() // refreshes the hot set (the detector's clock stands still)
		if h.det.IsHot("hot") {
			break
		}
		if i == 1000 {
			t.Fatal("the key read 1000 times is not hot")
		}
		if _, err := get(t, h, b, "hot"); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
	}
	hs := b.HotState()
	h.cache.InvalidateKey("hot")
	if err := do(t, h, b, redis.NewStatusCmd(ctx, "set", "hot", "v")).Err(); err != nil {
		t.Fatal(err)
	}
	if !h.cache.Holds(hs.id, "hot", getSubKey) || h.stats.refills.Load() != 1 {
		t.Fatalf("SET of a hot key not cached: cached %v, %d refills; want a refill", h.cache.Holds(hs.id, "hot", getSubKey), h.stats.refills.Load())
	}
	if got, err := get(t, h, b, "hot"); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	gets := commandCount(t, admin, "get")
	if err := do(t, h, b, redis.NewStatusCmd(ctx, "set", "cold", "v")).Err(); err != nil {
		t.Fatal(err)
	}
	if g := commandCount(t, admin, "get") - gets; g != 0 || h.stats.refills.Load() != 1 {
		t.Fatalf("SET of a key neither cached nor hot: %d GETs, %d refills; want it sent as it is", g, h.stats.refills.Load())
	}
}

// TestRefillOverlappingWrites: two writes of one key through the client,
// the second sent and finished while the first is between its round trip
// and its return. The second's re-read ran after both writes, and its
// refill is what the cache serves afterwards: the first's mark bumped the
// key for its writer before the second's refill stored (so that bump does
// not hide it), and the first's refill, refused because the second
// write's invalidation came after its mark, hides nothing. Before, the
// first writer bumped the key once it ran again, and its refused fill
// moved the fill counter: either left the key uncached, and its readers
// missing, until one of them read it again. The key is hot, or cached by
// admission alone: then the second write finds the reply hidden by the
// first's invalidation, and is a refill because the first one is.
func TestRefillOverlappingWrites(t *testing.T) {
	for _, hot := range []bool{true, false} {
		t.Run(map[bool]string{true: "hot", false: "admitted"}[hot], func(t *testing.T) {
			t0 := time.Unix(1_700_000_000, 0)
			det := &hotkey.Config{MinRate: 1e12, MinShare: 0.05, Now: func() time.Time { return t0 }}
			if hot {
				det.MinRate = 1
			}
			h, b, admin := newTestPathDetector(t, det)
			overlappingWrites(t, h, b, admin, hot)
		})
	}
}

func overlappingWrites(t *testing.T, h *Path, b *testBackend, admin *redis.Client, hot bool) {
	ctx := context.Background()
	if err := admin.Set(ctx, "k", "v0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cacheKey(t, h, b, "k")
	for i := 0; hot && !h.det.IsHot("k"); i++ {
		if i == 1000 {
			t.Fatal("the key read 1000 times is not hot")
		}
		if _, err := get(t, h, b, "k"); err != nil {
			t.Fatal(err)
		}
		h.Top() // refreshes the hot set (the detector's clock stands still)
	}
	if h.Top(); !hot && h.det.IsHot("k") {
		t.Fatal("the key turned hot")
	}
	held, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	refillHook = func(string) {
		if calls.Add(1) == 1 {
			close(held)
			<-release
		}
	}
	defer func() { refillHook = nil }()
	first := make(chan error, 1)
	go func() { first <- do(t, h, b, redis.NewStatusCmd(ctx, "set", "k", "v1")).Err() }()
	select {
	case <-held:
	case err := <-first:
		close(release)
		t.Fatalf("the first SET returned %v without a refill", err)
	}
	err := do(t, h, b, redis.NewStatusCmd(ctx, "set", "k", "v2")).Err()
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d refills ran; want 2", n)
	}
	gets, misses := commandCount(t, admin, "get"), h.stats.misses.Load()
	for range 10 {
		if got, err := get(t, h, b, "k"); err != nil || got != "v2" {
			t.Fatalf("GET after both SETs = %q, %v; want v2", got, err)
		}
	}
	if m, g := h.stats.misses.Load()-misses, commandCount(t, admin, "get")-gets; m != 0 || g != 0 || h.stats.refills.Load() != 1 {
		t.Fatalf("after two overlapping SETs the reads missed %d times and ran %d GETs, %d refills stored; want 0, 0 and 1 (the second's)", m, g, h.stats.refills.Load())
	}
}

// TestMarkBumpsBeforeWriterGoesOn: the bump a refill's mark makes for
// its writer (rule 4) is made before the writer can see the mark and
// return, so that a read started after the write returned cannot hit the
// reply cached before it; and it is counted for the other pending
// refill of the key, not for the marked one.
func TestMarkBumpsBeforeWriterGoesOn(t *testing.T) {
	c, err := localcache.New(&localcache.Config{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Fill(c.FillTicket(0, "k", getSubKey), "old", 3, time.Hour) {
		t.Fatal("Fill refused")
	}
	c.Wait()
	var rs refills
	first, token, _ := rs.start(c, 0, "k", getSubKey)
	second, _, _ := rs.start(c, 0, "k", getSubKey)
	var ended, cachedAtEnd bool
	endHook = func(r *refill) {
		if r == first {
			ended, cachedAtEnd = true, c.Holds(0, "k", getSubKey)
		}
	}
	defer func() { endHook = nil }()
	rs.marked(c, strconv.FormatUint(token, 10))
	if !ended {
		t.Fatal("the mark did not end the marked refill's wait: nothing was checked at that moment")
	}
	if !first.bumpedAtMark() {
		t.Fatal("the marked refill does not say its mark bumped the key")
	}
	if cachedAtEnd {
		t.Fatal("the reply cached before the write was still served when its writer could go on")
	}
	if first.absorbed != 0 || second.absorbed != 1 || second.bumpedAtMark() {
		t.Fatalf("absorbed: marked %d, other %d (other marked %v); want 0, 1, false", first.absorbed, second.absorbed, second.bumpedAtMark())
	}
}
