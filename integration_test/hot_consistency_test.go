package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/redistest"
)

// consistencyLag is the most a read may lag a write acknowledged to any
// client (issue 27): the invalidation's delivery, or the notice of a lost
// tracking connection, must come well within it.
const consistencyLag = 2 * time.Second

// ackLog records, per key, the largest value an INCR has returned and
// when, so that a read can be checked against every write acknowledged
// consistencyLag before the read started.
type ackLog struct {
	mu   sync.Mutex
	acks map[string][]ack // per key, increasing in both fields
}

type ack struct {
	at  time.Time
	val int64
}

// add records that an INCR of key returned val at time at.
func (l *ackLog) add(key string, val int64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.acks[key]
	if n := len(s); n > 0 && s[n-1].val >= val {
		return
	}
	if n := len(s); n > 0 && at.Before(s[n-1].at) {
		at = s[n-1].at // keep the log sorted; the later time is the safe bound
	}
	l.acks[key] = append(s, ack{at: at, val: val})
}

// floor returns the largest value acknowledged for key at or before t.
func (l *ackLog) floor(key string, t time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.acks[key]
	i := sort.Search(len(s), func(i int) bool { return s[i].at.After(t) })
	if i == 0 {
		return 0
	}
	return s[i-1].val
}

// consistencyCounts are what one client's goroutines saw.
type consistencyCounts struct {
	reads, writes, errs    atomic.Int64
	backwards, ryw, lagged atomic.Int64
}

