package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// healthShards starts n redis-servers and a client with a fast heartbeat
// that reports state changes on a channel.
func healthShards(t *testing.T, n int, failover bool) (*redshard.Client, []*redistest.Server, chan redshard.ShardStateChange) {
	t.Helper()
	var shards []redshard.Shard
	var servers []*redistest.Server
	for i := 0; i < n; i++ {
		s := redistest.Start(t)
		servers = append(servers, s)
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: s.Addr()})
	}
	events := make(chan redshard.ShardStateChange, 64)
	c, err := redshard.NewClient(&redshard.Options{
		Shards: shards,
		ShardOptions: &redis.Options{
			MaxRetries: -1, DialTimeout: 250 * time.Millisecond, DialerRetries: 1,
			ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, PoolSize: 64,
		},
		Health: &redshard.HealthOptions{
			Interval: 100 * time.Millisecond, Timeout: 250 * time.Millisecond, FailureThreshold: 2, RecoveryThreshold: 2,
			Failover: failover, GutterTTL: time.Minute,
			OnShardStateChange: func(e redshard.ShardStateChange) { events <- e },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, servers, events
}

func awaitState(t *testing.T, events chan redshard.ShardStateChange, shard string, down bool) time.Time {
	t.Helper()
	for {
		select {
		case e := <-events:
			if e.Shard == shard && e.Down == down {
				return e.At
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s never became down=%v", shard, down)
		}
	}
}

// keyOn returns a key owned by the named shard.
func keyOn(c *redshard.Client, shard, prefix string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if s, _ := c.ShardFor(k); s == shard {
			return k
		}
	}
}

// load runs a closed-loop GET/SET workload with g goroutines until stop is
// closed, counting successes per 100ms bucket and errors by kind.
type load struct {
	start   time.Time
	mu      sync.Mutex
	buckets map[int]int
	downErr atomic.Int64
	other   atomic.Int64
	lastErr atomic.Value
}

func runLoad(ctx context.Context, c *redshard.Client, g int, stop chan struct{}) (*load, *sync.WaitGroup) {
	l := &load{start: time.Now(), buckets: map[int]int{}}
	var wg sync.WaitGroup
	for w := 0; w < g; w++ {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("load:%d:%d", w, n%500)
				var err error
				if n%10 == 0 {
					err = c.Set(ctx, k, n, 0).Err()
				} else {
					err = c.Get(ctx, k).Err()
				}
				switch {
				case err == nil || err == redis.Nil:
					b := int(time.Since(l.start) / (100 * time.Millisecond))
					l.mu.Lock()
					l.buckets[b]++
					l.mu.Unlock()
				case errors.Is(err, redshard.ErrShardDown):
					l.downErr.Add(1)
				default:
					l.other.Add(1)
					l.lastErr.Store(err.Error())
				}
			}
		})
	}
	return l, &wg
}

// perSecond returns the successes in each whole second after the start.
func (l *load) perSecond() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := 0
	for b := range l.buckets {
		last = max(last, b)
	}
	out := make([]int, last/10+1)
	for b, n := range l.buckets {
		out[b/10] += n
	}
	return out
}

