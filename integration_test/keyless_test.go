package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

const busyLib = `#!lua name=busy
redis.register_function{function_name='spin', callback=function() while true do end end, flags={'no-writes'}}
redis.register_function{function_name='seven', callback=function() return 7 end, flags={'no-writes'}}`

// keylessClient returns a redshard client over n new servers.
func keylessClient(t *testing.T, n int, so *redis.Options) (*redshard.Client, []*redistest.Server) {
	t.Helper()
	var shards []redshard.Shard
	var servers []*redistest.Server
	for i := range n {
		s := redistest.Start(t)
		servers = append(servers, s)
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("shard-%d", i), Addr: s.Addr()})
	}
	c, err := redshard.NewClient(&redshard.Options{Shards: shards, ShardOptions: so})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, servers
}

// TestOneShardKeylessLikeGoRedis: with one shard, keyless scripting,
// function, connection and server commands give what a plain go-redis
// client with the same options gives on its server, connection state
// included (one pooled connection, as there).
func TestOneShardKeylessLikeGoRedis(t *testing.T) {
	ctx := context.Background()
	so := &redis.Options{PoolSize: 1, Protocol: 3}
	c, _ := keylessClient(t, 1, so)
	plainOpt := *so
	plainOpt.Addr = redistest.Start(t).Addr()
	plain := redis.NewClient(&plainOpt)
	defer plain.Close()
	show := func(v any, err error) string { return fmt.Sprintf("%v | %v", v, err) }
	calls := []struct {
		name string
		run  func(redis.UniversalClient) string
	}{
		{"FUNCTION LOAD", func(c redis.UniversalClient) string { return show(c.FunctionLoad(ctx, busyLib).Result()) }},
		{"FCALL_RO no keys", func(c redis.UniversalClient) string { return show(c.FCallRO(ctx, "seven", nil).Result()) }},
		{"FCALL no keys", func(c redis.UniversalClient) string { return show(c.FCall(ctx, "seven", nil).Result()) }},
		{"FUNCTION LIST", func(c redis.UniversalClient) string {
			libs, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result()
			for _, l := range libs { // the server's order is its hash table's
				slices.SortFunc(l.Functions, func(a, b redis.Function) int { return strings.Compare(a.Name, b.Name) })
			}
			return show(libs, err)
		}},
		{"FUNCTION DUMP", func(c redis.UniversalClient) string { return show(c.FunctionDump(ctx).Result()) }},
		{"FUNCTION KILL idle", func(c redis.UniversalClient) string { return show(c.FunctionKill(ctx).Result()) }},
		{"EVAL no keys", func(c redis.UniversalClient) string { return show(c.Eval(ctx, "return ARGV[1]", nil, "a").Result()) }},
		{"EVALSHA no keys", func(c redis.UniversalClient) string {
			sha := c.ScriptLoad(ctx, "return 'x'").Val()
			return show(c.EvalSha(ctx, sha, nil).Result())
		}},
		{"CLIENT SETNAME", func(c redis.UniversalClient) string { return show(c.Do(ctx, "client", "setname", "app").Result()) }},
		{"CLIENT GETNAME", func(c redis.UniversalClient) string { return show(c.Do(ctx, "client", "getname").Result()) }},
		{"CLIENT SETINFO", func(c redis.UniversalClient) string {
			return show(c.Do(ctx, "client", "setinfo", "lib-name", "x").Result())
		}},
		{"SELECT 2 then SET", func(c redis.UniversalClient) string {
			return show(c.Do(ctx, "select", 2).Result()) + show(c.Set(ctx, "in2", "v", 0).Result())
		}},
		{"SELECT 0 then GET", func(c redis.UniversalClient) string {
			return show(c.Do(ctx, "select", 0).Result()) + show(c.Get(ctx, "in2").Result())
		}},
		{"SWAPDB", func(c redis.UniversalClient) string {
			return show(c.Do(ctx, "swapdb", 0, 2).Result()) + show(c.Get(ctx, "in2").Result()) + show(c.Do(ctx, "swapdb", 0, 2).Result())
		}},
		{"HELLO 3", func(c redis.UniversalClient) string {
			v, err := c.Do(ctx, "hello", 3).Result()
			m, _ := v.(map[interface{}]interface{})
			return show(m["proto"], err)
		}},
		{"AUTH", func(c redis.UniversalClient) string { return show(c.Do(ctx, "auth", "nopass").Result()) }},
		{"TIME", func(c redis.UniversalClient) string { return show(c.Time(ctx).Err() == nil, nil) }},
		{"TxPipeline of keyless commands", func(c redis.UniversalClient) string {
			cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Eval(ctx, "return 1", nil)
				p.FCallRO(ctx, "seven", nil)
				p.Do(ctx, "client", "getname")
				return nil
			})
			return show(cmds, err)
		}},
		{"Watch with no key", func(c redis.UniversalClient) string {
			return show(nil, c.Watch(ctx, func(tx *redis.Tx) error {
				_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Set(ctx, "w", "1", 0)
					return nil
				})
				return err
			}))
		}},
		{"unknown command", func(c redis.UniversalClient) string { return show(c.Do(ctx, "frobnicate").Result()) }},
	}
	for _, tc := range calls {
		want, got := tc.run(plain), tc.run(c)
		if got != want {
			t.Errorf("%s:\n  go-redis: %s\n  redshard: %s", tc.name, want, got)
		}
	}
}

