package ring_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/redshard/redshard/ring"
)

func ExampleNew() {
	r, err := ring.New([]ring.Node{
		{Name: "cache-a", Weight: 1}, // 32 GB box
		{Name: "cache-b", Weight: 2}, // 64 GB box
		{Name: "cache-c"},            // weight 0 means 1
	}, nil)
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"user:1", "user:2", "{user:1}.cart", "session:9"} {
		fmt.Printf("%-14s -> %s\n", key, r.Lookup(key))
	}
	// Output:
	// user:1         -> cache-b
	// user:2         -> cache-c
	// {user:1}.cart  -> cache-b
	// session:9      -> cache-b
}

func ExampleRing_Shares() {
	r, err := ring.New([]ring.Node{
		{Name: "cache-a", Weight: 1},
		{Name: "cache-b", Weight: 2},
		{Name: "cache-c", Weight: 1},
	}, nil)
	if err != nil {
		panic(err)
	}
	shares := r.Shares()
	for _, n := range r.Nodes() {
		fmt.Printf("%s weight %.0f owns %.3f of the keys\n", n.Name, n.Weight, shares[n.Name])
	}
	// Output:
	// cache-a weight 1 owns 0.249 of the keys
	// cache-b weight 2 owns 0.500 of the keys
	// cache-c weight 1 owns 0.251 of the keys
}

func ExampleRing_Replicas() {
	r, err := ring.New([]ring.Node{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Replicas("user:1", 2))
	fmt.Println(r.Replicas("user:1", 10))
	// Output:
	// [b c]
	// [b c a d]
}

func ExampleDiff() {
	nodes := []ring.Node{{Name: "cache-a"}, {Name: "cache-b"}, {Name: "cache-c"}}
	before, err := ring.New(nodes, nil)
	if err != nil {
		panic(err)
	}
	after, err := before.With(append(nodes, ring.Node{Name: "cache-d"}))
	if err != nil {
		panic(err)
	}
	moves := ring.Diff(before, after)
	sum := ring.Summarize(moves)
	pairs := make([][2]string, 0, len(sum))
	for p := range sum {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	fmt.Printf("%d arcs move\n", len(moves))
	for _, p := range pairs {
		fmt.Printf("%s -> %s: %.3f of the keys\n", p[0], p[1], sum[p])
	}
	// Output:
	// 6222 arcs move
	// cache-a -> cache-d: 0.086 of the keys
	// cache-b -> cache-d: 0.079 of the keys
	// cache-c -> cache-d: 0.084 of the keys
}
