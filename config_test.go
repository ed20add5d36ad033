package redshard_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redshard/redshard"
)

// writeConfig writes body to a file in a temp directory and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "redshard.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfigGood(t *testing.T) {
	t.Setenv("REDSHARD_TEST_PASSWORD", "s3cret")
	path := writeConfig(t, `{
  "shards": [
    {"name": "cache-a", "addr": "10.0.0.1:6379", "weight": 1},
    {"name": "cache-b", "addr": "10.0.0.2:6379", "weight": 2},
    {"name": "cache-c", "addr": "10.0.0.3:6379"}
  ],
  "vnodes_per_weight": 512,
  "username": "app",
  "password_env": "REDSHARD_TEST_PASSWORD",
  "db": 3,
  "tls": true,
  "pool_size": 20,
  "dial_timeout": "2s",
  "read_timeout": "250ms",
  "health": {"interval": "200ms", "failure_threshold": 3, "failover": true, "gutter_ttl": "10s"},
  "hot_keys": {"mitigation": "split", "max_staleness": "2s", "copies": 2,
               "detector": {"window": "5s", "min_rate": 50, "min_share": 0.02}}
}`)
	opt, err := redshard.LoadConfig(path)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := []redshard.Shard{
		{Name: "cache-a", Addr: "10.0.0.1:6379", Weight: 1},
		{Name: "cache-b", Addr: "10.0.0.2:6379", Weight: 2},
		{Name: "cache-c", Addr: "10.0.0.3:6379"},
	}
	if len(opt.Shards) != len(want) {
		t.Fatalf("Shards = %v, want %v", opt.Shards, want)
	}
	for i := range want {
		if g := opt.Shards[i]; g.Name != want[i].Name || g.Addr != want[i].Addr || g.Weight != want[i].Weight {
			t.Errorf("Shards[%d] = %v weight %v, want %v weight %v", i, g, g.Weight, want[i], want[i].Weight)
		}
	}
	so := opt.ShardOptions
	switch {
	case opt.VnodesPerWeight != 512:
		t.Errorf("VnodesPerWeight = %d", opt.VnodesPerWeight)
	case so == nil:
		t.Fatal("ShardOptions is nil")
	case so.Username != "app" || so.Password != "s3cret" || so.DB != 3 || so.PoolSize != 20:
		t.Errorf("ShardOptions user %q password %q db %d pool %d", so.Username, so.Password, so.DB, so.PoolSize)
	case so.TLSConfig == nil:
		t.Error("tls: true gave no TLSConfig")
	case so.DialTimeout != 2*time.Second || so.ReadTimeout != 250*time.Millisecond || so.WriteTimeout != 0:
		t.Errorf("timeouts %v %v %v", so.DialTimeout, so.ReadTimeout, so.WriteTimeout)
	}
	h := opt.Health
	if h == nil || h.Interval != 200*time.Millisecond || h.FailureThreshold != 3 || !h.Failover || h.GutterTTL != 10*time.Second || h.Timeout != 0 {
		t.Errorf("Health = %+v", h)
	}
	hk := opt.HotKeys
	if hk == nil || hk.Mitigation != redshard.SplitCopies || hk.MaxStaleness != 2*time.Second || hk.Copies != 2 ||
		hk.Detector == nil || hk.Detector.Window != 5*time.Second || hk.Detector.MinRate != 50 || hk.Detector.MinShare != 0.02 {
		t.Errorf("HotKeys = %+v", hk)
	}

	// The options are what NewClient accepts.
	c, err := redshard.NewClient(opt)
	if err != nil {
		t.Fatalf("NewClient(LoadConfig(...)): %v", err)
	}
	_ = c.Close()
}

