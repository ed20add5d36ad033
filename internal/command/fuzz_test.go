package command_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redshard/redshard/internal/command"
)

// FuzzLookup checks that Lookup never panics, that the key indexes it
// returns are in range and in argument order, and that on error the caller's
// slice comes back unextended.
func FuzzLookup(f *testing.F) {
	for _, seed := range []string{
		"get k", "GET k", "mset a 1 b", "eval s 2 a b x", "eval s -1", "eval s 99999999999999999999 a",
		"zunionstore d 2 a b weights 1 2", "blmpop 0 2 a b left", "msetex 2 a 1 b 2 ex 1",
		"xread count 1 streams a b 0 0", "xreadgroup group g c streams a >", "xread streams",
		"sort k by w_{t}_* get # store d limit 0 1", "sort k store", "sort_ro k get {}*",
		"georadius g 1 2 3 km store d storedist e", "migrate h 1  0 10 copy auth2 u p keys a b",
		"migrate h 1 k 0 10 keys", "object encoding k", "OBJECT", "client kill id 1", "memory usage k",
		"json.mset a $ 1 b $", "ts.madd a 1 1", "cms.merge d 1 a weights 1", "blpop 0", "bitop and d",
		"publish c m", "",
	} {
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, line string, typed bool) {
		words := strings.Split(line, " ")
		args := make([]interface{}, len(words))
		for i, w := range words {
			args[i] = w
			if typed {
				// Numbers as go-redis callers pass them, and an odd nil or []byte.
				if n, err := strconv.ParseInt(w, 10, 64); err == nil {
					args[i] = n
				} else if w == "nil" {
					args[i] = nil
				} else if i%3 == 2 {
					args[i] = []byte(w)
				}
			}
		}
		prior := []int{-1}
		info, keys, err := command.Lookup(args, prior)
		if err != nil {
			if len(keys) != 1 || keys[0] != -1 {
				t.Fatalf("Lookup(%q): keys %v with error %v; want the caller's slice", line, keys, err)
			}
			return
		}
		prev := 0
		for _, k := range keys[1:] {
			if k < 1 || k >= len(args) {
				t.Fatalf("Lookup(%q) = %+v: key index %d out of range", line, info, k)
			}
			if k <= prev {
				t.Fatalf("Lookup(%q): keys %v not in argument order", line, keys)
			}
			prev = k
		}
		if info.Class == command.Unknown && len(keys) > 1 {
			t.Fatalf("Lookup(%q): Unknown with keys %v", line, keys)
		}
	})
}