func TestKilledShardFailsFastOthersFlow(t *testing.T) {
	ctx := context.Background()
	c, servers, events := healthShards(t, 4, false)
	victim := keyOn(c, "shard-2", "victim")
	stop := make(chan struct{})
	l, wg := runLoad(ctx, c, 64, stop)
	time.Sleep(1500 * time.Millisecond) // a baseline second of load
	killed := time.Now()
	servers[2].Kill()
	downAt := awaitState(t, events, "shard-2", true)
	err := c.Get(ctx, victim).Err()
	if !errors.Is(err, redshard.ErrShardDown) || !strings.Contains(err.Error(), "shard-2") {
		t.Fatalf("GET on the killed shard: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	servers[2].Restart(t) // back, empty
	awaitState(t, events, "shard-2", false)
	if err := c.Set(ctx, victim, "again", 0).Err(); err != nil {
		t.Fatalf("SET on the restarted shard: %v", err)
	}
	close(stop)
	wg.Wait()
	secs := l.perSecond()
	t.Logf("killed shard detected down after %v; ops per second: %v; ErrShardDown %d, other errors %d (last: %v)",
		downAt.Sub(killed).Round(time.Millisecond), secs, l.downErr.Load(), l.other.Load(), l.lastErr.Load())
	if l.downErr.Load() == 0 {
		t.Fatal("no command got ErrShardDown while the shard was down")
	}
	if secs[len(secs)-2] == 0 {
		t.Fatal("the other shards stopped serving while one was down")
	}
	if got := c.Get(ctx, victim).Val(); got != "again" {
		t.Fatalf("GET on the restarted shard = %q", got)
	}
}

func TestFrozenShardDetectedByHeartbeat(t *testing.T) {
	ctx := context.Background()
	c, servers, events := healthShards(t, 4, false)
	victim := keyOn(c, "shard-1", "victim")
	live := keyOn(c, "shard-0", "live")
	stop := make(chan struct{})
	l, wg := runLoad(ctx, c, 64, stop)
	time.Sleep(1500 * time.Millisecond)
	frozen := time.Now()
	servers[1].Freeze()
	downAt := awaitState(t, events, "shard-1", true)
	if err := c.Get(ctx, victim).Err(); !errors.Is(err, redshard.ErrShardDown) {
		t.Fatalf("GET on the frozen shard: %v", err)
	}
	if err := c.Set(ctx, live, "v", 0).Err(); err != nil {
		t.Fatalf("a live shard while another is frozen: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	servers[1].Thaw()
	awaitState(t, events, "shard-1", false)
	close(stop)
	wg.Wait()
	if err := c.Set(ctx, victim, "back", 0).Err(); err != nil {
		t.Fatalf("the thawed shard: %v", err)
	}
	t.Logf("frozen shard detected down after %v; ops per second: %v; ErrShardDown %d, other errors %d",
		downAt.Sub(frozen).Round(time.Millisecond), l.perSecond(), l.downErr.Load(), l.other.Load())
}

func TestFailoverNeverServesValuesOverwrittenDuringOutage(t *testing.T) {
	ctx := context.Background()
	c, servers, events := healthShards(t, 3, true)
	var keys []string
	for i := 0; len(keys) < 50; i++ {
		k := fmt.Sprintf("user:%d", i)
		if s, _ := c.ShardFor(k); s == "shard-0" {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		c.Set(ctx, k, "before", 0)
	}
	servers[0].Freeze() // a hung host: its data survives
	awaitState(t, events, "shard-0", true)
	for _, k := range keys[:25] {
		if err := c.Set(ctx, k, "during", 0).Err(); err != nil {
			t.Fatalf("SET %s on the stand-in: %v", k, err)
		}
		if got := c.Get(ctx, k).Val(); got != "during" {
			t.Fatalf("GET %s during the outage = %q", k, got)
		}
	}
	servers[0].Thaw()
	awaitState(t, events, "shard-0", false)
	for i, k := range keys {
		got, err := c.Get(ctx, k).Result()
		if i < 25 && err != redis.Nil {
			t.Fatalf("%s was overwritten during the outage; after the shard returned it reads %q (%v)", k, got, err)
		}
		if i >= 25 && got != "before" {
			t.Fatalf("%s was not touched during the outage; it reads %q (%v)", k, got, err)
		}
	}
}

// startServers starts n redis-servers, shard-0 .. shard-(n-1).
func startServers(t *testing.T, n int) ([]redshard.Shard, []*redistest.Server) {
	t.Helper()
	var shards []redshard.Shard
	var servers []*redistest.Server
	for i := range n {
		s := redistest.Start(t)
		servers = append(servers, s)
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: s.Addr()})
	}
	return shards, servers
}

// TestFrozenShardReleasesWaitingCommands: commands already waiting on a
// frozen shard fail with ErrShardDown as soon as it is marked down, not
// after ReadTimeout × retries (here 20 s × 3), and default heartbeat
// settings detect the freeze. The time it took is logged, not asserted.
//
// Under AutoPipelineOptions.FullDuplex the waiting GETs ride the shard's
// full-duplex stream, whose client has no hooks: its dialer tracks the
// stream's connection for markDown, and send turns the severed stream's
// errors into ErrShardDown.
func TestFrozenShardReleasesWaitingCommands(t *testing.T) {
	t.Run("plain", func(t *testing.T) { frozenShardReleases(t, nil) })
	t.Run("fullduplex", func(t *testing.T) {
		frozenShardReleases(t, func(o *redshard.Options) {
			o.AutoPipeline = true
			o.AutoPipelineOptions = redis.DefaultBlockingAutoPipelineOptions()
			o.AutoPipelineOptions.FullDuplex = true
		})
	})
}

func frozenShardReleases(t *testing.T, with func(*redshard.Options)) {
	ctx := context.Background()
	shards, servers := startServers(t, 3)
	events := make(chan redshard.ShardStateChange, 16)
	opt := &redshard.Options{
		Shards:       shards,
		ShardOptions: &redis.Options{ReadTimeout: 20 * time.Second, WriteTimeout: 20 * time.Second, MaxRetries: 2},
		Health: &redshard.HealthOptions{OnShardStateChange: func(e redshard.ShardStateChange) {
			t.Logf("event %s down=%v err=%v", e.Shard, e.Down, e.Err)
			events <- e
		}},
	}
	if with != nil {
		with(opt)
	}
	c, err := redshard.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	victim := keyOn(c, "shard-1", "victim")
	if err := c.Set(ctx, victim, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	servers[1].Freeze()
	defer servers[1].Thaw()
	frozen := time.Now()
	const waiting = 16
	errs := make(chan error, waiting)
	for range waiting {
		go func() { errs <- c.Get(ctx, victim).Err() }()
	}
	downAt := awaitState(t, events, "shard-1", true)
	for range waiting {
		if err := <-errs; !errors.Is(err, redshard.ErrShardDown) {
			t.Fatalf("a GET waiting on the frozen shard returned %v, want ErrShardDown", err)
		}
	}
	released := time.Now()
	// Which mechanism released them, not how fast: a GET that waited out
	// its ReadTimeout (20 s) was released by the timeout, not by markDown
	// severing its connection.
	if readTimeout := opt.ShardOptions.ReadTimeout; released.Sub(frozen) >= readTimeout {
		t.Fatalf("the waiting GETs were released %v after the freeze, past their ReadTimeout %v: markDown did not sever their connection",
			released.Sub(frozen).Round(time.Millisecond), readTimeout)
	}
	if err := c.Set(ctx, keyOn(c, "shard-0", "live"), "v", 0).Err(); err != nil {
		t.Fatalf("a live shard while another is frozen: %v", err)
	}
	t.Logf("default heartbeat: frozen shard marked down after %v; %d waiting commands released %v after that",
		downAt.Sub(frozen).Round(time.Millisecond), waiting, released.Sub(downAt).Round(time.Millisecond))
	servers[1].Thaw()
	awaitState(t, events, "shard-1", false)
	if v, err := c.Get(ctx, victim).Result(); err != nil || v != "v" {
		t.Fatalf("GET after the thaw = %q, %v", v, err)
	}
}

// TestFrozenShardDefaultSettingsThroughput: 32 workers in a closed loop on
// 4 shards with every setting at its default (go-redis ReadTimeout 3s and
// 3 retries, heartbeat every 500ms, down after 2 misses); one shard is
// frozen. It logs the successful operations per 500ms before the freeze,
// until it is marked down, and after: the figure for the closing note, not
// an assertion on time. What it asserts: after the shard is marked down,
// operations on the other shards succeed and the frozen shard's fail with
// ErrShardDown.
func TestFrozenShardDefaultSettingsThroughput(t *testing.T) {
	ctx := context.Background()
	shards, servers := startServers(t, 4)
	events := make(chan redshard.ShardStateChange, 16)
	c, err := redshard.NewClient(&redshard.Options{
		Shards: shards,
		Health: &redshard.HealthOptions{OnShardStateChange: func(e redshard.ShardStateChange) { events <- e }},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	l, wg := runLoad(ctx, c, 32, stop)
	time.Sleep(2 * time.Second)
	frozen := time.Since(l.start)
	servers[1].Freeze()
	defer servers[1].Thaw()
	downAt := awaitState(t, events, "shard-1", true).Sub(l.start)
	time.Sleep(2 * time.Second)
	afterDown := l.downErr.Load()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if l.downErr.Load() == afterDown {
		t.Error("no ErrShardDown for the frozen shard's commands after it was marked down")
	}
	if err := c.Set(ctx, keyOn(c, "shard-0", "live"), "v", 0).Err(); err != nil {
		t.Fatalf("a live shard while another is frozen: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	half := func(from, to time.Duration) float64 { // ops/s over [from, to)
		n := 0
		for b, k := range l.buckets {
			if at := time.Duration(b) * 100 * time.Millisecond; at >= from && at < to {
				n += k
			}
		}
		return float64(n) / (to - from).Seconds()
	}
	before := half(frozen-time.Second, frozen)
	during := half(frozen, downAt)
	after := half(downAt+500*time.Millisecond, downAt+2*time.Second)
	t.Logf("frozen shard marked down %v after the freeze; ops/s before %.0f, until marked down %.0f (%.0f%%), after %.0f (%.0f%% of before; 3 of 4 shards live, ideal 75%%); ErrShardDown %d, other errors %d",
		(downAt - frozen).Round(time.Millisecond), before, during, 100*during/before, after, 100*after/before, l.downErr.Load(), l.other.Load())
}
