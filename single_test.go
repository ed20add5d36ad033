package redshard_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// With one shard, every command goes to it as it is, and gives what a
// plain go-redis client on that server gives: keyless scripts, connection
// and server commands, commands the table does not know, malformed ones.
func TestOneShardSendsEverything(t *testing.T) {
	cl := newCluster(t, 1)
	plainMini := newCluster(t, 1) // a second server, reached without redshard
	plain := redis.NewClient(&redis.Options{Addr: plainMini.shards[0].Addr})
	defer plain.Close()

	type call struct {
		name string
		run  func(c redis.UniversalClient) string
	}
	out := func(v any, err error) string {
		return strings.TrimSpace(strings.ReplaceAll(resText(v, err), "\n", " "))
	}
	calls := []call{
		{"EVAL no keys", func(c redis.UniversalClient) string { return out(c.Eval(ctx, "return 7", nil).Result()) }},
		{"EVAL_RO no keys", func(c redis.UniversalClient) string { return out(c.EvalRO(ctx, "return 8", nil).Result()) }},
		{"EVALSHA no keys", func(c redis.UniversalClient) string {
			sha, err := c.ScriptLoad(ctx, "return 9").Result()
			if err != nil {
				return err.Error()
			}
			return out(c.EvalSha(ctx, sha, nil).Result())
		}},
		{"CLIENT SETNAME", func(c redis.UniversalClient) string { return out(c.Do(ctx, "client", "setname", "app").Result()) }},
		{"SELECT", func(c redis.UniversalClient) string { return out(c.Do(ctx, "select", 0).Result()) }},
		{"SWAPDB", func(c redis.UniversalClient) string { return out(c.Do(ctx, "swapdb", 0, 1).Result()) }},
		{"SWAPDB back", func(c redis.UniversalClient) string { return out(c.Do(ctx, "swapdb", 0, 1).Result()) }},
		{"HELLO 2", func(c redis.UniversalClient) string {
			v, err := c.Do(ctx, "hello", 2).Result()
			return out(v != nil, err)
		}},
		{"AUTH without a password set", func(c redis.UniversalClient) string { return out(c.Do(ctx, "auth", "pw").Result()) }},
		{"TIME", func(c redis.UniversalClient) string { return out(c.Time(ctx).Err() == nil, nil) }},
		{"INFO", func(c redis.UniversalClient) string { return out(c.Info(ctx, "server").Err() == nil, nil) }},
		{"unknown command", func(c redis.UniversalClient) string { return out(c.Do(ctx, "frobnicate", "x").Result()) }},
		{"malformed GET", func(c redis.UniversalClient) string { return out(c.Do(ctx, "get").Result()) }},
		{"pipeline of keyless commands", func(c redis.UniversalClient) string {
			cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Eval(ctx, "return 1", nil)
				p.Do(ctx, "client", "setname", "p")
				p.Do(ctx, "frobnicate")
				return nil
			})
			return out(cmds, err)
		}},
		{"TxPipeline of keyless commands", func(c redis.UniversalClient) string {
			cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Eval(ctx, "return 1", nil)
				p.Echo(ctx, "x")
				p.DBSize(ctx)
				return nil
			})
			return out(cmds, err)
		}},
	}
	for _, tc := range calls {
		want, got := tc.run(plain), tc.run(cl.c)
		if got != want {
			t.Errorf("%s:\n  go-redis: %s\n  redshard: %s", tc.name, want, got)
		}
	}
	if err := cl.c.Watch(ctx, func(tx *redis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "w", "1", 0)
			return nil
		})
		return err
	}); err != nil {
		t.Fatalf("Watch with no key on one shard: %v", err)
	}
	if v, _ := cl.mini["shard-0"].Get("w"); v != "1" {
		t.Fatalf("w = %q after Watch", v)
	}
}

