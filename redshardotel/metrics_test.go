package redshardotel_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/redshardotel"
)

const (
	shardDuration = "db.client.operation.duration"
	cmdDuration   = "redshard.client.operation.duration"
)

func TestInstrumentMetricsNilClient(t *testing.T) {
	in, err := redshardotel.InstrumentMetrics(nil)
	if !errors.Is(err, redshardotel.ErrNilClient) || in != nil {
		t.Fatalf("InstrumentMetrics(nil) = %v, %v; want nil, ErrNilClient", in, err)
	}
}

// TestShardDuration checks that each shard's commands are recorded under
// that shard's name and address, one point per command name, and that a
// split MGET is one MGET per shard it touches.
func TestShardDuration(t *testing.T) {
	cl := newCluster(t, 3, redshard.Options{})
	keys := map[string]string{}
	for _, s := range cl.shards {
		k := cl.keyOn(t, s.Name, "k")
		keys[s.Name] = k
		if err := cl.c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := cl.c.Get(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.c.MGet(ctx, keys["shard-0"], keys["shard-1"]).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, keys["shard-2"])
		p.Incr(ctx, "n:"+keys["shard-2"]) // its own key, wherever it lives
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ms := cl.collect(t)

	h := ms[shardDuration].Data.(metricdata.Histogram[float64])
	if got := h.DataPoints[0].Bounds; !slices.Equal(got, redshardotel.DurationBuckets()) || got[0] != 1e-6 {
		t.Errorf("bounds = %v, want DurationBuckets (from 1µs)", got)
	}
	if u := ms[shardDuration].Unit; u != "s" {
		t.Errorf("unit %q, want s", u)
	}
	for _, s := range cl.shards {
		base := server(cl.mini[s.Name]).with(attrs{"redshard.shard": s.Name, "db.system.name": "redis", "error.type": "-"})
		for op, want := range map[string]uint64{"SET": 1, "GET": 1} {
			if n, pts := ms.count(t, shardDuration, base.with(attrs{"db.operation.name": op})); n != want || pts != 1 {
				t.Errorf("%s %s: %d operations in %d points, want %d in 1", s.Name, op, n, pts, want)
			}
		}
		wantMGet := uint64(0)
		if s.Name != "shard-2" {
			wantMGet = 1
		}
		if n, _ := ms.count(t, shardDuration, base.with(attrs{"db.operation.name": "MGET"})); n != wantMGet {
			t.Errorf("%s MGET: %d, want %d", s.Name, n, wantMGet)
		}
	}
	// The pipeline's commands may live on one shard or two: one PIPELINE
	// per shard, never a GET or an INCR of their own.
	if n, _ := ms.count(t, shardDuration, attrs{"db.operation.name": "PIPELINE"}); n < 1 || n > 2 {
		t.Errorf("PIPELINE on the shards: %d, want 1 or 2", n)
	}
	if n, _ := ms.count(t, shardDuration, attrs{"db.operation.name": "INCR"}); n != 0 {
		t.Errorf("INCR recorded on its own: %d", n)
	}
	// A shard's own point has no other shard's address.
	if n, _ := ms.count(t, shardDuration, attrs{"redshard.shard": "shard-0", "server.port": server(cl.mini["shard-1"])["server.port"]}); n != 0 {
		t.Errorf("shard-0 recorded with shard-1's port %d times", n)
	}

	// The caller's view: one MGET, one PIPELINE, no shard, no address.
	for op, want := range map[string]uint64{"SET": 3, "GET": 3, "MGET": 1, "PIPELINE": 1} {
		n, _ := ms.count(t, cmdDuration, attrs{"db.operation.name": op, "db.system.name": "redis",
			"redshard.shard": "-", "server.address": "-", "error.type": "-"})
		if n != want {
			t.Errorf("command %s: %d, want %d", op, n, want)
		}
	}
}

// TestCommandErrors checks error.type at both levels: refusals are seen
// only by the caller's histogram, a Redis error by both, redis.Nil by
// neither.
func TestCommandErrors(t *testing.T) {
	cl := newCluster(t, 2, redshard.Options{})
	a, b := cl.keyOn(t, "shard-0", "a"), cl.keyOn(t, "shard-1", "b")
	cl.c.Set(ctx, a, "v", 0)

	if err := cl.c.Rename(ctx, a, b).Err(); !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("RENAME across shards: %v, want ErrCrossShard", err)
	}
	if err := cl.c.Get(ctx, b).Err(); err != redis.Nil {
		t.Fatalf("GET of a missing key: %v, want redis.Nil", err)
	}
	if err := cl.c.LPush(ctx, a, "x").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("LPUSH on a string: %v, want WRONGTYPE", err)
	}
	if err := cl.c.Do(ctx, "NOSUCHCOMMAND", "k").Err(); !errors.Is(err, redshard.ErrUnknownCommand) {
		t.Fatalf("unknown command: %v", err)
	}
	if err := cl.c.Info(ctx).Err(); !errors.Is(err, redshard.ErrNotSharded) {
		t.Fatalf("INFO: %v, want ErrNotSharded", err)
	}
	ms := cl.collect(t)

	for _, tc := range []struct {
		name, op, errType string
		cmd, shard        uint64
	}{
		{"cross-shard RENAME", "RENAME", "redshard.cross_shard", 1, 0},
		{"missing key GET", "GET", "-", 1, 1},
		{"WRONGTYPE", "LPUSH", "WRONGTYPE", 1, 1},
		{"unknown command", "_OTHER", "redshard.unknown_command", 1, 0},
		{"not sharded", "INFO", "redshard.not_sharded", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := attrs{"db.operation.name": tc.op, "error.type": tc.errType}
			if n, _ := ms.count(t, cmdDuration, want); n != tc.cmd {
				t.Errorf("command level: %d, want %d", n, tc.cmd)
			}
			if n, _ := ms.count(t, shardDuration, want); n != tc.shard {
				t.Errorf("shard level: %d, want %d", n, tc.shard)
			}
			// Nothing else was recorded for the operation: no error.type
			// where one is wanted, no other one where none is.
			if n, _ := ms.count(t, cmdDuration, attrs{"db.operation.name": tc.op}); n != tc.cmd {
				t.Errorf("command level, any error.type: %d, want %d", n, tc.cmd)
			}
		})
	}
	if n, _ := ms.count(t, shardDuration, attrs{"db.operation.name": "RENAME"}); n != 0 {
		t.Errorf("a refused RENAME reached a shard %d times", n)
	}
}

