package redshard_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
)

// TestOptionsValidate: every bad value is an error that names its field and
// matches ErrInvalidOptions and the field's own sentinel; NewClient refuses
// exactly what Validate refuses.
func TestOptionsValidate(t *testing.T) {
	shards := []redshard.Shard{{Name: "a", Addr: "127.0.0.1:1"}, {Name: "b", Addr: "127.0.0.1:2"}}
	with := func(f func(o *redshard.Options)) *redshard.Options {
		o := &redshard.Options{Shards: append([]redshard.Shard(nil), shards...)}
		f(o)
		return o
	}
	tests := []struct {
		name  string
		opt   *redshard.Options
		kind  error
		field string
	}{
		{"no shards", with(func(o *redshard.Options) { o.Shards = nil }), redshard.ErrNoShards, "Shards"},
		{"empty name", with(func(o *redshard.Options) { o.Shards[1].Name = "" }), redshard.ErrEmptyName, "Shards[1].Name"},
		{"duplicate name", with(func(o *redshard.Options) { o.Shards[1].Name = "a" }), redshard.ErrDuplicateName, "Shards[1].Name"},
		{"empty addr", with(func(o *redshard.Options) { o.Shards[0].Addr = "" }), redshard.ErrEmptyAddr, "Shards[0].Addr"},
		{"duplicate addr", with(func(o *redshard.Options) { o.Shards[1].Addr = o.Shards[0].Addr }), redshard.ErrDuplicateAddr, "Shards[1].Addr"},
		{"NaN weight", with(func(o *redshard.Options) { o.Shards[0].Weight = math.NaN() }), redshard.ErrInvalidWeight, "Shards[0].Weight"},
		{"negative weight", with(func(o *redshard.Options) { o.Shards[0].Weight = -1 }), redshard.ErrInvalidWeight, "Shards[0].Weight"},
		{"weight overflowing the ring", with(func(o *redshard.Options) { o.Shards[0].Weight = 1e12 }), redshard.ErrInvalidWeight, "Shards"},
		{"negative vnodes", with(func(o *redshard.Options) { o.VnodesPerWeight = -1 }), redshard.ErrInvalidVnodes, "VnodesPerWeight"},
		{"1µs heartbeat", with(func(o *redshard.Options) { o.Health = &redshard.HealthOptions{Interval: time.Microsecond} }), redshard.ErrInvalidHealthOptions, "Health.Interval"},
		{"negative heartbeat", with(func(o *redshard.Options) { o.Health = &redshard.HealthOptions{Interval: -time.Second} }), redshard.ErrInvalidHealthOptions, "Health.Interval"},
		{"1µs heartbeat timeout", with(func(o *redshard.Options) { o.Health = &redshard.HealthOptions{Timeout: time.Microsecond} }), redshard.ErrInvalidHealthOptions, "Health.Timeout"},
		{"negative failure threshold", with(func(o *redshard.Options) { o.Health = &redshard.HealthOptions{FailureThreshold: -1} }), redshard.ErrInvalidHealthOptions, "Health.FailureThreshold"},
		{"negative recovery threshold", with(func(o *redshard.Options) { o.Health = &redshard.HealthOptions{RecoveryThreshold: -2} }), redshard.ErrInvalidHealthOptions, "Health.RecoveryThreshold"},
		{"sub-ms gutter TTL", with(func(o *redshard.Options) {
			o.Health = &redshard.HealthOptions{Failover: true, GutterTTL: time.Microsecond}
		}), redshard.ErrInvalidHealthOptions, "Health.GutterTTL"},
		{"failover without heartbeat", with(func(o *redshard.Options) { o.Health = &redshard.HealthOptions{Disable: true, Failover: true} }), redshard.ErrInvalidHealthOptions, "Health.Failover"},
		{"no mitigation", with(func(o *redshard.Options) { o.HotKeys = &redshard.HotKeyOptions{} }), redshard.ErrInvalidHotKeyOptions, "HotKeys.Mitigation"},
		{"CacheBytes beyond memory", with(func(o *redshard.Options) {
			o.HotKeys = &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, CacheBytes: math.MaxInt64}
		}), redshard.ErrInvalidHotKeyOptions, "HotKeys.CacheBytes"},
		{"negative CacheBytes", with(func(o *redshard.Options) {
			o.HotKeys = &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, CacheBytes: -1}
		}), redshard.ErrInvalidHotKeyOptions, "HotKeys.CacheBytes"},
		{"more copies than shards", with(func(o *redshard.Options) {
			o.HotKeys = &redshard.HotKeyOptions{Mitigation: redshard.SplitCopies, Copies: 3}
		}), redshard.ErrInvalidHotKeyOptions, "HotKeys.Copies"},
		{"NaN detector rate", with(func(o *redshard.Options) {
			o.HotKeys = &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, Detector: &hotkey.Config{MinRate: math.NaN()}}
		}), redshard.ErrInvalidHotKeyOptions, "HotKeys.Detector"},
		{"negative lease", with(func(o *redshard.Options) { o.Load = &redshard.LoadOptions{Lease: -1} }), redshard.ErrInvalidLoadOptions, "Load.Lease"},
		{"1ns poll interval", with(func(o *redshard.Options) { o.Load = &redshard.LoadOptions{PollInterval: 1} }), redshard.ErrInvalidLoadOptions, "Load.PollInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opt.Validate()
			if !errors.Is(err, tt.kind) || !errors.Is(err, redshard.ErrInvalidOptions) {
				t.Fatalf("Validate() = %v; want an error matching %v and ErrInvalidOptions", err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("Validate() = %q; want it to name %s", err, tt.field)
			}
			c, nerr := redshard.NewClient(tt.opt)
			if c != nil || nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("NewClient = %v, %v; want nil and Validate's error", c, nerr)
			}
		})
	}
	if err := (*redshard.Options)(nil).Validate(); !errors.Is(err, redshard.ErrNilOptions) {
		t.Errorf("nil Options: Validate() = %v, want ErrNilOptions", err)
	}
	if err := with(func(*redshard.Options) {}).Validate(); err != nil {
		t.Errorf("valid Options: Validate() = %v", err)
	}
}