// TestHotReadsNeverGoBackwards is issue 27's consistency test. Four
// clients (one plain, one auto-pipelined, one auto-pipelined FullDuplex,
// and one auto-pipelined whose detector finds no key hot, so that it
// caches the counters by admission, under its yield gate), all with
// LocalCache and CLIENT TRACKING, read two counters, hot for the first
// three; the goroutines of all but the FullDuplex client also increment
// them (INCR, one command in ten). Every goroutine checks that
// its reads never go backwards (a value below one it saw before, its own
// INCR replies included), that a GET after its own INCR returns at least
// the INCR's reply (read-your-writes), and that no read returns less than
// a value acknowledged to any writer consistencyLag before the read
// started. Meanwhile the servers' connections are killed (CLIENT KILL TYPE
// pubsub and TYPE normal every 100-400 ms), their idle timeout is one
// second, and a server is restarted now and then (with its data, from its
// append-only file). At the end each client must read each counter's
// value on the server. REDSHARD_CONSISTENCY_SECONDS sets the duration
// (default 10).
func TestHotReadsNeverGoBackwards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	duration := 10 * time.Second
	if s := os.Getenv("REDSHARD_CONSISTENCY_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("REDSHARD_CONSISTENCY_SECONDS=%q: want a positive number of seconds", s)
		}
		duration = time.Duration(n) * time.Second
	}

	var servers []*redistest.Server
	var shards []redshard.Shard
	for i := 0; i < 2; i++ {
		s := redistest.Start(t, redistest.Args("--appendonly", "yes", "--appendfsync", "always", "--timeout", "1"))
		servers = append(servers, s)
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: s.Addr()})
	}
	admins := make([]*redis.Client, len(servers))
	for i, s := range servers {
		admins[i] = s.Client(t)
	}

	run := fmt.Sprintf("consistency:%d:", time.Now().UnixNano())
	keys := []string{run + "a", run + "b"}
	t.Cleanup(func() {
		// Only this test's keys, on every server that may hold one.
		for _, a := range admins {
			_ = a.Del(context.Background(), keys...).Err()
		}
	})

	t0 := time.Unix(1_700_000_000, 0)
	newClient := func(ap, fd, neverHot bool) *redshard.Client {
		det := &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: func() time.Time { return t0 }}
		if neverHot {
			det.MinRate = 1e12 // the counters are cached by admission, not as hot keys
		}
		o := &redshard.Options{Shards: shards, HotKeys: &redshard.HotKeyOptions{
			Mitigation:   redshard.LocalCache,
			MaxStaleness: time.Hour, // freshness must come from tracking alone
			Tracking:     redshard.TrackingOn,
			Detector:     det,
		}}
		if ap {
			o.AutoPipeline = true
			o.AutoPipelineOptions = redis.DefaultBlockingAutoPipelineOptions()
			o.AutoPipelineOptions.FullDuplex = fd
		}
		c, err := redshard.NewClient(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	names := []string{"plain", "autopipeline", "fullduplex", "admitted"}
	clients := []*redshard.Client{newClient(false, false, false), newClient(true, false, false),
		newClient(true, true, false), newClient(true, false, true)}
	for _, c := range clients[:3] {
		warm(t, c, keys...)
	}

	acked := &ackLog{acks: map[string][]ack{}}
	counts := make([]consistencyCounts, len(clients))
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var firstMu sync.Mutex
	var first []string // the first few violations, for the failure message
	report := func(format string, args ...any) {
		firstMu.Lock()
		defer firstMu.Unlock()
		if len(first) < 10 {
			first = append(first, fmt.Sprintf(format, args...))
		}
	}

	// worker reads (and, if it writes, increments) the counters through
	// client ci until ctx ends, checking every value it gets.
	worker := func(ci, g int, writes bool) {
		defer wg.Done()
		c, cnt := clients[ci], &counts[ci]
		rng := rand.New(rand.NewPCG(uint64(ci), uint64(g)))
		seen := map[string]int64{}
		who := fmt.Sprintf("%s/%d", names[ci], g)
		check := func(key string, v int64, what string) {
			if v < seen[key] {
				cnt.backwards.Add(1)
				report("%s: %s %s = %d after %d", who, what, key, v, seen[key])
			}
			seen[key] = max(seen[key], v)
		}
		get := func(key string) (int64, bool) {
			start := time.Now()
			v, err := c.Get(ctx, key).Int64()
			if errors.Is(err, redis.Nil) {
				v, err = 0, nil
			}
			if err != nil {
				if ctx.Err() == nil {
					cnt.errs.Add(1)
				}
				return 0, false
			}
			cnt.reads.Add(1)
			if f := acked.floor(key, start.Add(-consistencyLag)); v < f {
				cnt.lagged.Add(1)
				report("%s: GET %s = %d, but %d was acknowledged %v before the read started", who, key, v, f, consistencyLag)
			}
			return v, true
		}
		for i := 0; ctx.Err() == nil; i++ {
			key := keys[rng.IntN(len(keys))]
			if writes && rng.IntN(10) == 0 {
				v, err := c.Incr(ctx, key).Result()
				if err != nil {
					if ctx.Err() == nil {
						cnt.errs.Add(1)
					}
					continue
				}
				cnt.writes.Add(1)
				acked.add(key, v, time.Now())
				check(key, v, "INCR")
				if r, ok := get(key); ok {
					if r < v {
						cnt.ryw.Add(1)
						report("%s: GET %s = %d right after its INCR returned %d", who, key, r, v)
					}
					check(key, r, "GET after INCR")
				}
				continue
			}
			if v, ok := get(key); ok {
				check(key, v, "GET")
			}
			if i%64 == 0 {
				time.Sleep(200 * time.Microsecond) // leave the servers some CPU
			}
		}
	}
	for ci := range clients {
		for g := 0; g < 3; g++ {
			wg.Add(1)
			// The FullDuplex client only reads: its cache is kept fresh by
			// invalidations alone, never by its own writes.
			go worker(ci, g, ci != 2)
		}
	}

	// The faults run on this goroutine (Recover may call t.Fatal).
	var killsPubsub, killsNormal, restarts int
	rng := rand.New(rand.NewPCG(1, 2))
	deadline := time.Now().Add(duration)
	nextRestart := time.Now().Add(duration / 4)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		i := rng.IntN(len(servers))
		switch {
		case time.Now().After(nextRestart):
			servers[i].Recover(t)
			restarts++
			nextRestart = time.Now().Add(duration / 4)
		case rng.IntN(2) == 0:
			if admins[i].Do(context.Background(), "client", "kill", "type", "pubsub").Err() == nil {
				killsPubsub++
			}
		default:
			if admins[i].Do(context.Background(), "client", "kill", "type", "normal").Err() == nil {
				killsNormal++
			}
		}
	}
	stop()
	wg.Wait()

	// Every client must now read what the servers hold: at once if the
	// invalidations arrived, within consistencyLag at worst. The servers'
	// value is read again with every try: an INCR whose caller gave up
	// when the workers stopped may still run (it was on the wire), as with
	// any client.
	onServer := func(k string) int64 {
		var v int64
		for _, a := range admins {
			x, err := a.Get(context.Background(), k).Int64()
			if err == nil {
				v = max(v, x)
			} else if !errors.Is(err, redis.Nil) {
				t.Fatalf("GET %s on a server: %v", k, err)
			}
		}
		return v
	}
	finalBad := 0
	for ci, c := range clients {
		for _, k := range keys {
			end := time.Now().Add(consistencyLag)
			var got, want int64
			var err error
			for {
				got, err = c.Get(context.Background(), k).Int64()
				if errors.Is(err, redis.Nil) {
					got, err = 0, nil
				}
				if want = onServer(k); (err == nil && got == want) || time.Now().After(end) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil || got != want {
				finalBad++
				t.Errorf("%s: GET %s = %d (%v) %v after the last write; the server holds %d", names[ci], k, got, err, consistencyLag, want)
			}
		}
	}

	t.Logf("faults: %d CLIENT KILL TYPE pubsub, %d TYPE normal, %d restarts, in %v", killsPubsub, killsNormal, restarts, duration)
	bad := int64(0)
	for ci, c := range clients {
		cnt := &counts[ci]
		st := c.Stats().Hot
		t.Logf("%s: %d reads (%d cache hits, %d misses), %d INCRs, %d errors; %d backwards, %d read-your-writes violations, %d lagging > %v; tracking lost %d times, %d invalidations",
			names[ci], cnt.reads.Load(), st.CacheHits, st.CacheMisses, cnt.writes.Load(), cnt.errs.Load(),
			cnt.backwards.Load(), cnt.ryw.Load(), cnt.lagged.Load(), consistencyLag, st.TrackingLost, st.Invalidations)
		bad += cnt.backwards.Load() + cnt.ryw.Load() + cnt.lagged.Load()
		if cnt.reads.Load() == 0 || st.CacheHits == 0 {
			t.Errorf("%s: %d reads, %d cache hits: the test exercised nothing", names[ci], cnt.reads.Load(), st.CacheHits)
		}
	}
	if bad > 0 {
		t.Errorf("%d violations; the first ones:\n%s", bad, joinLines(first))
	}
	if finalBad > 0 {
		t.Errorf("%d final reads disagreed with the servers", finalBad)
	}
}

func joinLines(s []string) string {
	out := ""
	for _, l := range s {
		out += "  " + l + "\n"
	}
	return out
}
