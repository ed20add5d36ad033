package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// startShards starts n embedded Redis servers for the examples.
func startShards(n int) ([]redshard.Shard, func()) {
	var shards []redshard.Shard
	var servers []*miniredis.Miniredis
	for i := 0; i < n; i++ {
		m, err := miniredis.Run()
		if err != nil {
			panic(err)
		}
		servers = append(servers, m)
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("cache-%d", i), Addr: m.Addr(), Weight: float64(i + 1)})
	}
	return shards, func() {
		for _, m := range servers {
			m.Close()
		}
	}
}

// exampleClient returns a client over n embedded shards and a func that
// closes both.
func exampleClient(n int) (*redshard.Client, func()) {
	shards, stop := startShards(n)
	rdb, err := redshard.NewClient(&redshard.Options{Shards: shards})
	if err != nil {
		panic(err)
	}
	return rdb, func() {
		rdb.Close()
		stop()
	}
}

func ExampleNewClient() {
	shards, stop := startShards(3) // weights 1, 2, 3
	defer stop()

	rdb, err := redshard.NewClient(&redshard.Options{Shards: shards})
	if err != nil {
		panic(err)
	}
	defer rdb.Close()

	// The rest of the application keeps using the go-redis interface.
	var c redis.UniversalClient = rdb
	ctx := context.Background()
	c.Set(ctx, "greeting", "hello", 0)
	c.MSet(ctx, "a", 1, "b", 2, "c", 3) // split over the shards that own a, b, c
	fmt.Println(c.Get(ctx, "greeting").Val())
	fmt.Println(c.MGet(ctx, "c", "b", "a", "missing").Val())
	fmt.Println(c.DBSize(ctx).Val()) // summed over shards
	// Output:
	// hello
	// [3 2 1 <nil>]
	// 4
}

func ExampleErrCrossShard() {
	rdb, stop := exampleClient(3)
	defer stop()
	ctx := context.Background()

	// Find a key that lives on another shard than "src".
	src := "src"
	home, _ := rdb.ShardFor(src)
	dst := ""
	for i := 0; dst == ""; i++ {
		if s, _ := rdb.ShardFor(fmt.Sprint("dst", i)); s != home {
			dst = fmt.Sprint("dst", i)
		}
	}
	rdb.Set(ctx, src, "v", 0)
	err := rdb.Rename(ctx, src, dst).Err()
	fmt.Println(errors.Is(err, redshard.ErrCrossShard)) // refused, nothing sent

	// Under one {hash tag} the keys share a shard and RENAME works.
	rdb.Set(ctx, "{job:7}.pending", "v", 0)
	fmt.Println(rdb.Rename(ctx, "{job:7}.pending", "{job:7}.done").Val())
	// Output:
	// true
	// OK
}

func ExampleClient_ForEachShard() {
	rdb, stop := exampleClient(3)
	defer stop()
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		rdb.Set(ctx, fmt.Sprintf("key:%d", i), i, 0)
	}

	// Commands that have no key, like INFO or CONFIG GET, run per shard.
	var keys atomic.Int64
	err := rdb.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
		n, err := shard.DBSize(ctx).Result()
		keys.Add(n)
		return err
	})
	fmt.Println(keys.Load(), err)
	// Output:
	// 100 <nil>
}

func ExampleClient_ShardFor() {
	rdb, stop := exampleClient(3)
	defer stop()

	// Keys with the same {hash tag} live on the same shard, so commands that
	// need them together (RENAME, SUNIONSTORE, transactions) work.
	a, _ := rdb.ShardFor("{user:1}.profile")
	b, _ := rdb.ShardFor("{user:1}.sessions")
	fmt.Println(a == b)
	// Output:
	// true
}
