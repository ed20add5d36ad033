package redshard_test

import (
	"context"
	"reflect"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redshard/redshard"
)

// TestUnclosedClientStopsWhenUnreachable: a Client that is never closed
// stops its goroutines (health monitor, hot-key tracking, Pub/Sub links)
// and closes its connections once it is unreachable, as an os.File does.
func TestUnclosedClientStopsWhenUnreachable(t *testing.T) {
	var shards []redshard.Shard
	for _, name := range []string{"s0", "s1"} {
		shards = append(shards, redshard.Shard{Name: name, Addr: miniredis.RunT(t).Addr()})
	}
	before := goleak.IgnoreCurrent()
	h := useAndDrop(t, shards)
	if h.Value() == nil {
		t.Fatal("the client is unreachable before the GC")
	}
	t.Cleanup(func() {
		if c := h.Value(); c != nil {
			_ = c.Close() // the test failed: do not leak into the next ones
		}
	})
	for range 3 {
		runtime.GC()
	}
	if h.Value() != nil {
		t.Fatal("the client is still reachable after runtime.GC: something redshard started refers to it")
	}
	// The cleanup runs after the GC, on its own goroutine: goleak's
	// retries (a few seconds each time, ten times at most on a loaded
	// machine) wait for what it stops.
	var err error
	for range 10 {
		if err = goleak.Find(before); err == nil {
			return
		}
	}
	t.Fatalf("goroutines of an unreachable, unclosed client: %v", err)
}

// useAndDrop makes a client over shards, uses what starts goroutines, and
// returns a weak pointer to it, keeping no reference.
//
//go:noinline
func useAndDrop(t *testing.T, shards []redshard.Shard) weak.Pointer[redshard.Client] {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := redshard.NewClient(&redshard.Options{
		Shards:  shards,
		HotKeys: &redshard.HotKeyOptions{Mitigation: redshard.LocalCache, Detector: hotFrozenDetector()},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "a")
		p.Get(ctx, "b")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ps := c.Subscribe(ctx, "news")
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	return weak.Make(c)
}

// TestFrontIsNoField: the Client's front client is reachable through its
// methods only, never as a field: NewStore(rdb.Client) must not compile,
// since the front alone routes nothing (Watch fails, Options().Addr is
// "redshard:0").
func TestFrontIsNoField(t *testing.T) {
	typ := reflect.TypeFor[redshard.Client]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() {
			t.Errorf("Client has an exported field %s of type %s", f.Name, f.Type)
		}
	}
	var _ redis.UniversalClient = (*redshard.Client)(nil)
}
