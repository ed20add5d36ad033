package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/registry"
)

// funcLibs returns n Lua libraries, each with one function.
func funcLibs(n int) []string {
	libs := make([]string, n)
	for i := range libs {
		libs[i] = fmt.Sprintf("#!lua name=lib%d\nredis.register_function('f%d', function() return %d end)", i, i, i)
	}
	return libs
}

// listing returns a server's libraries as sorted "name:code" lines.
func listing(t *testing.T, ctx context.Context, c redis.UniversalClient) []string {
	t.Helper()
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{WithCode: true}).Result()
	if err != nil {
		t.Fatalf("FUNCTION LIST: %v", err)
	}
	var out []string
	for _, l := range libs {
		out = append(out, l.Name+":"+l.Code)
	}
	slices.Sort(out)
	return out
}

// TestFunctionDumpLibrariesInAnyOrder: shards that hold the same libraries,
// loaded in different orders, answer FUNCTION DUMP (each server serializes
// its libraries in its own order, so the payloads differ byte for byte),
// and the dump restores those libraries; shards whose libraries differ are
// refused with ErrNotSharded.
func TestFunctionDumpLibrariesInAnyOrder(t *testing.T) {
	ctx := context.Background()
	c, servers := keylessClient(t, 4, nil)
	libs := funcLibs(12)
	for i, s := range servers {
		sc := s.Client(t)
		order := slices.Clone(libs)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		order = append(order[i*3:], order[:i*3]...)
		for _, code := range order {
			if err := sc.FunctionLoad(ctx, code).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	dump, err := c.FunctionDump(ctx).Result()
	if err != nil {
		t.Fatalf("FUNCTION DUMP on shards holding the same libraries: %v", err)
	}
	fresh := redistest.Start(t).Client(t)
	if err := fresh.FunctionRestore(ctx, dump).Err(); err != nil {
		t.Fatalf("FUNCTION RESTORE of redshard's dump: %v", err)
	}
	if got, want := listing(t, ctx, fresh), listing(t, ctx, servers[0].Client(t)); !slices.Equal(got, want) {
		t.Fatalf("the dump restores %q, want %q", got, want)
	}

	// One shard with one more library: no one dump is the answer.
	if err := servers[2].Client(t).FunctionLoad(ctx, funcLibs(13)[12]).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = c.FunctionDump(ctx).Result()
	if !errors.Is(err, redshard.ErrNotSharded) || !strings.Contains(err.Error(), "different libraries") {
		t.Fatalf("FUNCTION DUMP on shards holding different libraries: %v, want ErrNotSharded", err)
	}
	// The same in a pipeline, next to a keyed command.
	var dumpCmd *redis.StringCmd
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "k", "v", 0)
		dumpCmd = p.FunctionDump(ctx)
		return nil
	})
	if !errors.Is(dumpCmd.Err(), redshard.ErrNotSharded) {
		t.Fatalf("FUNCTION DUMP in a pipeline on shards holding different libraries: %v, want ErrNotSharded", dumpCmd.Err())
	}
	if err := servers[2].Client(t).FunctionDelete(ctx, "lib12").Err(); err != nil {
		t.Fatal(err)
	}
	var again *redis.StringCmd
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		again = p.FunctionDump(ctx)
		p.Del(ctx, "k")
		return nil
	}); err != nil || again.Val() == "" {
		t.Fatalf("FUNCTION DUMP in a pipeline on shards holding the same libraries: %q, %v", again.Val(), err)
	}
}

// keyOwnedBy returns a key that c's ring gives to the named shard.
func keyOwnedBy(t *testing.T, c *redshard.Client, shard string) string {
	t.Helper()
	for i := range 100000 {
		k := fmt.Sprintf("fk:%d", i)
		if name, _ := c.ShardFor(k); name == shard {
			return k
		}
	}
	t.Fatalf("no key for shard %s", shard)
	return ""
}