func TestLoadConfigMinimal(t *testing.T) {
	opt, err := redshard.LoadConfig(writeConfig(t, `{"shards": [{"name": "a", "addr": "127.0.0.1:7001"}]}`))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if opt.ShardOptions != nil || opt.Health != nil || opt.HotKeys != nil || opt.VnodesPerWeight != 0 {
		t.Errorf("defaults not left zero: %+v", opt)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want []string // substrings of the error, besides the file name
		is   error    // sentinel the error must wrap, if any
	}{
		{"malformed JSON", `{"shards": [{"name": "a", "addr": "x:1",}]}`, []string{"malformed JSON", "line 1"}, nil},
		{"truncated", `{"shards": [`, []string{"malformed JSON"}, nil},
		{"empty file", ``, []string{"empty file"}, nil},
		{"trailing data", `{"shards": [{"name": "a", "addr": "x:1"}]} {}`, []string{"after the JSON object"}, nil},
		{"unknown field", `{"shards": [{"name": "a", "addr": "x:1"}], "handof_window": "1m"}`, []string{`unknown field "handof_window"`}, nil},
		{"unknown nested field", `{"shards": [{"name": "a", "addr": "x:1"}], "health": {"intervl": "1s"}}`, []string{`unknown field "intervl"`}, nil},
		{"wrong type", `{"shards": [{"name": "a", "addr": "x:1", "weight": "2"}]}`, []string{"weight", "a number"}, nil},
		{"bad duration", `{"shards": [{"name": "a", "addr": "x:1"}], "health": {"interval": "5 parsecs"}}`, []string{"health.interval", `"5 parsecs"`, "not a duration"}, nil},
		{"duration as number", `{"shards": [{"name": "a", "addr": "x:1"}], "health": {"interval": 600}}`, []string{"interval", "a string"}, nil},
		{"negative duration", `{"shards": [{"name": "a", "addr": "x:1"}], "hot_keys": {"mitigation": "split", "max_staleness": "-1s"}}`, []string{"hot_keys.max_staleness", "negative"}, nil},
		{"missing shards", `{"vnodes_per_weight": 10}`, []string{"shards", "required"}, redshard.ErrNoShards},
		{"empty shards", `{"shards": []}`, []string{"shards"}, redshard.ErrNoShards},
		{"duplicate name", `{"shards": [{"name": "a", "addr": "x:1"}, {"name": "a", "addr": "x:2"}]}`, []string{"shards", `"a"`}, redshard.ErrDuplicateName},
		{"empty addr", `{"shards": [{"name": "a"}]}`, []string{"shards", `"a"`}, redshard.ErrEmptyAddr},
		{"negative weight", `{"shards": [{"name": "a", "addr": "x:1", "weight": -1}]}`, []string{"shards"}, redshard.ErrInvalidWeight},
		{"negative vnodes", `{"shards": [{"name": "a", "addr": "x:1"}], "vnodes_per_weight": -5}`, []string{"vnodes_per_weight"}, redshard.ErrInvalidVnodes},
		{"bad mitigation", `{"shards": [{"name": "a", "addr": "x:1"}], "hot_keys": {"mitigation": "magic"}}`, []string{"hot_keys.mitigation", `"magic"`}, redshard.ErrInvalidHotKeyOptions},
		{"too many copies", `{"shards": [{"name": "a", "addr": "x:1"}], "hot_keys": {"mitigation": "split", "copies": 3}}`, []string{"hot_keys", "Copies"}, redshard.ErrInvalidHotKeyOptions},
		{"bad detector", `{"shards": [{"name": "a", "addr": "x:1"}], "hot_keys": {"mitigation": "split", "detector": {"min_share": 2}}}`, []string{"hot_keys.detector"}, redshard.ErrInvalidHotKeyOptions},
		{"heartbeat too fast", `{"shards": [{"name": "a", "addr": "x:1"}], "health": {"interval": "1us"}}`, []string{"health.interval", "minimum"}, redshard.ErrInvalidHealthOptions},
		{"negative threshold", `{"shards": [{"name": "a", "addr": "x:1"}], "health": {"failure_threshold": -1}}`, []string{"health.failure_threshold"}, redshard.ErrInvalidHealthOptions},
		{"sub-ms gutter TTL", `{"shards": [{"name": "a", "addr": "x:1"}], "health": {"failover": true, "gutter_ttl": "10us"}}`, []string{"health.gutter_ttl"}, redshard.ErrInvalidHealthOptions},
		{"handoff window is gone", `{"shards": [{"name": "a", "addr": "x:1"}], "handoff_window": "1m"}`, []string{`unknown field "handoff_window"`}, nil},
		{"cache beyond memory", `{"shards": [{"name": "a", "addr": "x:1"}], "hot_keys": {"mitigation": "local-cache", "cache_bytes": 9223372036854775807}}`, []string{"hot_keys.cache_bytes", "memory"}, redshard.ErrInvalidHotKeyOptions},
		{"duplicated shard field", `{"shards": [{"name": "a", "addr": "x:1", "addr": "x:2"}]}`, []string{"shards[0].addr", "twice", "line 1"}, nil},
		{"duplicated top-level field", "{\"shards\": [{\"name\": \"a\", \"addr\": \"x:1\"}],\n \"db\": 1,\n \"db\": 2}", []string{"db", "twice", "line 3"}, nil},
		{"duplicated nested field", `{"shards": [{"name": "a", "addr": "x:1"}], "hot_keys": {"mitigation": "split", "detector": {"window": "1s", "window": "2s"}}}`, []string{"hot_keys.detector.window", "twice"}, nil},
		{"duplicated field of a later shard", `{"shards": [{"name": "a", "addr": "x:1"}, {"name": "b", "addr": "x:2", "weight": 1, "weight": 2}]}`, []string{"shards[1].weight", "twice"}, nil},
		{"duplicated field in another case", `{"shards": [{"name": "a", "addr": "x:1", "Addr": "x:2"}]}`, []string{"shards[0].Addr", "twice"}, nil},
		{"duplicated field of a nested list's object", `{"shards": [{"name": "a", "addr": "x:1"}, {"name": "b", "name": "c", "addr": "x:2"}]}`, []string{"shards[1].name", "twice"}, nil},
		{"duplicated list", `{"shards": [{"name": "a", "addr": "x:1"}], "shards": [{"name": "b", "addr": "x:2"}]}`, []string{"shards", "twice"}, nil},
		{"explicit weight 0", `{"shards": [{"name": "a", "addr": "x:1"}, {"name": "b", "addr": "x:2", "weight": 0}]}`, []string{"shards[1].weight", `"b"`, "drain", "--remove", "docs/operations.md"}, redshard.ErrInvalidWeight},
		{"unset password variable", `{"shards": [{"name": "a", "addr": "x:1"}], "password_env": "REDSHARD_TEST_UNSET_VARIABLE"}`, []string{"password_env", "REDSHARD_TEST_UNSET_VARIABLE", "not set"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var is []error
			if tc.is != nil {
				is = append(is, tc.is)
			}
			wantConfigError(t, tc.body, tc.want, is...)
		})
	}
}

