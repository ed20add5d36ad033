package redshard_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/hotkey"
)

// ExampleHotKeyOptions turns on the local cache for hot keys: once a key is
// hot, its reads are answered from the client's memory, and a write through
// the client is seen at once.
func ExampleHotKeyOptions() {
	ctx := context.Background()
	var shards []redshard.Shard
	for _, name := range []string{"a", "b"} {
		m, err := miniredis.Run()
		if err != nil {
			panic(err)
		}
		defer m.Close()
		shards = append(shards, redshard.Shard{Name: name, Addr: m.Addr()})
	}
	rdb, err := redshard.NewClient(&redshard.Options{
		Shards: shards,
		HotKeys: &redshard.HotKeyOptions{
			Mitigation:   redshard.LocalCache,
			MaxStaleness: time.Second, // the most another process's write may go unseen
			// Low thresholds for the example; the defaults suit a busy service.
			Detector: &hotkey.Config{MinRate: 1, Window: time.Minute},
		},
	})
	if err != nil {
		panic(err)
	}
	defer rdb.Close()

	rdb.Set(ctx, "celebrity", "v1", 0)
	for i := 0; i < 100; i++ {
		rdb.Get(ctx, "celebrity")
	}
	for _, k := range rdb.HotKeys() { // also refreshes the hot set
		fmt.Printf("%s hot=%v\n", k.Key, k.Hot)
	}
	for i := 0; i < 100; i++ {
		rdb.Get(ctx, "celebrity")
	}
	fmt.Println("answered locally:", rdb.Stats().Hot.CacheHits >= 99)

	rdb.Set(ctx, "celebrity", "v2", 0)
	fmt.Println("after our write:", rdb.Get(ctx, "celebrity").Val())
	// Output:
	// celebrity hot=true
	// answered locally: true
	// after our write: v2
}
