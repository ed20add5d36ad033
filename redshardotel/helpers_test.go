package redshardotel_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/redshardotel"
)

var ctx = context.Background()

// cluster is a set of miniredis shards and an instrumented client.
type cluster struct {
	c      *redshard.Client
	mini   map[string]*miniredis.Miniredis // by shard name
	shards []redshard.Shard
	reader *sdkmetric.ManualReader
	inst   *redshardotel.Instrumentation
}

// frozenDetector turns a key hot after a handful of commands, and only
// when HotKeys or Stats refreshes the hot set: its clock never moves, so
// nothing decays behind the test's back.
func frozenDetector() *hotkey.Config { return frozenDetectorAt(time.Unix(1_700_000_000, 0)) }

func frozenDetectorAt(t0 time.Time) *hotkey.Config {
	return &hotkey.Config{MinRate: 1, MinShare: 0.05, Now: func() time.Time { return t0 }}
}

// newCluster starts n miniredis shards (shard-0, shard-1, ...) and a
// client over them with opt's other fields, instrumented with a manual
// reader and opts. Both are closed at the end of the test.
func newCluster(t testing.TB, n int, opt redshard.Options, opts ...redshardotel.Option) *cluster {
	t.Helper()
	cl := &cluster{mini: map[string]*miniredis.Miniredis{}}
	for i := 0; i < n; i++ {
		m := miniredis.RunT(t)
		name := fmt.Sprintf("shard-%d", i)
		cl.mini[name] = m
		cl.shards = append(cl.shards, redshard.Shard{Name: name, Addr: m.Addr()})
	}
	opt.Shards = cl.shards
	c, err := redshard.NewClient(&opt)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cl.c = c

	cl.reader = sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(cl.reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	cl.inst, err = redshardotel.InstrumentMetrics(c, append([]redshardotel.Option{redshardotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatalf("InstrumentMetrics: %v", err)
	}
	t.Cleanup(func() { _ = cl.inst.Unregister() })
	return cl
}

// hotOptions make keys hot after a few reads and answer them from the
// local cache for an hour (miniredis has no CLIENT TRACKING).
func hotOptions() redshard.Options {
	return redshard.Options{HotKeys: &redshard.HotKeyOptions{
		Mitigation: redshard.LocalCache, MaxStaleness: time.Hour, Detector: frozenDetector(),
	}}
}

// keyOn returns a key (prefix:N) owned by the named shard.
func (cl *cluster) keyOn(t testing.TB, shard, prefix string) string {
	t.Helper()
	for i := 0; i < 100000; i++ {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if name, _ := cl.c.ShardFor(k); name == shard {
			return k
		}
	}
	t.Fatalf("no key with prefix %q maps to %s", prefix, shard)
	return ""
}

// warm reads keys until they are hot and checks that they are.
func (cl *cluster) warm(t testing.TB, keys ...string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		for _, k := range keys {
			_ = cl.c.Type(ctx, k).Err()
		}
	}
	hot := map[string]bool{}
	for _, k := range cl.c.HotKeys() {
		hot[k.Key] = k.Hot
	}
	for _, k := range keys {
		if !hot[k] {
			t.Fatalf("key %q is not hot after 20 reads: %+v", k, cl.c.HotKeys())
		}
	}
}

// collect reads every metric now.
func (cl *cluster) collect(t testing.TB) metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := cl.reader.Collect(ctx, &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// metrics are a collection's metrics by name.
type metrics map[string]metricdata.Metrics

// attrs is a wanted attribute subset: key -> value as a string.
type attrs map[string]string

// matches reports whether s has every attribute of want; a value "-" means
// the attribute must be absent.
func (want attrs) matches(s attribute.Set) bool {
	for k, v := range want {
		got, ok := s.Value(attribute.Key(k))
		if v == "-" {
			if ok {
				return false
			}
			continue
		}
		if !ok || got.Emit() != v {
			return false
		}
	}
	return true
}

// count returns the number of operations recorded by histogram name in the
// points that match want, and how many points matched.
func (ms metrics) count(t testing.TB, name string, want attrs) (n uint64, points int) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a float64 histogram", name, m.Data)
	}
	for _, p := range h.DataPoints {
		if want.matches(p.Attributes) {
			n += p.Count
			points++
		}
	}
	return n, points
}

// value returns the value of the one point of the int64 gauge or sum name
// that matches want.
func (ms metrics) value(t testing.TB, name string, want attrs) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	var pts []metricdata.DataPoint[int64]
	switch d := m.Data.(type) {
	case metricdata.Gauge[int64]:
		pts = d.DataPoints
	case metricdata.Sum[int64]:
		pts = d.DataPoints
	default:
		t.Fatalf("%s is a %T, want an int64 gauge or sum", name, m.Data)
	}
	var found []int64
	for _, p := range pts {
		if want.matches(p.Attributes) {
			found = append(found, p.Value)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d points match %v, want 1: %+v", name, len(found), want, pts)
	}
	return found[0]
}

// fvalue is value for a float64 gauge.
func (ms metrics) fvalue(t testing.TB, name string, want attrs) float64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	g, ok := m.Data.(metricdata.Gauge[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a float64 gauge", name, m.Data)
	}
	var found []float64
	for _, p := range g.DataPoints {
		if want.matches(p.Attributes) {
			found = append(found, p.Value)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d points match %v, want 1: %+v", name, len(found), want, g.DataPoints)
	}
	return found[0]
}

// server returns the server.address and server.port attributes of a
// miniredis.
func server(m *miniredis.Miniredis) attrs {
	host, port, _ := net.SplitHostPort(m.Addr())
	p, _ := strconv.Atoi(port)
	return attrs{"server.address": host, "server.port": strconv.Itoa(p)}
}

// with returns a copy of a with b's attributes added.
func (a attrs) with(b attrs) attrs {
	out := attrs{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
