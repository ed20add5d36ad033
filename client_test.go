package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

var ctx = context.Background()

func TestSingleKeyGoesToOwner(t *testing.T) {
	cl := newCluster(t, 1, 1, 2)
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("user:%d", i)
		if err := cl.c.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		owner, _ := cl.c.ShardFor(k)
		for name, m := range cl.mini {
			if got := m.Exists(k); got != (name == owner) {
				t.Fatalf("key %s: on %s = %v, owner is %s", k, name, got, owner)
			}
		}
		if got, err := cl.c.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v", k, got, err)
		}
	}
	if err := cl.c.Get(ctx, "missing").Err(); err != redis.Nil {
		t.Fatalf("GET missing: err = %v, want redis.Nil", err)
	}
}

func TestHashTagsColocate(t *testing.T) {
	cl := newCluster(t, 1, 1, 1, 1)
	owner, _ := cl.c.ShardFor("{user:42}")
	for _, k := range []string{"{user:42}.profile", "{user:42}.friends", "x{user:42}y"} {
		if got, _ := cl.c.ShardFor(k); got != owner {
			t.Errorf("ShardFor(%q) = %s, want %s", k, got, owner)
		}
	}
	if err := cl.c.Set(ctx, "{user:42}.a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.Rename(ctx, "{user:42}.a", "{user:42}.b").Err(); err != nil {
		t.Fatalf("RENAME within a hash tag: %v", err)
	}
	if got := cl.c.Get(ctx, "{user:42}.b").Val(); got != "1" {
		t.Fatalf("after RENAME got %q", got)
	}
}

func TestSplitCommandsMergeInCallerOrder(t *testing.T) {
	cl := newCluster(t, 1, 1, 1, 1)
	var keys []string
	var kv []interface{}
	for i := 0; i < 40; i++ {
		k := fmt.Sprintf("k%d", i)
		keys = append(keys, k)
		kv = append(kv, k, fmt.Sprintf("v%d", i))
	}
	owners := map[string]bool{}
	for _, k := range keys {
		o, _ := cl.c.ShardFor(k)
		owners[o] = true
	}
	if len(owners) < 4 {
		t.Fatalf("test keys cover only %d shards", len(owners))
	}
	if err := cl.c.MSet(ctx, kv...).Err(); err != nil {
		t.Fatalf("MSET: %v", err)
	}
	query := append(slices.Clone(keys), "nope", keys[3])
	vals, err := cl.c.MGet(ctx, query...).Result()
	if err != nil {
		t.Fatalf("MGET: %v", err)
	}
	for i, k := range query {
		want := interface{}(nil)
		if k != "nope" {
			want = "v" + k[1:]
		}
		if vals[i] != want {
			t.Fatalf("MGET[%d] (%s) = %v, want %v", i, k, vals[i], want)
		}
	}
	if n := cl.c.Exists(ctx, keys[0], keys[1], "nope", keys[0]).Val(); n != 3 {
		t.Fatalf("EXISTS = %d, want 3 (duplicates count)", n)
	}
	if n := cl.c.Touch(ctx, keys[:10]...).Val(); n != 10 {
		t.Fatalf("TOUCH = %d, want 10", n)
	}
	if n := cl.c.Unlink(ctx, keys[:5]...).Val(); n != 5 {
		t.Fatalf("UNLINK = %d, want 5", n)
	}
	if n := cl.c.Del(ctx, keys...).Val(); n != 35 {
		t.Fatalf("DEL = %d, want 35", n)
	}
	if n := cl.c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("DBSIZE after DEL = %d", n)
	}
	// Do() goes through the same routing.
	if err := cl.c.Do(ctx, "mset", "a1", "x", "b2", "y", "c3", "z").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := cl.c.Do(ctx, "mget", "c3", "a1", "b2").Slice()
	if err != nil || !slices.Equal(got, []interface{}{"z", "x", "y"}) {
		t.Fatalf("Do MGET = %v, %v", got, err)
	}
}

