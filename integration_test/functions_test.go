package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
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