// TestShardDown checks the up gauge, the down counter and error.type of a
// command that failed fast on a down shard.
func TestShardDown(t *testing.T) {
	events := make(chan redshard.ShardStateChange, 16)
	cl := newCluster(t, 2, redshard.Options{
		ShardOptions: &redis.Options{MaxRetries: -1, DialTimeout: 200 * time.Millisecond},
		Health: &redshard.HealthOptions{
			Interval: 10 * time.Millisecond, Timeout: time.Second, FailureThreshold: 2, RecoveryThreshold: 2,
			OnShardStateChange: func(e redshard.ShardStateChange) { events <- e },
		},
	})
	ms := cl.collect(t)
	for _, s := range cl.shards {
		if v := ms.value(t, "redshard.shard.up", server(cl.mini[s.Name]).with(attrs{"redshard.shard": s.Name})); v != 1 {
			t.Errorf("%s up = %d, want 1", s.Name, v)
		}
	}
	if v := ms.value(t, "redshard.shard.downs", nil); v != 0 {
		t.Errorf("shard downs = %d before any outage", v)
	}

	dead := cl.keyOn(t, "shard-1", "k")
	if err := cl.c.Ping(ctx).Err(); err != nil { // first use: starts the heartbeat
		t.Fatal(err)
	}
	cl.mini["shard-1"].Close()
	waitEvent(t, events, "shard-1", true)
	if err := cl.c.Get(ctx, dead).Err(); !errors.Is(err, redshard.ErrShardDown) {
		t.Fatalf("GET on the down shard: %v, want ErrShardDown", err)
	}
	ms = cl.collect(t)
	if v := ms.value(t, "redshard.shard.up", attrs{"redshard.shard": "shard-1"}); v != 0 {
		t.Errorf("shard-1 up = %d after it went down, want 0", v)
	}
	if v := ms.value(t, "redshard.shard.up", attrs{"redshard.shard": "shard-0"}); v != 1 {
		t.Errorf("shard-0 up = %d, want 1", v)
	}
	if v, want := ms.value(t, "redshard.shard.downs", nil), cl.c.Stats().ShardDowns; v != want || v != 1 {
		t.Errorf("shard downs = %d, Stats says %d, want 1", v, want)
	}
	if n, _ := ms.count(t, cmdDuration, attrs{"db.operation.name": "GET", "error.type": "redshard.shard_down"}); n != 1 {
		t.Errorf("GET with error.type redshard.shard_down: %d, want 1", n)
	}

	// The shard comes back (which also ends go-redis's redial loop).
	if err := cl.mini["shard-1"].Restart(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, "shard-1", false)
	ms = cl.collect(t)
	if v := ms.value(t, "redshard.shard.up", attrs{"redshard.shard": "shard-1"}); v != 1 {
		t.Errorf("shard-1 up = %d after it came back, want 1", v)
	}
}

