// Command quickstart shows redshard on three shards with weights 1, 1 and 2.
//
// With no configuration it starts three embedded miniredis servers, so it
// runs anywhere with nothing installed:
//
//	go run ./examples/quickstart
//
// To use real servers, name them in REDSHARD_ADDRS:
//
//	REDSHARD_ADDRS=a=127.0.0.1:7001,b=127.0.0.1:7002,c=127.0.0.1:7003:2 go run ./examples/quickstart
//
// (an optional third field is the weight). It writes keys, shows how many
// each shard holds against its weight share, and runs an MGET that spans
// shards. At the end it deletes the keys it wrote (quickstart:user:0 to
// quickstart:user:19999) and touches no other key.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"

	"github.com/alicebob/miniredis/v2"

	"github.com/redshard/redshard"
)

const numKeys = 20000

func main() {
	ctx := context.Background()
	shards, cleanup, err := shardsFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()

	rdb, err := redshard.NewClient(&redshard.Options{Shards: shards})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	fmt.Printf("client: %s\n\n", rdb)

	// Write keys through a pipeline: redshard splits it per shard.
	written := make([]string, numKeys)
	pipe := rdb.Pipeline()
	for i := range written {
		written[i] = fmt.Sprintf("quickstart:user:%d", i)
		pipe.Set(ctx, written[i], i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		log.Fatalf("writing keys: %v", err)
	}
	// On real servers, delete exactly the keys written here, and nothing
	// else, on the way out (log.Fatal skips it: rerunning overwrites them).
	defer func() {
		if err := rdb.Del(ctx, written...).Err(); err != nil {
			log.Printf("deleting the keys this demo wrote: %v", err)
		}
	}()

	// Count each shard's keys and compare with its weight share.
	var totalWeight float64
	for _, s := range shards {
		totalWeight += weight(s)
	}
	shares := rdb.Ring().Shares()
	fmt.Printf("%-8s %6s %12s %12s %8s\n", "shard", "weight", "weight share", "ring share", "keys")
	for _, s := range rdb.Shards() {
		c, _ := rdb.ShardClient(s.Name)
		n := 0
		iter := c.Scan(ctx, 0, "quickstart:user:*", 1000).Iterator()
		for iter.Next(ctx) {
			n++
		}
		if err := iter.Err(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-8s %6g %11.1f%% %11.1f%% %8d (%.1f%%)\n", s.Name, s.Weight,
			100*s.Weight/totalWeight, 100*shares[s.Name], n, 100*float64(n)/numKeys)
	}

	// One MGET, keys on several shards: split, run in parallel, merged in order.
	keys := []string{"quickstart:user:1", "quickstart:user:2", "quickstart:user:3", "quickstart:user:4", "quickstart:nope"}
	vals, err := rdb.MGet(ctx, keys...).Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("\nMGET across shards:")
	for i, k := range keys {
		owner, _ := rdb.ShardFor(k)
		fmt.Printf("  %-20s on %-8s = %v\n", k, owner, vals[i])
	}

	// Keys that must live together share a {hash tag}.
	a, b := "{cart:7}.items", "{cart:7}.total"
	oa, _ := rdb.ShardFor(a)
	ob, _ := rdb.ShardFor(b)
	if oa == ob {
		fmt.Printf("\n%s and %s share the hash tag {cart:7}: both live on %s\n", a, b, oa)
	} else {
		fmt.Printf("\n%s lives on %s but %s on %s: the hash tag did not hold them together\n", a, oa, b, ob)
	}

	n, err := rdb.DBSize(ctx).Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("DBSIZE summed over shards: %d\n", n)
}

func weight(s redshard.Shard) float64 {
	if s.Weight == 0 {
		return 1
	}
	return s.Weight
}

// shardsFromEnv reads REDSHARD_ADDRS (name=host:port[:weight],...) or starts
// three miniredis servers with weights 1, 1, 2.
func shardsFromEnv() ([]redshard.Shard, func(), error) {
	if env := os.Getenv("REDSHARD_ADDRS"); env != "" {
		shards, err := parseAddrs(env)
		return shards, func() {}, err
	}
	var shards []redshard.Shard
	var servers []*miniredis.Miniredis
	for i, w := range []float64{1, 1, 2} {
		m, err := miniredis.Run()
		if err != nil {
			return nil, nil, err
		}
		servers = append(servers, m)
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("mini-%c", 'a'+i), Addr: m.Addr(), Weight: w})
	}
	fmt.Println("no REDSHARD_ADDRS: using three embedded miniredis shards")
	return shards, func() {
		for _, m := range servers {
			m.Close()
		}
	}, nil
}

func parseAddrs(env string) ([]redshard.Shard, error) {
	var shards []redshard.Shard
	for _, item := range strings.Split(env, ",") {
		name, rest, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, fmt.Errorf("REDSHARD_ADDRS: %q is not name=host:port[:weight]", item)
		}
		s := redshard.Shard{Name: name, Addr: rest}
		if parts := strings.Split(rest, ":"); len(parts) == 3 {
			w, err := strconv.ParseFloat(parts[2], 64)
			if err != nil {
				return nil, fmt.Errorf("REDSHARD_ADDRS: bad weight in %q: %v", item, err)
			}
			s.Addr, s.Weight = parts[0]+":"+parts[1], w
		}
		shards = append(shards, s)
	}
	return shards, nil
}