// wantConfigError checks that LoadConfig refuses a file holding body with
// an error that names the file and mentions each of want, and wraps each
// of is.
func wantConfigError(t *testing.T, body string, want []string, is ...error) {
	t.Helper()
	path := writeConfig(t, body)
	opt, err := redshard.LoadConfig(path)
	if err == nil {
		t.Fatalf("LoadConfig = %+v, want an error", opt)
	}
	msg := err.Error()
	for _, w := range append([]string{path}, want...) {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
	for _, e := range is {
		if !errors.Is(err, e) {
			t.Errorf("error %q does not wrap %v", msg, e)
		}
	}
}

// TestLoadConfigAccepts: a byte-order mark, the same field name in two
// different objects, and a weight left out (the default 1) are all fine.
func TestLoadConfigAccepts(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"byte-order mark", "\uFEFF" + `{"shards": [{"name": "a", "addr": "127.0.0.1:7001"}, {"name": "b", "addr": "127.0.0.1:7002"}]}`},
		{"same names in sibling objects", `{"shards": [{"name": "a", "addr": "127.0.0.1:7001", "weight": 2}, {"name": "b", "addr": "127.0.0.1:7002"}],
			"health": {"interval": "1s", "timeout": "1s"}, "hot_keys": {"mitigation": "split", "detector": {"window": "1s"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := redshard.LoadConfig(writeConfig(t, tc.body))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if len(opt.Shards) != 2 || opt.Shards[0].Name != "a" || opt.Shards[1].Weight != 0 {
				t.Errorf("Shards = %+v", opt.Shards)
			}
		})
	}
}

// TestLoadConfigDeepNesting: a file nested far deeper than the format ever
// is (100,000 '[' or '{') gets a clear error naming the depth and where it
// is exceeded, at once. The duplicate-field check used to rebuild each
// element's path at every depth, which is quadratic: such a file did not
// return for minutes. The test asserts the error; it must simply finish.
func TestLoadConfigDeepNesting(t *testing.T) {
	const n = 100_000
	for _, tc := range []struct{ name, body string }{
		{"lists", strings.Repeat("[", n)},
		{"closed lists", strings.Repeat("[", n) + strings.Repeat("]", n)},
		{"objects", strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)},
		{"inside shards", `{"shards": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`},
		{"lists of objects", strings.Repeat(`[{"a":`, n)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantConfigError(t, tc.body, []string{"nested deeper than", "line 1, column"})
		})
	}
	// Brackets inside strings are not nesting.
	opt, err := redshard.LoadConfig(writeConfig(t, `{"shards": [{"name": "`+strings.Repeat("[{", n)+`", "addr": "127.0.0.1:7001"}]}`))
	if err != nil {
		t.Fatalf("LoadConfig(brackets in a name): %v", err)
	}
	if len(opt.Shards) != 1 || len(opt.Shards[0].Name) != 2*n {
		t.Errorf("Shards = %d, name of %d bytes; want 1 shard named by %d bytes", len(opt.Shards), len(opt.Shards[0].Name), 2*n)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.json")
	_, err := redshard.LoadConfig(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadConfig(missing) = %v, want a not-exist error naming the file", err)
	}
}