func TestCrossShardRefusedBeforeSending(t *testing.T) {
	cl := newCluster(t, 1, 1)
	a, b := cl.twoShardKeys(t)
	cl.c.Set(ctx, a, "1", 0)
	cl.c.SAdd(ctx, b, "m")
	calls := []struct {
		name string
		cmd  func() error
	}{
		{"RENAME", func() error { return cl.c.Rename(ctx, a, b).Err() }},
		{"SMOVE", func() error { return cl.c.SMove(ctx, a, b, "m").Err() }},
		{"SINTERSTORE", func() error { return cl.c.SInterStore(ctx, a, b).Err() }},
		{"MSETNX", func() error { return cl.c.MSetNX(ctx, a, "1", b, "2").Err() }},
		{"EVAL", func() error { return cl.c.Eval(ctx, "return 1", []string{a, b}).Err() }},
		{"BLPOP", func() error { return cl.c.BLPop(ctx, 0, a, b).Err() }},
		{"LMOVE", func() error { return cl.c.LMove(ctx, a, b, "left", "right").Err() }},
		{"PFMERGE", func() error { return cl.c.PFMerge(ctx, a, b).Err() }},
		{"MSETEX NX", func() error {
			return cl.c.MSetEX(ctx, redis.MSetEXArgs{Condition: redis.NX}, a, "1", b, "2").Err()
		}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			before := totalCommands(cl)
			err := tc.cmd()
			if !errors.Is(err, redshard.ErrCrossShard) {
				t.Fatalf("err = %v, want ErrCrossShard", err)
			}
			if after := totalCommands(cl); after != before {
				t.Fatalf("%d commands reached the shards", after-before)
			}
		})
	}
}

func totalCommands(cl *cluster) int {
	n := 0
	for _, m := range cl.mini {
		n += m.CommandCount()
	}
	return n
}

func TestKeylessCommands(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	for i := 0; i < 30; i++ {
		cl.c.Set(ctx, fmt.Sprintf("key:%d", i), i, 0)
	}
	if got := cl.c.Ping(ctx).Val(); got != "PONG" {
		t.Errorf("PING = %q", got)
	}
	if got := cl.c.DBSize(ctx).Val(); got != 30 {
		t.Errorf("DBSIZE = %d, want 30", got)
	}
	keys := cl.c.Keys(ctx, "key:*").Val()
	if len(keys) != 30 {
		t.Errorf("KEYS returned %d keys, want 30", len(keys))
	}
	if k, err := cl.c.RandomKey(ctx).Result(); err != nil || !slices.Contains(keys, k) {
		t.Errorf("RANDOMKEY = %q, %v", k, err)
	}
	sha, err := cl.c.ScriptLoad(ctx, "return 7").Result()
	if err != nil {
		t.Fatalf("SCRIPT LOAD: %v", err)
	}
	if ex := cl.c.ScriptExists(ctx, sha, "0000000000000000000000000000000000000000").Val(); !slices.Equal(ex, []bool{true, false}) {
		t.Errorf("SCRIPT EXISTS = %v", ex)
	}
	// The script is on every shard, so EVALSHA works for any key.
	for i := 0; i < 10; i++ {
		if n, err := cl.c.EvalSha(ctx, sha, []string{fmt.Sprintf("key:%d", i)}).Int(); err != nil || n != 7 {
			t.Fatalf("EVALSHA: %d, %v", n, err)
		}
	}
	if err := cl.c.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("FLUSHDB: %v", err)
	}
	if got := cl.c.DBSize(ctx).Val(); got != 0 {
		t.Errorf("DBSIZE after FLUSHDB = %d", got)
	}
	if err := cl.c.RandomKey(ctx).Err(); err != redis.Nil {
		t.Errorf("RANDOMKEY on empty shards: %v, want redis.Nil", err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"INFO", cl.c.Info(ctx).Err()},
		{"CLIENT LIST", cl.c.ClientList(ctx).Err()},
		{"EVAL no keys", cl.c.Eval(ctx, "return 1", nil).Err()},
		{"TIME", cl.c.Time(ctx).Err()},
	} {
		if !errors.Is(tc.err, redshard.ErrNotSharded) {
			t.Errorf("%s: err = %v, want ErrNotSharded", tc.name, tc.err)
		}
	}
	if err := cl.c.Do(ctx, "frobnicate", "x").Err(); !errors.Is(err, redshard.ErrUnknownCommand) {
		t.Errorf("unknown command: err = %v, want ErrUnknownCommand", err)
	}
}