// TestSetShardsCarriesFunctions: a server that SetShards adds gets, before
// it owns a key, the libraries the current shards hold (FUNCTION DUMP and
// FUNCTION RESTORE), so FCALL, FUNCTION LIST, FUNCTION DUMP and FUNCTION
// DELETE work on its keys; a script loaded with SCRIPT LOAD is not carried
// over, and go-redis's Script.Run sends it again. When the current shards
// hold different libraries, or the joining server holds others, SetShards
// refuses with ErrLibrariesDiffer and leaves the ring as it was.
func TestSetShardsCarriesFunctions(t *testing.T) {
	ctx := context.Background()
	c, servers := keylessClient(t, 3, nil)
	before := c.Shards()
	libs := funcLibs(3)
	for _, code := range libs {
		if err := c.FunctionLoad(ctx, code).Err(); err != nil {
			t.Fatal(err)
		}
	}
	script := redis.NewScript("return 'script'")
	if err := script.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	joiner := redistest.Start(t)
	grown := append(slices.Clone(before), redshard.Shard{Name: "shard-3", Addr: joiner.Addr()})
	unchanged := func(what string) {
		t.Helper()
		if got := c.Shards(); !slices.Equal(got, before) {
			t.Fatalf("%s: the ring changed to %v", what, got)
		}
		if n := len(listing(t, ctx, joiner.Client(t))); n != 0 {
			t.Fatalf("%s: the joining server got %d libraries", what, n)
		}
	}

	// The current shards disagree: one holds a library more.
	extra := funcLibs(4)[3]
	if err := servers[1].Client(t).FunctionLoad(ctx, extra).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetShards(ctx, grown); !errors.Is(err, redshard.ErrLibrariesDiffer) {
		t.Fatalf("SetShards over shards holding different libraries: %v, want ErrLibrariesDiffer", err)
	}
	unchanged("current shards disagree")
	if err := servers[1].Client(t).FunctionDelete(ctx, "lib3").Err(); err != nil {
		t.Fatal(err)
	}

	// The joining server holds a library of its own.
	if err := joiner.Client(t).FunctionLoad(ctx, extra).Err(); err != nil {
		t.Fatal(err)
	}
	err := c.SetShards(ctx, grown)
	if !errors.Is(err, redshard.ErrLibrariesDiffer) || !strings.Contains(err.Error(), "shard-3") {
		t.Fatalf("SetShards adding a server with other libraries: %v, want ErrLibrariesDiffer naming shard-3", err)
	}
	if err := joiner.Client(t).FunctionDelete(ctx, "lib3").Err(); err != nil {
		t.Fatal(err)
	}
	unchanged("joining server holds other libraries")

	// Agreed libraries: the joining server gets them before it owns keys.
	if err := c.SetShards(ctx, grown); err != nil {
		t.Fatalf("SetShards adding a server: %v", err)
	}
	if got, want := listing(t, ctx, joiner.Client(t)), listing(t, ctx, servers[0].Client(t)); !slices.Equal(got, want) {
		t.Fatalf("the joining server holds %q, want %q", got, want)
	}
	k := keyOwnedBy(t, c, "shard-3")
	if v, err := c.FCall(ctx, "f2", []string{k}).Result(); err != nil || v != int64(2) {
		t.Fatalf("FCALL f2 on %s, owned by the joining shard: %v, %v", k, v, err)
	}
	if got := listing(t, ctx, c); len(got) != len(libs) {
		t.Fatalf("FUNCTION LIST through the client: %q", got)
	}
	if err := c.FunctionDump(ctx).Err(); err != nil {
		t.Fatalf("FUNCTION DUMP through the client: %v", err)
	}
	if v, err := script.Run(ctx, c, []string{k}).Result(); err != nil || v != "script" {
		t.Fatalf("Script.Run on the joining shard's key (EVALSHA, then EVAL): %v, %v", v, err)
	}
	if _, err := c.Rebalance(ctx, redshard.RebalanceOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.FunctionDelete(ctx, "lib0").Err(); err != nil {
		t.Fatalf("FUNCTION DELETE after the change: %v", err)
	}
}

// TestApplyCarriesFunctions: a fleet's apply gives the servers a document
// adds the libraries of the servers that stay, before the change is
// prepared; when those disagree, apply refuses and publishes nothing.
func TestApplyCarriesFunctions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var addrs []string
	var servers []*redistest.Server
	for range 4 {
		s := redistest.Start(t)
		servers = append(servers, s)
		addrs = append(addrs, s.Addr())
	}
	regClient := redistest.Start(t).Client(t)
	reg, err := registry.NewRedisOptions(regClient, "redshard:registry:functions",
		&registry.Options{PollInterval: 50 * time.Millisecond, MemberTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	doc := func(n int) json.RawMessage {
		var shards []map[string]any
		for i := range n {
			shards = append(shards, map[string]any{"name": fmt.Sprintf("s%d", i), "addr": addrs[i]})
		}
		b, _ := json.Marshal(map[string]any{"shards": shards})
		return b
	}
	apply := func(d json.RawMessage) (fleet.ApplyReport, error) {
		return fleet.Apply(ctx, reg, d, fleet.ApplyOptions{Driver: "test",
			Client: &redshard.Options{Health: &redshard.HealthOptions{Disable: true}}})
	}
	if _, err := apply(doc(3)); err != nil {
		t.Fatal(err)
	}
	c, err := redshard.NewClient(&redshard.Options{Registry: reg, Fleet: &redshard.FleetOptions{MemberID: "app"},
		Health: &redshard.HealthOptions{Disable: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, code := range funcLibs(2) {
		if err := c.FunctionLoad(ctx, code).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// The servers that stay disagree: nothing is published.
	extra := funcLibs(3)[2]
	if err := servers[0].Client(t).FunctionLoad(ctx, extra).Err(); err != nil {
		t.Fatal(err)
	}
	before, err := reg.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apply(doc(4)); !errors.Is(err, redshard.ErrLibrariesDiffer) {
		t.Fatalf("apply over servers holding different libraries: %v, want ErrLibrariesDiffer", err)
	}
	if after, err := reg.Get(ctx); err != nil || after.Version() != before.Version() {
		t.Fatalf("the registry moved from %s to %s (%v)", before.Version(), after.Version(), err)
	}
	if n := len(listing(t, ctx, servers[3].Client(t))); n != 0 {
		t.Fatalf("the joining server got %d libraries from a refused apply", n)
	}
	if err := servers[0].Client(t).FunctionDelete(ctx, "lib2").Err(); err != nil {
		t.Fatal(err)
	}

	if _, err := apply(doc(4)); err != nil {
		t.Fatalf("apply adding s3: %v", err)
	}
	if got, want := listing(t, ctx, servers[3].Client(t)), listing(t, ctx, servers[0].Client(t)); !slices.Equal(got, want) {
		t.Fatalf("the joining server holds %q, want %q", got, want)
	}
	if got := c.Shards(); len(got) != 4 { // apply returns once every member has acknowledged the change
		t.Fatalf("the fleet client is on %v after apply", got)
	}
	k := keyOwnedBy(t, c, "s3")
	if v, err := c.FCall(ctx, "f1", []string{k}).Result(); err != nil || v != int64(1) {
		t.Fatalf("FCALL f1 on %s, owned by the joining server: %v, %v", k, v, err)
	}
}