// TestLocalCacheHits checks that reads answered from the local cache are
// seen by the caller's histogram and not by the shard's, and that the csc
// counters are Stats().Hot's.
func TestLocalCacheHits(t *testing.T) {
	cl := newCluster(t, 3, hotOptions())
	const key = "celebrity"
	owner, _ := cl.c.ShardFor(key)
	if err := cl.c.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cl.warm(t, key)
	// The first hot read probes tracking (miniredis refuses it) and fills
	// the cache; the next ones are answered locally.
	if err := cl.c.Get(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	before := cl.collect(t)
	hot0 := cl.c.Stats().Hot

	const reads = 10
	for i := 0; i < reads; i++ {
		if got, err := cl.c.Get(ctx, key).Result(); err != nil || got != "v1" {
			t.Fatalf("GET = %q, %v", got, err)
		}
	}
	after := cl.collect(t)
	hot := cl.c.Stats().Hot
	if hot.CacheHits-hot0.CacheHits != reads {
		t.Fatalf("the %d GETs made %d cache hits, want all of them", reads, hot.CacheHits-hot0.CacheHits)
	}

	get := attrs{"db.operation.name": "GET", "error.type": "-"}
	n0, _ := before.count(t, cmdDuration, get)
	n1, _ := after.count(t, cmdDuration, get)
	if n1-n0 != reads {
		t.Errorf("caller's histogram: %d GETs recorded, want %d", n1-n0, reads)
	}
	s0, _ := before.count(t, shardDuration, attrs{"redshard.shard": owner})
	s1, _ := after.count(t, shardDuration, attrs{"redshard.shard": owner})
	if s1 != s0 {
		t.Errorf("the owner's histogram recorded %d operations for cached reads, want 0", s1-s0)
	}

	// One collection reads one Stats: the counters are its values (the
	// detector's clock is frozen and nothing ran since).
	if v := after.value(t, "redis.client.csc.requests", attrs{"result": "hit"}); v != hot.CacheHits || v < reads {
		t.Errorf("csc hits = %d, Stats says %d", v, hot.CacheHits)
	}
	if v := after.value(t, "redis.client.csc.requests", attrs{"result": "miss"}); v != hot.CacheMisses || v < 1 {
		t.Errorf("csc misses = %d, Stats says %d", v, hot.CacheMisses)
	}
	if v := after.value(t, "redshard.hotkeys.count", nil); v != 1 || int(v) != len(hot.Keys) {
		t.Errorf("hot keys = %d, want 1 (Stats: %v)", v, hot.Keys)
	}
	if m := after["redis.client.csc.requests"]; !m.Data.(metricdata.Sum[int64]).IsMonotonic || m.Unit != "{request}" {
		t.Errorf("csc requests: %+v, want a monotonic sum in {request}", m)
	}
	if _, ok := after["redshard.hotkeys.rate"]; ok {
		t.Error("hot key rates exported without WithHotKeyNames")
	}
	if where := findValue(after, key); where != "" {
		t.Errorf("the hot key's name is exported without WithHotKeyNames: %s", where)
	}
}

// findValue returns the first metric and attribute whose value is v, or "".
func findValue(ms metrics, v string) string {
	for name, m := range ms {
		var sets []attribute.Set
		switch d := m.Data.(type) {
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		case metricdata.Gauge[float64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		}
		for _, s := range sets {
			for _, kv := range s.ToSlice() {
				if strings.Contains(kv.Value.Emit(), v) {
					return name + " " + string(kv.Key)
				}
			}
		}
	}
	return ""
}

func TestHotKeyNames(t *testing.T) {
	cl := newCluster(t, 2, hotOptions(), redshardotel.WithHotKeyNames(true))
	cl.warm(t, "celebrity")
	ms := cl.collect(t)
	rate := ms.fvalue(t, "redshard.hotkeys.rate", attrs{"redshard.key": "celebrity"})
	keys := cl.c.Stats().Hot.Keys
	if len(keys) != 1 || keys[0].Key != "celebrity" || rate != keys[0].Rate || rate <= 0 {
		t.Errorf("rate of celebrity = %v, Stats says %+v", rate, keys)
	}
}

// TestRingGauges checks weights, shares and the epoch, before and after a
// membership change.
func TestRingGauges(t *testing.T) {
	cl := newCluster(t, 2, redshard.Options{})
	ms := cl.collect(t)
	if v := ms.value(t, "redshard.ring.epoch", nil); v != 1 {
		t.Errorf("epoch = %d after NewClient, want 1", v)
	}
	if v := ms.value(t, "redshard.handoff.active", nil); v != 0 {
		t.Errorf("handoff active = %d before any change", v)
	}
	var sum float64
	for _, s := range cl.c.Stats().Shards {
		want := attrs{"redshard.shard": s.Name}
		if w := ms.fvalue(t, "redshard.shard.weight", want); w != 1 {
			t.Errorf("%s weight %v, want 1", s.Name, w)
		}
		share := ms.fvalue(t, "redshard.shard.share", want)
		if share != s.Share {
			t.Errorf("%s share %v, Stats says %v", s.Name, share, s.Share)
		}
		sum += share
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("shares add up to %v, want 1", sum)
	}

	extra := newCluster(t, 1, redshard.Options{}).mini["shard-0"]
	shards := append(cl.c.Shards(), redshard.Shard{Name: "shard-new", Addr: extra.Addr(), Weight: 2})
	if err := cl.c.SetShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	ms = cl.collect(t)
	st := cl.c.Stats()
	if v := ms.value(t, "redshard.ring.epoch", nil); v != 2 || uint64(v) != st.Epoch {
		t.Errorf("epoch = %d after SetShards (Stats: %d), want 2", v, st.Epoch)
	}
	if v := ms.value(t, "redshard.handoff.active", nil); v != flag(st.HandoffActive) {
		t.Errorf("handoff active = %d, Stats says %v", v, st.HandoffActive)
	}
	newShard := server(extra).with(attrs{"redshard.shard": "shard-new"})
	if v := ms.value(t, "redshard.shard.up", newShard); v != 1 {
		t.Errorf("the new shard's up = %d, want 1", v)
	}
	if w := ms.fvalue(t, "redshard.shard.weight", newShard); w != 2 {
		t.Errorf("the new shard's weight = %v, want 2", w)
	}
	// The new shard's client got the shard hook too.
	k := cl.keyOn(t, "shard-new", "k")
	cl.c.Set(ctx, k, "v", 0)
	ms = cl.collect(t)
	if n, _ := ms.count(t, shardDuration, newShard.with(attrs{"db.operation.name": "SET"})); n != 1 {
		t.Errorf("SETs recorded on the new shard: %d, want 1", n)
	}
}

func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestLoadCounters checks the GetOrLoad counters.
func TestLoadCounters(t *testing.T) {
	cl := newCluster(t, 2, redshard.Options{})
	load := func(context.Context) (string, error) { return "loaded", nil }
	for i := 0; i < 2; i++ {
		if v, err := cl.c.GetOrLoad(ctx, "user:1", time.Minute, load); err != nil || v != "loaded" {
			t.Fatalf("GetOrLoad = %q, %v", v, err)
		}
	}
	ms := cl.collect(t)
	ls := cl.c.LoadStats()
	for _, tc := range []struct {
		name string
		want attrs
		got  uint64
	}{
		{"redshard.load.requests", attrs{"result": "hit"}, ls.Hits},
		{"redshard.load.requests", attrs{"result": "miss"}, ls.Misses},
		{"redshard.load.loads", nil, ls.Loads},
	} {
		if v := ms.value(t, tc.name, tc.want); v != int64(tc.got) || v != 1 {
			t.Errorf("%s %v = %d, LoadStats says %d, want 1", tc.name, tc.want, v, tc.got)
		}
	}
}

func TestWithAttributes(t *testing.T) {
	cl := newCluster(t, 2, hotOptions(), redshardotel.WithAttributes(attribute.String("service.pool", "sessions")))
	cl.c.Set(ctx, "k", "v", 0)
	ms := cl.collect(t)
	pool := attrs{"service.pool": "sessions"}
	if n, _ := ms.count(t, shardDuration, pool.with(attrs{"db.operation.name": "SET"})); n != 1 {
		t.Errorf("shard SET with the pool attribute: %d, want 1", n)
	}
	if n, _ := ms.count(t, cmdDuration, pool.with(attrs{"db.operation.name": "SET"})); n != 1 {
		t.Errorf("command SET with the pool attribute: %d, want 1", n)
	}
	if v := ms.value(t, "redshard.ring.epoch", pool); v != 1 {
		t.Errorf("epoch with the pool attribute = %d", v)
	}
	ms.value(t, "redis.client.csc.requests", pool.with(attrs{"result": "hit"}))
	ms.value(t, "redshard.shard.up", pool.with(attrs{"redshard.shard": "shard-0"}))
}

// TestUnregister checks that nothing is recorded after Unregister and that
// it is idempotent.
func TestUnregister(t *testing.T) {
	cl := newCluster(t, 2, redshard.Options{})
	cl.c.Set(ctx, "k", "v", 0)
	if err := cl.inst.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := cl.inst.Unregister(); err != nil {
		t.Fatalf("second Unregister: %v", err)
	}
	cl.c.Set(ctx, "k", "v", 0)
	ms := cl.collect(t)
	if n, _ := ms.count(t, cmdDuration, attrs{"db.operation.name": "SET"}); n != 1 {
		t.Errorf("SETs recorded: %d, want the 1 before Unregister", n)
	}
	if _, ok := ms["redshard.ring.epoch"]; ok {
		t.Error("the stats callback still runs after Unregister")
	}
}

// TestInstrumentError checks that a meter provider that refuses an
// instrument gives an error and no hook.
func TestInstrumentError(t *testing.T) {
	cl := newCluster(t, 1, redshard.Options{})
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(ctx)
	// An explicit bucket boundary that is not increasing is refused.
	_, err := redshardotel.InstrumentMetrics(cl.c, redshardotel.WithMeterProvider(mp), redshardotel.WithDurationBuckets(1, 0.5))
	if err == nil {
		t.Fatal("InstrumentMetrics accepted decreasing bucket boundaries")
	}
}

// waitEvent waits for the health monitor to mark shard down or up.
func waitEvent(t *testing.T, events chan redshard.ShardStateChange, shard string, down bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Shard == shard && e.Down == down {
				return
			}
		case <-timeout:
			t.Fatalf("the monitor did not mark %s down=%v", shard, down)
		}
	}
}

