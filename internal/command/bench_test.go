package command_test

import (
	"fmt"
	"testing"

	"github.com/redshard/redshard/internal/command"
)

func BenchmarkLookup(b *testing.B) {
	mget := []interface{}{"mget"}
	for i := range 10 {
		mget = append(mget, fmt.Sprint("key:", i))
	}
	for _, bm := range []struct {
		name string
		args []interface{}
	}{
		{"GET", []interface{}{"get", "user:42"}},
		{"GET-upper", []interface{}{"GET", "user:42"}},
		{"MGET-10", mget},
		{"EVAL", []interface{}{"eval", "return redis.call('get', KEYS[1])", 2, "a", "b", "x"}},
		{"XREADGROUP", []interface{}{"xreadgroup", "group", "g", "c", "count", 10, "block", 100, "streams", "s1", "s2", ">", ">"}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf [16]int
			for b.Loop() {
				if _, _, err := command.Lookup(bm.args, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkLookupParallel(b *testing.B) {
	args := []interface{}{"get", "user:42"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var buf [8]int
		for pb.Next() {
			_, _, _ = command.Lookup(args, buf[:0])
		}
	})
}