// TestRebalanceOptionsValidate: rates that used to panic (non-positive
// ticker interval) are errors, before anything is scanned.
func TestRebalanceOptionsValidate(t *testing.T) {
	cl := newCluster(t, 1, 1)
	for _, rate := range []float64{math.Inf(1), math.NaN(), 1e12, 1e-300, -1} {
		opt := redshard.RebalanceOptions{Rate: rate}
		err := opt.Validate()
		if !errors.Is(err, redshard.ErrInvalidRebalanceOptions) || !strings.Contains(err.Error(), "Rate") {
			t.Errorf("Rate %v: Validate() = %v; want ErrInvalidRebalanceOptions naming Rate", rate, err)
		}
		rep, rerr := cl.c.Rebalance(t.Context(), opt)
		if !errors.Is(rerr, redshard.ErrInvalidRebalanceOptions) || rep.Scanned != 0 {
			t.Errorf("Rate %v: Rebalance = %+v, %v; want ErrInvalidRebalanceOptions and nothing scanned", rate, rep, rerr)
		}
	}
	for _, n := range []int{-1, 1 << 21} {
		if err := (redshard.RebalanceOptions{BatchSize: n}).Validate(); !errors.Is(err, redshard.ErrInvalidRebalanceOptions) {
			t.Errorf("BatchSize %d: Validate() = %v", n, err)
		}
	}
	for _, rate := range []float64{0, 0.5, 1e9} {
		if err := (redshard.RebalanceOptions{Rate: rate}).Validate(); err != nil {
			t.Errorf("Rate %v: Validate() = %v, want nil", rate, err)
		}
	}
}

// TestOptionsAddr: an Addr that cannot be dialled is ErrInvalidAddr naming
// the shard, the field and the value, from Validate and NewClient alike;
// host:port, [v6]:port, host names and Unix socket paths are accepted.
func TestOptionsAddr(t *testing.T) {
	for _, addr := range []string{"not an address", "127.0.0.1", "::1", "10.0.0.1:", "10.0.0.1:port", "10.0.0.1:70000", "10.0.0.1:0", "bad host:6379", "[::1]", "a..b:6379"} {
		t.Run(addr, func(t *testing.T) {
			opt := &redshard.Options{Shards: []redshard.Shard{{Name: "a", Addr: "127.0.0.1:1"}, {Name: "b", Addr: addr}}}
			err := opt.Validate()
			if !errors.Is(err, redshard.ErrInvalidAddr) || !errors.Is(err, redshard.ErrInvalidOptions) {
				t.Fatalf("Validate() = %v; want ErrInvalidAddr", err)
			}
			for _, w := range []string{"Shards[1].Addr", `"b"`, strconv.Quote(addr)} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q; want it to name %s", err, w)
				}
			}
			if c, nerr := redshard.NewClient(opt); c != nil || !errors.Is(nerr, redshard.ErrInvalidAddr) {
				t.Errorf("NewClient = %v, %v; want ErrInvalidAddr", c, nerr)
			}
		})
	}
	for _, s := range []redshard.Shard{
		{Name: "b", Addr: "10.0.0.2:6379"},
		{Name: "b", Addr: "[::1]:6380"},
		{Name: "b", Addr: "[fe80::1%eth0]:6380"},
		{Name: "b", Addr: "cache-b.internal:6379"},
		{Name: "b", Addr: "redis_b:6379"},
		{Name: "b", Addr: "/run/redis/redis.sock"},
		{Name: "b", Addr: "redis.sock", Options: &redis.Options{Network: "unix"}},
		{Name: "b", Failover: &redis.FailoverOptions{MasterName: "b", SentinelAddrs: []string{"10.0.0.9:26379"}}},
	} {
		opt := &redshard.Options{Shards: []redshard.Shard{{Name: "a", Addr: "127.0.0.1:1"}, s}}
		if err := opt.Validate(); err != nil {
			t.Errorf("%v: Validate() = %v, want nil", s, err)
		}
	}
}