func TestScanVisitsEveryShard(t *testing.T) {
	cl := newCluster(t, 1, 2, 1)
	want := map[string]bool{}
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("s:%d", i)
		want[k] = true
		cl.c.Set(ctx, k, i, 0)
	}
	cl.c.Set(ctx, "other", 1, 0)
	got := map[string]bool{}
	iter := cl.c.Scan(ctx, 0, "s:*", 7).Iterator()
	for iter.Next(ctx) {
		if got[iter.Val()] {
			t.Fatalf("SCAN returned %s twice", iter.Val())
		}
		got[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("SCAN found %d keys, want %d", len(got), len(want))
	}
	if err := cl.c.Scan(ctx, 9<<48, "", 10).Err(); err == nil {
		t.Fatal("SCAN with a cursor naming shard #9 of 3 succeeded")
	}
}

func TestPipelineSplitsAndKeepsOrder(t *testing.T) {
	cl := newCluster(t, 1, 1, 1, 1)
	a, b := cl.twoShardKeys(t)
	cmds, err := cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 50; i++ {
			p.Set(ctx, fmt.Sprintf("p:%d", i), i, 0)
		}
		p.MGet(ctx, "p:1", "p:2", "p:3", "p:40")
		p.Rename(ctx, a, b) // cross-shard: fails alone
		p.Incr(ctx, "p:7")
		p.DBSize(ctx)
		p.Get(ctx, "nope")
		return nil
	})
	if err == nil {
		t.Fatal("pipeline with a failing command returned no error")
	}
	if len(cmds) != 55 {
		t.Fatalf("got %d cmds", len(cmds))
	}
	mget := cmds[50].(*redis.SliceCmd).Val()
	if !slices.Equal(mget, []interface{}{"1", "2", "3", "40"}) {
		t.Fatalf("MGET in pipeline = %v", mget)
	}
	if !errors.Is(cmds[51].Err(), redshard.ErrCrossShard) {
		t.Fatalf("RENAME in pipeline: %v", cmds[51].Err())
	}
	if !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("pipeline error = %v, want the first failing command's", err)
	}
	if n := cmds[52].(*redis.IntCmd).Val(); n != 8 {
		t.Fatalf("INCR = %d", n)
	}
	if n := cmds[53].(*redis.IntCmd).Val(); n != 50 {
		t.Fatalf("DBSIZE in pipeline = %d", n)
	}
	if cmds[54].Err() != redis.Nil {
		t.Fatalf("GET nope: %v", cmds[54].Err())
	}
}

func TestTxPipeline(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	cmds, err := cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "{acct:1}.balance", 100, 0)
		p.IncrBy(ctx, "{acct:1}.balance", 5)
		p.LPush(ctx, "{acct:1}.log", "deposit")
		p.Ping(ctx)
		return nil
	})
	if err != nil {
		t.Fatalf("TxPipelined on one shard: %v", err)
	}
	if n := cmds[1].(*redis.IntCmd).Val(); n != 105 {
		t.Fatalf("INCRBY in tx = %d", n)
	}
	a, b := cl.twoShardKeys(t)
	before := totalCommands(cl)
	_, err = cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, a, 1, 0)
		p.Set(ctx, b, 1, 0)
		return nil
	})
	if !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("cross-shard tx: %v", err)
	}
	if totalCommands(cl) != before {
		t.Fatal("a refused transaction sent commands")
	}
	if cl.c.Exists(ctx, a, b).Val() != 0 {
		t.Fatal("a refused transaction wrote keys")
	}
}

func TestWatch(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	key := "{cart:9}.total"
	cl.c.Set(ctx, key, 10, 0)
	err := cl.c.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Get(ctx, key).Int()
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, n*2, 0)
			return nil
		})
		return err
	}, key, "{cart:9}.items")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if got := cl.c.Get(ctx, key).Val(); got != "20" {
		t.Fatalf("after Watch got %s", got)
	}
	a, b := cl.twoShardKeys(t)
	if err := cl.c.Watch(ctx, func(*redis.Tx) error { return nil }, a, b); !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("Watch on two shards: %v", err)
	}
	err = cl.c.Watch(ctx, func(tx *redis.Tx) error {
		return tx.Get(ctx, b).Err() // b lives elsewhere
	}, a)
	if !errors.Is(err, redshard.ErrCrossShard) {
		t.Fatalf("command on another shard inside Watch: %v", err)
	}
}