// TestBatches checks pipelines and transactions: one operation each, at
// both levels, named PIPELINE or MULTI, failed if a command failed.
func TestBatches(t *testing.T) {
	cl := newCluster(t, 2, redshard.Options{})
	a, b := cl.keyOn(t, "shard-0", "a"), cl.keyOn(t, "shard-1", "b")
	cl.c.Set(ctx, a, "1", 0)

	// One shard: a miss (no failure) and a WRONGTYPE (a failure).
	_, err := cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "missing:"+a)
		p.LPush(ctx, a, "x")
		return nil
	})
	if err == nil {
		t.Fatal("pipeline with a WRONGTYPE succeeded")
	}
	// A transaction on one shard, and one across two (refused).
	if _, err := cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, a)
		p.Incr(ctx, a)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, a)
		p.Incr(ctx, b)
		return nil
	}); !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("transaction across shards: %v, want ErrCrossShard", err)
	}
	ms := cl.collect(t)
	shard0 := server(cl.mini["shard-0"]).with(attrs{"redshard.shard": "shard-0"})
	for _, tc := range []struct {
		name, hist string
		want       attrs
		n          uint64
	}{
		{"pipeline, caller", cmdDuration, attrs{"db.operation.name": "PIPELINE", "error.type": "WRONGTYPE"}, 1},
		{"pipeline, shard", shardDuration, shard0.with(attrs{"db.operation.name": "PIPELINE", "error.type": "WRONGTYPE"}), 1},
		{"transaction, caller", cmdDuration, attrs{"db.operation.name": "MULTI", "error.type": "-"}, 1},
		{"transaction, shard", shardDuration, shard0.with(attrs{"db.operation.name": "MULTI", "error.type": "-"}), 1},
		{"cross-shard transaction, caller", cmdDuration, attrs{"db.operation.name": "MULTI", "error.type": "redshard.cross_shard"}, 1},
		{"cross-shard transaction, shards", shardDuration, attrs{"error.type": "redshard.cross_shard"}, 0},
		{"commands of batches, caller", cmdDuration, attrs{"db.operation.name": "INCR"}, 0},
		{"commands of batches, shards", shardDuration, attrs{"db.operation.name": "INCR"}, 0},
	} {
		if n, _ := ms.count(t, tc.hist, tc.want); n != tc.n {
			t.Errorf("%s: %d operations match %v, want %d", tc.name, n, tc.want, tc.n)
		}
	}
}

