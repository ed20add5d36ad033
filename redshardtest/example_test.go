package redshardtest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/redshardtest"
)

// A Server answers the CLIENT subcommands a fleet's driver uses. In a
// test, redshardtest.NewServer(t) starts one that the test's end closes.
func ExampleStartServer() {
	s, err := redshardtest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	cn := rdb.Conn()
	defer cn.Close()
	cn.ClientSetName(ctx, "example")
	list, err := cn.ClientList(ctx).Result()
	fmt.Print(list, err, "\n")
	// Output:
	// id=1 addr=miniredis name=example
	// <nil>
}

// A Client over three shards of weights 1, 1 and 2. In a test:
//
//	cl := redshardtest.NewCluster(t, nil, 1, 1, 2)
func ExampleStartCluster() {
	cl, err := redshardtest.StartCluster(nil, 1, 1, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	ctx := context.Background()
	for i := range 1000 {
		cl.Client.Set(ctx, fmt.Sprintf("user:%d", i), i, 0)
	}
	for _, s := range cl.Shards {
		fmt.Printf("%s (weight %g) holds %d keys\n", s.Name, s.Weight, len(cl.Server(s.Name).Keys()))
	}
	// Output:
	// shard-0 (weight 1) holds 255 keys
	// shard-1 (weight 1) holds 237 keys
	// shard-2 (weight 2) holds 508 keys
}

// A fleet's membership change, as a unit test runs it: two processes
// follow the registry while a third shard joins the ring, and the data
// moves. In a test:
//
//	f := redshardtest.NewFleet(t, nil)
func ExampleStartFleet() {
	f, err := redshardtest.StartFleet(nil) // three shard servers, none in the ring yet
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()

	// The first document: shard-0 and shard-1.
	if _, err := f.Apply(ctx, redshardtest.Doc(f.Shards[:2]...), fleet.ApplyOptions{}); err != nil {
		log.Fatal(err)
	}
	web1, err := f.Join("web-1")
	if err != nil {
		log.Fatal(err)
	}
	web2, err := f.Join("web-2")
	if err != nil {
		log.Fatal(err)
	}
	for i := range 100 {
		web1.Set(ctx, fmt.Sprintf("user:%d", i), i, 0)
	}

	// Add shard-2 while both processes follow.
	rep, err := f.Apply(ctx, redshardtest.Doc(f.Shards...), fleet.ApplyOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s -> %s, %d keys moved\n", rep.From, rep.To, rep.Rebalance.Moved)
	fmt.Println("web-2 is on", len(web2.Shards()), "shards")
	n, _ := web2.Get(ctx, "user:42").Int()
	fmt.Println("web-2 reads user:42 =", n)
	// Output:
	// epoch 1 stable -> epoch 2 stable, 35 keys moved
	// web-2 is on 3 shards
	// web-2 reads user:42 = 42
}

// Doc writes the config document of the shards named, for Apply or for a
// file that redshard.LoadConfig reads.
func ExampleDoc() {
	fmt.Println(string(redshardtest.Doc(
		redshard.Shard{Name: "a", Addr: "127.0.0.1:7001"},
		redshard.Shard{Name: "b", Addr: "127.0.0.1:7002", Weight: 2},
	)))
	// Output:
	// {"shards":[{"name":"a","addr":"127.0.0.1:7001"},{"name":"b","addr":"127.0.0.1:7002","weight":2}]}
}