// Watch with no key binds fn to no shard: its commands and transactions are
// routed as the Client's, a WATCH inside it is refused, and a transaction of
// PINGs and ECHOs (no key) runs on any shard.
func TestWatchNoKeyRoutes(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	a, b := cl.twoShardKeys(t)
	cl.c.Set(ctx, a, 1, 0)
	cl.c.Set(ctx, b, 2, 0)
	var watchErr error
	err := cl.c.Watch(ctx, func(tx *redis.Tx) error {
		x, err := tx.Get(ctx, a).Int()
		if err != nil {
			return err
		}
		y, err := tx.Get(ctx, b).Int() // another shard: fine, nothing is watched
		if err != nil {
			return err
		}
		watchErr = tx.Watch(ctx, a).Err()
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, b, x+y, 0)
			p.Ping(ctx)
			return nil
		})
		return err
	})
	if err != nil {
		t.Fatalf("Watch with no key: %v", err)
	}
	if !errors.Is(watchErr, redshard.ErrNotSharded) {
		t.Fatalf("WATCH inside a keyless Watch: %v, want ErrNotSharded", watchErr)
	}
	if got := cl.c.Get(ctx, b).Val(); got != "3" {
		t.Fatalf("after the keyless Watch %s = %q, want 3", b, got)
	}
	cmds, err := cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Ping(ctx)
		p.Echo(ctx, "x")
		return nil
	})
	if err != nil || len(cmds) != 2 || cmds[1].(*redis.StringCmd).Val() != "x" {
		t.Fatalf("keyless TxPipelined of PING and ECHO: %v, %v", cmds, err)
	}
	_, err = cl.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Ping(ctx)
		p.DBSize(ctx) // one shard's answer would be a lie
		return nil
	})
	if !errors.Is(err, redshard.ErrNotSharded) {
		t.Fatalf("keyless TxPipelined with DBSIZE: %v, want ErrNotSharded", err)
	}
}

func TestPubSubOnOwnerShard(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	ps := cl.c.Subscribe(ctx, "news")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if n, err := cl.c.Publish(ctx, "news", "hello").Result(); err != nil || n != 1 {
		t.Fatalf("PUBLISH = %d, %v", n, err)
	}
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "hello" {
		t.Fatalf("message = %v, %v", msg, err)
	}
}

// countingHook counts the commands it sees, as a metrics hook would, leaving
// out go-redis's own connection setup (HELLO, CLIENT SETINFO).
type countingHook struct{ cmds, pipelines atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n != "hello" && n != "client" {
			h.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := cmds[0].Name(); n != "hello" && n != "client" {
			h.pipelines.Add(1)
		}
		return next(ctx, cmds)
	}
}

func TestAddHookSeesShardTraffic(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	h := &countingHook{}
	cl.c.AddHook(h)
	cl.c.Set(ctx, "a", 1, 0)
	cl.c.DBSize(ctx) // one per shard
	if got := h.cmds.Load(); got != 4 {
		t.Fatalf("hook saw %d commands, want 1 SET + 3 DBSIZE", got)
	}
	var keys []string
	for i := 0; i < 30; i++ {
		keys = append(keys, fmt.Sprint(i))
	}
	cl.c.MGet(ctx, keys...) // split into one MGET per shard
	if got := h.cmds.Load(); got != 7 {
		t.Fatalf("hook saw %d commands after a 3-shard MGET, want 7", got)
	}
	cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Get(ctx, k)
		}
		return nil
	})
	if got := h.pipelines.Load(); got != 3 {
		t.Fatalf("hook saw %d pipelines, want one per shard", got)
	}
}

func TestClose(t *testing.T) {
	cl := newCluster(t, 1, 1)
	cl.c.Set(ctx, "k", "v", 0)
	if err := cl.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := cl.c.Get(ctx, "k").Err(); err != redis.ErrClosed {
		t.Fatalf("GET after Close: %v", err)
	}
	_, err := cl.c.Pipelined(ctx, func(p redis.Pipeliner) error { p.Get(ctx, "k"); return nil })
	if err != redis.ErrClosed {
		t.Fatalf("pipeline after Close: %v", err)
	}
	if err := cl.c.ForEachShard(ctx, func(context.Context, *redis.Client) error { return nil }); err != redis.ErrClosed {
		t.Fatalf("ForEachShard after Close: %v", err)
	}
}

