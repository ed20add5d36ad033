package redshard_test

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redshard/redshard"
)

// TestLoadConfigSentinel: a shard may name a Sentinel-managed master
// instead of an address; its FailoverOptions carry the file's connection
// settings and Sentinel credentials, and its neighbours keep theirs.
func TestLoadConfigSentinel(t *testing.T) {
	t.Setenv("REDSHARD_TEST_PASSWORD", "s3cret")
	t.Setenv("REDSHARD_TEST_SENTINEL_PASSWORD", "watch")
	path := writeConfig(t, `{
  "shards": [
    {"name": "a", "sentinel": {"master": "mymaster", "addrs": ["127.0.0.1:26379", "sentinel-2:26379"]}, "weight": 2},
    {"name": "b", "addr": "10.0.0.2:6379"}
  ],
  "username": "app",
  "password_env": "REDSHARD_TEST_PASSWORD",
  "sentinel_username": "watcher",
  "sentinel_password_env": "REDSHARD_TEST_SENTINEL_PASSWORD",
  "db": 3,
  "tls": true,
  "pool_size": 20,
  "dial_timeout": "2s",
  "read_timeout": "250ms",
  "write_timeout": "300ms"
}`)
	opt, err := redshard.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := opt.Shards[0], opt.Shards[1]
	if a.Name != "a" || a.Addr != "" || a.Weight != 2 || a.Failover == nil {
		t.Fatalf("shard a = %+v, want a Sentinel shard of weight 2", a)
	}
	f := a.Failover
	if f.MasterName != "mymaster" || !slices.Equal(f.SentinelAddrs, []string{"127.0.0.1:26379", "sentinel-2:26379"}) {
		t.Errorf("master %q, Sentinels %q", f.MasterName, f.SentinelAddrs)
	}
	if f.Username != "app" || f.Password != "s3cret" || f.DB != 3 || f.PoolSize != 20 ||
		f.DialTimeout != 2*time.Second || f.ReadTimeout != 250*time.Millisecond || f.WriteTimeout != 300*time.Millisecond {
		t.Errorf("connection settings not copied: %+v", f)
	}
	if f.TLSConfig == nil || f.TLSConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("TLSConfig = %+v, want TLS 1.2+", f.TLSConfig)
	}
	if f.SentinelUsername != "watcher" || f.SentinelPassword != "watch" {
		t.Errorf("Sentinel credentials %q/%q, want watcher/watch", f.SentinelUsername, f.SentinelPassword)
	}
	if b.Failover != nil || b.Addr != "10.0.0.2:6379" {
		t.Errorf("shard b = %+v, want the address shard", b)
	}
	if so := opt.ShardOptions; so == nil || so.Password != "s3cret" {
		t.Errorf("ShardOptions = %+v", so)
	}
	// The template for a registry's Sentinel shards is the same.
	if fo := opt.FailoverShardOptions; fo == nil || fo.SentinelPassword != "watch" || fo.Password != "s3cret" || fo.MasterName != "" {
		t.Errorf("FailoverShardOptions = %+v", fo)
	}
	if got := a.String(); got != `a(sentinel master "mymaster")` {
		t.Errorf("String() = %q", got)
	}
}