// TestMembershipCounters checks handoff and Rebalance metrics against
// Stats and the Rebalance report.
func TestMembershipCounters(t *testing.T) {
	cl := newCluster(t, 2, redshard.Options{})
	for i := 0; i < 200; i++ {
		cl.c.Set(ctx, fmt.Sprintf("user:%d", i), "v", 0)
	}
	extra := newCluster(t, 1, redshard.Options{}).mini["shard-0"]
	if err := cl.c.SetShards(ctx, append(cl.c.Shards(), redshard.Shard{Name: "shard-new", Addr: extra.Addr()})); err != nil {
		t.Fatal(err)
	}
	// A read of a key the new shard now owns brings it over.
	moved := ""
	for i := 0; i < 200 && moved == ""; i++ {
		if k := fmt.Sprintf("user:%d", i); cl.keyOwner(k) == "shard-new" {
			moved = k
		}
	}
	if got, err := cl.c.Get(ctx, moved).Result(); err != nil || got != "v" {
		t.Fatalf("GET of a moved key = %q, %v", got, err)
	}
	ms := cl.collect(t)
	st := cl.c.Stats()
	if v := ms.value(t, "redshard.handoff.active", nil); v != 1 || !st.HandoffActive {
		t.Errorf("handoff active = %d (Stats: %v), want 1 after SetShards", v, st.HandoffActive)
	}
	if v := ms.value(t, "redshard.handoff.moved", nil); v != st.HandoffMoved || v != 1 {
		t.Errorf("handoff moved = %d, Stats says %d, want 1", v, st.HandoffMoved)
	}

	rep, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms = cl.collect(t)
	for _, tc := range []struct {
		name string
		want int64
	}{
		{"redshard.rebalance.running", 0},
		{"redshard.rebalance.runs", 1},
		{"redshard.rebalance.epoch", int64(rep.Epoch)},
		{"redshard.rebalance.scanned", rep.Scanned},
		{"redshard.rebalance.moved", rep.Moved},
		{"redshard.rebalance.failed", rep.Failed},
		{"redshard.rebalance.estimate", rep.Total},
		{"redshard.handoff.active", 0},
	} {
		if v := ms.value(t, tc.name, nil); v != tc.want {
			t.Errorf("%s = %d, want %d (report %+v)", tc.name, v, tc.want, rep.RebalanceProgress)
		}
	}
	if rep.Moved == 0 || rep.Scanned < 200 {
		t.Errorf("Rebalance moved %d of %d scanned keys, want some of >= 200", rep.Moved, rep.Scanned)
	}
}