func TestForEachShardAndPoolStats(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	for i := 0; i < 20; i++ {
		cl.c.Set(ctx, fmt.Sprint(i), i, 0)
	}
	var total atomic.Int64
	err := cl.c.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
		total.Add(c.DBSize(ctx).Val())
		return nil
	})
	if err != nil || total.Load() != 20 {
		t.Fatalf("ForEachShard: total %d, %v", total.Load(), err)
	}
	if st := cl.c.PoolStats(); st.TotalConns < 3 {
		t.Fatalf("PoolStats.TotalConns = %d, want >= 3 (one per shard)", st.TotalConns)
	}
	names := []string{}
	for _, s := range cl.c.Shards() {
		names = append(names, s.Name)
	}
	if !sort.StringsAreSorted(names) || len(names) != 3 {
		t.Fatalf("Shards() = %v", names)
	}
}

func TestNewClientRejectsBadOptions(t *testing.T) {
	ok := redshard.Shard{Name: "a", Addr: "127.0.0.1:1"}
	tests := []struct {
		name string
		opt  *redshard.Options
		want error
	}{
		{"nil", nil, redshard.ErrNilOptions},
		{"no shards", &redshard.Options{}, redshard.ErrNoShards},
		{"empty name", &redshard.Options{Shards: []redshard.Shard{{Addr: "127.0.0.1:1"}}}, redshard.ErrEmptyName},
		{"empty addr", &redshard.Options{Shards: []redshard.Shard{{Name: "a"}}}, redshard.ErrEmptyAddr},
		{"duplicate name", &redshard.Options{Shards: []redshard.Shard{ok, {Name: "a", Addr: "127.0.0.1:2"}}}, redshard.ErrDuplicateName},
		{"duplicate addr", &redshard.Options{Shards: []redshard.Shard{ok, {Name: "b", Addr: "127.0.0.1:1"}}}, redshard.ErrDuplicateAddr},
		{"negative weight", &redshard.Options{Shards: []redshard.Shard{{Name: "a", Addr: "x:1", Weight: -1}}}, redshard.ErrInvalidWeight},
		{"NaN weight", &redshard.Options{Shards: []redshard.Shard{{Name: "a", Addr: "x:1", Weight: math.NaN()}}}, redshard.ErrInvalidWeight},
		{"Inf weight", &redshard.Options{Shards: []redshard.Shard{{Name: "a", Addr: "x:1", Weight: math.Inf(1)}}}, redshard.ErrInvalidWeight},
		{"absurd weight", &redshard.Options{Shards: []redshard.Shard{{Name: "a", Addr: "x:1", Weight: 1e15}}}, redshard.ErrInvalidWeight},
		{"negative vnodes", &redshard.Options{Shards: []redshard.Shard{ok}, VnodesPerWeight: -1}, redshard.ErrInvalidVnodes},
		{"sentinel without master", &redshard.Options{Shards: []redshard.Shard{{Name: "a", Failover: &redis.FailoverOptions{}}}}, redshard.ErrEmptyAddr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redshard.NewClient(tc.opt)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if c != nil {
				t.Fatal("got a client along with the error")
			}
		})
	}
}