// With one shard, Conn is a connection of the shard: SELECT sticks to it.
func TestOneShardConnKeepsState(t *testing.T) {
	cl := newCluster(t, 1)
	conn := cl.c.Conn()
	defer conn.Close()
	if err := conn.Select(ctx, 3).Err(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Set(ctx, "in3", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m := cl.mini["shard-0"]
	m.Select(3)
	if v, _ := m.Get("in3"); v != "x" {
		t.Fatalf("SET through Conn after SELECT 3 did not land in DB 3")
	}
	m.Select(0)
	if cl.c.Exists(ctx, "in3").Val() != 0 {
		t.Fatal("the client's pool saw DB 3")
	}
}

// From one shard to two at runtime: what the ring cannot answer is refused
// from the first command on the new ring; back to one, it is sent again.
// Connection state already set on the first shard's pooled connections
// stays there, as on a plain go-redis client.
func TestOneShardToMany(t *testing.T) {
	cl := newCluster(t, 1)
	if err := cl.c.Eval(ctx, "return 1", nil).Err(); err != nil {
		t.Fatalf("EVAL no keys on one shard: %v", err)
	}
	one := append([]redshard.Shard(nil), cl.shards...)
	if err := cl.c.SetShards(ctx, cl.addShard(t, "shard-1", 1)); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"EVAL no keys":               cl.c.Eval(ctx, "return 1", nil).Err(),
		"TIME":                       cl.c.Time(ctx).Err(),
		"Watch no key, WATCH inside": cl.c.Watch(ctx, func(tx *redis.Tx) error { return tx.Watch(ctx, "k").Err() }),
		"TxPipeline keyless": func() error {
			_, err := cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error { p.Eval(ctx, "return 1", nil); return nil })
			return err
		}(),
	} {
		if !errors.Is(err, redshard.ErrNotSharded) {
			t.Errorf("%s on two shards: %v, want ErrNotSharded", name, err)
		}
	}
	if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
		t.Fatal(err)
	}
	conn := cl.c.Conn() // routes: no one connection reaches both shards
	if err := conn.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("Conn on two shards: %v", err)
	}
	conn.Close()
	if err := cl.c.Do(ctx, "frobnicate").Err(); !errors.Is(err, redshard.ErrUnknownCommand) {
		t.Errorf("unknown command on two shards: %v", err)
	}
	cl.shards = one
	if err := cl.c.SetShards(ctx, one); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.Eval(ctx, "return 1", nil).Err(); err != nil {
		t.Fatalf("EVAL no keys back on one shard: %v", err)
	}
}

func resText(v any, err error) string {
	if cmds, ok := v.([]redis.Cmder); ok {
		var b strings.Builder
		for _, c := range cmds {
			b.WriteString(c.String() + ";")
		}
		v = b.String()
	}
	if err != nil {
		return "value: " + toString(v) + " error: " + err.Error()
	}
	return "value: " + toString(v)
}

func toString(v any) string { return fmt.Sprint(v) }

// On several shards, keyless commands with a defined merge fan out (SWAPDB
// swaps every shard's databases, CLIENT SETNAME names a connection of each
// shard), while the rest are refused with ErrNotSharded.
func TestManyShardsKeylessFanOut(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	for i := range 30 {
		cl.c.Set(ctx, fmt.Sprintf("k:%d", i), i, 0)
	}
	if err := cl.c.Do(ctx, "swapdb", 0, 1).Err(); err != nil {
		t.Fatalf("SWAPDB: %v", err)
	}
	for name, m := range cl.mini {
		if n := len(m.DB(1).Keys()); n == 0 || len(m.Keys()) != 0 {
			t.Fatalf("%s after SWAPDB: %d keys in DB 1, %d in DB 0", name, n, len(m.Keys()))
		}
	}
	if err := cl.c.Do(ctx, "swapdb", 0, 1).Err(); err != nil || cl.c.DBSize(ctx).Val() != 30 {
		t.Fatalf("SWAPDB back: %v, DBSIZE %d", err, cl.c.DBSize(ctx).Val())
	}
	if v, err := cl.c.Do(ctx, "client", "setname", "app").Result(); err != nil || v != "OK" {
		t.Fatalf("CLIENT SETNAME = %v, %v", v, err)
	}
	for _, args := range [][]any{{"client", "id"}, {"select", 1}, {"hello", 3}, {"time"}, {"eval", "return 1", 0}} {
		if err := cl.c.Do(ctx, args...).Err(); !errors.Is(err, redshard.ErrNotSharded) {
			t.Errorf("%v on three shards: %v, want ErrNotSharded", args, err)
		}
	}
}