// keyOwner is the shard that owns key now.
func (cl *cluster) keyOwner(key string) string {
	name, _ := cl.c.ShardFor(key)
	return name
}

func TestZeroInstrumentation(t *testing.T) {
	var in redshardotel.Instrumentation
	if err := in.Unregister(); err != nil {
		t.Fatalf("zero Instrumentation's Unregister: %v", err)
	}
}

func TestWithAttributesOverridesSystem(t *testing.T) {
	cl := newCluster(t, 1, redshard.Options{}, redshardotel.WithAttributes(attribute.String("db.system.name", "valkey")))
	cl.c.Set(ctx, "k", "v", 0)
	ms := cl.collect(t)
	for _, h := range []string{shardDuration, cmdDuration} {
		if n, _ := ms.count(t, h, attrs{"db.system.name": "valkey", "db.operation.name": "SET"}); n != 1 {
			t.Errorf("%s: %d SETs with db.system.name=valkey, want 1", h, n)
		}
	}
}

// TestCollectAfterClose checks that a collection after the client closed
// (without Unregister) reports its last state and does not fail.
func TestCollectAfterClose(t *testing.T) {
	cl := newCluster(t, 2, hotOptions())
	cl.c.Set(ctx, "k", "v", 0)
	if err := cl.c.Close(); err != nil {
		t.Fatal(err)
	}
	ms := cl.collect(t)
	if v := ms.value(t, "redshard.ring.epoch", nil); v != 1 {
		t.Errorf("epoch after Close = %d, want 1", v)
	}
	if err := cl.c.Get(ctx, "k").Err(); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("GET after Close: %v", err)
	}
	ms = cl.collect(t)
	if n, _ := ms.count(t, cmdDuration, attrs{"db.operation.name": "GET", "error.type": "closed"}); n != 1 {
		t.Errorf("GET after Close with error.type closed: %d, want 1", n)
	}
}