func TestStringHidesCredentials(t *testing.T) {
	c, err := redshard.NewClient(&redshard.Options{
		Shards:       []redshard.Shard{{Name: "a", Addr: "127.0.0.1:1"}, {Name: "b", Addr: "127.0.0.1:2", Weight: 2}},
		ShardOptions: &redis.Options{Username: "app", Password: "s3cret-pw"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := c.String() + fmt.Sprint(c.Shards())
	if want := "a(127.0.0.1:1)"; !strings.Contains(s, want) {
		t.Fatalf("String() = %q, want it to name %q", s, want)
	}
	if strings.Contains(s, "s3cret-pw") {
		t.Fatalf("String() leaks the password: %q", s)
	}
	_, sc := c.ShardFor("x")
	if sc.Options().Password != "s3cret-pw" || sc.Options().Username != "app" {
		t.Fatal("ShardOptions credentials did not reach the shard client")
	}
}

func TestFrontNeverDials(t *testing.T) {
	cl := newCluster(t, 1, 1)
	conn := cl.c.Conn() // routes like the client: its commands go through the same hooks
	defer conn.Close()
	if err := conn.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("Conn().Set: %v", err)
	}
	if got := cl.c.Get(ctx, "k").Val(); got != "v" {
		t.Fatalf("GET after Conn().Set = %q", got)
	}
	if ap, err := cl.c.AutoPipeline(); err != nil || ap.Set(ctx, "k2", "v", 0).Err() != nil {
		t.Fatalf("AutoPipeline: %v", err)
	}
	if st := cl.c.FrontPoolStats(); st.TotalConns != 0 || st.Misses != 0 {
		t.Fatalf("front client opened connections: %+v", st)
	}
}

func TestSubscribeMergesShards(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	a, b := cl.twoShardKeys(t)
	chans := []string{"news:" + a, "news:" + b, a, b}
	sub := cl.c.Subscribe(ctx, chans...)
	defer sub.Close()
	for range chans {
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pat := cl.c.PSubscribe(ctx, "news:*")
	if _, err := pat.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ch := range chans {
		if err := cl.c.Publish(ctx, ch, "hi "+ch).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for len(got) < len(chans) {
		msg := <-sub.Channel()
		got[msg.Channel] = msg.Payload == "hi "+msg.Channel
	}
	for _, ch := range chans {
		if !got[ch] {
			t.Fatalf("no message on %s: %v", ch, got)
		}
	}
	for n := 0; n < 2; n++ { // the two news:* channels, wherever they live
		if msg := <-pat.Channel(); msg.Pattern != "news:*" {
			t.Fatalf("pattern message %+v", msg)
		}
	}
	if err := pat.Close(); err != nil {
		t.Fatal(err)
	}
	if _, open := <-pat.Channel(); open {
		t.Fatal("Channel still open after Close")
	}
}

func TestOptionsIsTheShardTemplate(t *testing.T) {
	cl := newCluster(t, 1, 1)
	c, err := redshard.NewClient(&redshard.Options{Shards: cl.shards, ShardOptions: &redis.Options{PoolSize: 7}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if o := c.Options(); o.PoolSize != 7 || o.Addr != "" {
		t.Fatalf("Options() = PoolSize %d, Addr %q; want the template", o.PoolSize, o.Addr)
	}
}

// On one shard, PoolStats is the shard client's, pipeline pool included;
// on several it is their sum.
func TestPoolStatsIsTheShardsSum(t *testing.T) {
	for _, n := range []int{1, 3} {
		weights := make([]float64, n)
		for i := range weights {
			weights[i] = 1
		}
		cl := newCluster(t, weights...) // the heartbeat has its own connections
		for i := 0; i < 20; i++ {
			cl.c.Set(ctx, fmt.Sprint(i), i, 0)
		}
		if _, err := cl.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < 20; i++ {
				p.Get(ctx, fmt.Sprint(i))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var want redis.PoolStats
		var pipe uint32
		for _, s := range cl.shards {
			sc, _ := cl.c.ShardClient(s.Name)
			st := sc.PoolStats()
			want.Hits += st.Hits
			want.Misses += st.Misses
			want.TotalConns += st.TotalConns
			if st.PipelineStats != nil {
				pipe += st.PipelineStats.Misses + st.PipelineStats.Hits
			}
		}
		got := cl.c.PoolStats()
		if got.Hits != want.Hits || got.Misses != want.Misses || got.TotalConns != want.TotalConns {
			t.Fatalf("%d shards: PoolStats hits/misses/conns = %d/%d/%d, shards' sum %d/%d/%d",
				n, got.Hits, got.Misses, got.TotalConns, want.Hits, want.Misses, want.TotalConns)
		}
		if pipe == 0 || got.PipelineStats == nil || got.PipelineStats.Misses+got.PipelineStats.Hits != pipe {
			t.Fatalf("%d shards: PipelineStats = %+v, want %d pipeline pool gets", n, got.PipelineStats, pipe)
		}
	}
}