// TestLoadConfigSentinelMinimal: without connection settings a Sentinel
// shard has go-redis's defaults and no Sentinel credentials.
func TestLoadConfigSentinelMinimal(t *testing.T) {
	opt, err := redshard.LoadConfig(writeConfig(t, `{"shards": [{"name": "a", "sentinel": {"master": "m", "addrs": ["[::1]:26379"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f := opt.Shards[0].Failover
	if f == nil || f.MasterName != "m" || !slices.Equal(f.SentinelAddrs, []string{"[::1]:26379"}) ||
		f.Password != "" || f.SentinelPassword != "" || f.TLSConfig != nil || f.PoolSize != 0 {
		t.Fatalf("Failover = %+v", f)
	}
	if opt.ShardOptions != nil {
		t.Errorf("ShardOptions = %+v, want nil (nothing set)", opt.ShardOptions)
	}
}

func TestLoadConfigSentinelErrors(t *testing.T) {
	const good = `{"name": "a", "addr": "x:1"}, `
	for _, tc := range []struct {
		name string
		body string
		want []string
		is   error
	}{
		{"addr and sentinel", `{"shards": [` + good + `{"name": "b", "addr": "x:2", "sentinel": {"master": "m", "addrs": ["s:26379"]}}]}`,
			[]string{"shards[1]:", `"b"`, `both "addr" and "sentinel"`}, redshard.ErrInvalidAddr},
		{"neither", `{"shards": [` + good + `{"name": "b", "weight": 2}]}`,
			[]string{"shards[1]:", `"b"`, `neither "addr" nor "sentinel"`}, redshard.ErrEmptyAddr},
		{"empty master", `{"shards": [` + good + `{"name": "b", "sentinel": {"master": "", "addrs": ["s:26379"]}}]}`,
			[]string{"shards[1].sentinel.master:", `"b"`, "empty"}, redshard.ErrEmptyAddr},
		{"no master", `{"shards": [{"name": "b", "sentinel": {"addrs": ["s:26379"]}}]}`,
			[]string{"shards[0].sentinel.master:", "empty"}, redshard.ErrEmptyAddr},
		{"no addrs", `{"shards": [` + good + `{"name": "b", "sentinel": {"master": "m"}}]}`,
			[]string{"shards[1].sentinel.addrs:", `"b"`, "at least one"}, redshard.ErrEmptyAddr},
		{"empty addrs", `{"shards": [` + good + `{"name": "b", "sentinel": {"master": "m", "addrs": []}}]}`,
			[]string{"shards[1].sentinel.addrs:", "at least one"}, redshard.ErrEmptyAddr},
		{"bad addr", `{"shards": [` + good + `{"name": "b", "sentinel": {"master": "m", "addrs": ["s:26379", "s:notaport"]}}]}`,
			[]string{"shards[1].sentinel.addrs[1]:", `"s:notaport"`, "port"}, redshard.ErrInvalidAddr},
		{"addr without port", `{"shards": [{"name": "b", "sentinel": {"master": "m", "addrs": ["sentinel-1"]}}]}`,
			[]string{"shards[0].sentinel.addrs[0]:", "host:port"}, redshard.ErrInvalidAddr},
		{"socket path", `{"shards": [{"name": "b", "sentinel": {"master": "m", "addrs": ["/run/sentinel.sock"]}}]}`,
			[]string{"shards[0].sentinel.addrs[0]:", "Unix socket"}, redshard.ErrInvalidAddr},
		{"unset sentinel password variable", `{"shards": [{"name": "b", "sentinel": {"master": "m", "addrs": ["s:26379"]}}], "sentinel_password_env": "REDSHARD_TEST_UNSET_VARIABLE"}`,
			[]string{"sentinel_password_env", "REDSHARD_TEST_UNSET_VARIABLE", "not set"}, nil},
		{"same master twice", `{"shards": [{"name": "a", "sentinel": {"master": "m", "addrs": ["s:26379"]}}, {"name": "b", "sentinel": {"master": "m", "addrs": ["t:26379"]}}]}`,
			[]string{"shards[1].addr", `"a"`, `"b"`, "sentinel:m"}, redshard.ErrDuplicateAddr},
		{"unknown sentinel field", `{"shards": [{"name": "b", "sentinel": {"master": "m", "addrs": ["s:26379"], "password": "x"}}]}`,
			[]string{`unknown field "password"`}, nil},
		{"duplicated sentinel field", `{"shards": [{"name": "b", "sentinel": {"master": "m", "addrs": ["s:26379"], "master": "n"}}]}`,
			[]string{"shards[0].sentinel.master", "twice"}, nil},
		{"duplicated sentinel", `{"shards": [{"name": "b", "sentinel": {"master": "m", "addrs": ["s:26379"]}, "Sentinel": {"master": "n", "addrs": ["s:26379"]}}]}`,
			[]string{"shards[0].Sentinel", "twice"}, nil},
		{"sentinel not an object", `{"shards": [{"name": "b", "sentinel": "m"}]}`,
			[]string{"sentinel", "an object"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var is []error
			if tc.is != nil {
				is = []error{tc.is, redshard.ErrInvalidOptions}
			}
			wantConfigError(t, tc.body, tc.want, is...)
		})
	}
}

// TestLoadConfigWithoutSecrets: a file naming password variables that are
// not set loads without its secrets (for tools that contact no server),
// with the same shards and settings LoadConfig gives once they are set,
// and empty passwords; every other check still holds.
func TestLoadConfigWithoutSecrets(t *testing.T) {
	const body = `{
  "shards": [
    {"name": "a", "sentinel": {"master": "mymaster", "addrs": ["127.0.0.1:26379"]}},
    {"name": "b", "addr": "10.0.0.2:6379", "weight": 2}
  ],
  "username": "app",
  "password_env": "REDSHARD_TEST_UNSET_PASSWORD",
  "sentinel_password_env": "REDSHARD_TEST_UNSET_SENTINEL_PASSWORD",
  "ring_recipe": 2
}`
	path := writeConfig(t, body)
	if _, err := redshard.LoadConfig(path); err == nil {
		t.Fatal("LoadConfig accepted a file whose password variable is not set")
	}
	opt, err := redshard.LoadConfigWithoutSecrets(path)
	if err != nil {
		t.Fatalf("LoadConfigWithoutSecrets: %v", err)
	}
	if len(opt.Shards) != 2 || opt.Shards[0].Failover == nil || opt.Shards[0].Failover.MasterName != "mymaster" ||
		opt.Shards[1].Addr != "10.0.0.2:6379" || opt.Shards[1].Weight != 2 || opt.RingRecipe != 2 {
		t.Errorf("Shards = %+v, RingRecipe %d", opt.Shards, opt.RingRecipe)
	}
	if so := opt.ShardOptions; so == nil || so.Username != "app" || so.Password != "" {
		t.Errorf("ShardOptions = %+v, want user app and no password", so)
	}
	if f := opt.Shards[0].Failover; f.Password != "" || f.SentinelPassword != "" || f.Username != "app" {
		t.Errorf("Failover = %+v, want user app and no passwords", f)
	}

	// With the variables set, LoadConfig gives the same shards and placement.
	t.Setenv("REDSHARD_TEST_UNSET_PASSWORD", "s3cret")
	t.Setenv("REDSHARD_TEST_UNSET_SENTINEL_PASSWORD", "watch")
	full, err := redshard.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Shards) != len(opt.Shards) || full.Shards[1].Addr != opt.Shards[1].Addr || full.RingRecipe != opt.RingRecipe {
		t.Errorf("LoadConfig shards %+v, without secrets %+v", full.Shards, opt.Shards)
	}

	// The other checks are LoadConfig's.
	bad := writeConfig(t, `{"shards": [{"name": "a", "addr": "x:1", "weigth": 2}], "password_env": "REDSHARD_TEST_UNSET_VARIABLE"}`)
	if _, err := redshard.LoadConfigWithoutSecrets(bad); err == nil || !strings.Contains(err.Error(), `unknown field "weigth"`) {
		t.Errorf("LoadConfigWithoutSecrets(misspelt field) = %v, want the unknown field", err)
	}
}