// TestManyShardsKeyless: on four shards, keyless commands with a defined
// merge fan out; those whose merged answer would be a lie are refused
// with ErrNotSharded.
func TestManyShardsKeyless(t *testing.T) {
	ctx := context.Background()
	c, servers := keylessClient(t, 4, nil)
	if name, err := c.FunctionLoad(ctx, busyLib).Result(); err != nil || name != "busy" {
		t.Fatalf("FUNCTION LOAD = %q, %v", name, err)
	}
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	if err != nil || len(libs) != 1 || libs[0].Name != "busy" || len(libs[0].Functions) != 2 {
		t.Fatalf("FUNCTION LIST = %+v, %v", libs, err)
	}
	dump, err := c.FunctionDump(ctx).Result()
	if err != nil || dump == "" {
		t.Fatalf("FUNCTION DUMP = %q, %v", dump, err)
	}
	if st, err := c.FunctionStats(ctx).Result(); err != nil || st.Running() {
		t.Fatalf("FUNCTION STATS = %+v, %v", st, err)
	}
	if err := c.FunctionKill(ctx).Err(); !redis.HasErrorPrefix(err, "NOTBUSY") {
		t.Fatalf("FUNCTION KILL with nothing running: %v, want NOTBUSY", err)
	}
	if err := c.ScriptKill(ctx).Err(); !redis.HasErrorPrefix(err, "NOTBUSY") {
		t.Fatalf("SCRIPT KILL with nothing running: %v, want NOTBUSY", err)
	}
	if err := c.ConfigSet(ctx, "busy-reply-threshold", "50").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.ConfigGet(ctx, "busy-reply-threshold").Result(); err != nil || v["busy-reply-threshold"] != "50" {
		t.Fatalf("CONFIG GET = %v, %v", v, err)
	}
	// A function spinning on one shard: FUNCTION KILL finds it there.
	spin := make(chan error, 1)
	go func() { spin <- c.FCallRO(ctx, "spin", []string{"somekey"}).Err() }()
	var killErr error
	for range 200 {
		if killErr = c.FunctionKill(ctx).Err(); killErr == nil {
			break
		}
		time.Sleep(10 * time.Millisecond) // until the spin has started and passed the threshold
	}
	if killErr != nil {
		t.Fatalf("FUNCTION KILL of a running function: %v", killErr)
	}
	if err := <-spin; err == nil {
		t.Fatal("the killed FCALL succeeded")
	}
	// Replies that differ are refused, not picked.
	servers[2].Client(t).ConfigSet(ctx, "busy-reply-threshold", "60")
	if err := c.ConfigGet(ctx, "busy-reply-threshold").Err(); !errors.Is(err, redshard.ErrNotSharded) ||
		!strings.Contains(err.Error(), "differ") {
		t.Fatalf("CONFIG GET with shards that differ: %v, want ErrNotSharded", err)
	}
	if n, err := c.Do(ctx, "command", "count").Int(); err != nil || n < 100 {
		t.Fatalf("COMMAND COUNT = %d, %v", n, err)
	}
	if err := c.Do(ctx, "client", "setname", "app").Err(); err != nil {
		t.Fatalf("CLIENT SETNAME: %v", err)
	}
	// CLIENT SETINFO fans out alike (redis-server 7.2+; the test servers may be older).
	for i := range 20 {
		c.Set(ctx, fmt.Sprintf("k:%d", i), i, 0)
	}
	if err := c.Do(ctx, "swapdb", 0, 1).Err(); err != nil {
		t.Fatalf("SWAPDB: %v", err)
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("DBSIZE after SWAPDB 0 1 = %d, want 0", n)
	}
	c.Do(ctx, "swapdb", 0, 1)
	if v, err := c.Get(ctx, "k:7").Result(); err != nil || v != "7" {
		t.Fatalf("GET after swapping back = %q, %v", v, err)
	}
	if v, err := c.Do(ctx, "acl", "whoami").Result(); err != nil || v != "default" {
		t.Fatalf("ACL WHOAMI = %v, %v", v, err)
	}
	for name, err := range map[string]error{
		"INFO":             c.Info(ctx).Err(),
		"TIME":             c.Time(ctx).Err(),
		"CLIENT ID":        c.ClientID(ctx).Err(),
		"CLIENT LIST":      c.ClientList(ctx).Err(),
		"EVAL no keys":     c.Eval(ctx, "return 1", nil).Err(),
		"FCALL_RO no keys": c.FCallRO(ctx, "seven", nil).Err(),
		"SELECT":           c.Do(ctx, "select", 1).Err(),
		"HELLO":            c.Do(ctx, "hello", 3).Err(),
		"AUTH":             c.Do(ctx, "auth", "x").Err(),
		"ACL LOG":          c.Do(ctx, "acl", "log").Err(),
		"LASTSAVE":         c.LastSave(ctx).Err(),
	} {
		if !errors.Is(err, redshard.ErrNotSharded) {
			t.Errorf("%s on four shards: %v, want ErrNotSharded", name, err)
		}
	}
}
