package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// TestRealServersKeepOtherKeys runs the demo against "real" servers (this
// test's miniredis, named in REDSHARD_ADDRS): it must leave every key it
// did not write, and none of those it wrote.
func TestRealServersKeepOtherKeys(t *testing.T) {
	var addrs []string
	var servers []*miniredis.Miniredis
	others := []string{"app:session:1", "quickstart:other", fmt.Sprintf("quickstart:user:%d", numKeys)}
	for i, name := range []string{"a", "b", "c"} {
		m := miniredis.RunT(t)
		if err := m.Set(others[i], "not the demo's"); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, m)
		addrs = append(addrs, fmt.Sprintf("%s=%s", name, m.Addr()))
	}
	t.Setenv("REDSHARD_ADDRS", addrs[0]+","+addrs[1]+","+addrs[2]+":2")
	main()

	var left []string
	for _, m := range servers {
		left = append(left, m.Keys()...)
	}
	slices.Sort(left)
	want := slices.Sorted(slices.Values(others))
	if !slices.Equal(left, want) {
		t.Errorf("keys left on the servers: %q, want only the ones the demo did not write: %q", left, want)
	}
}
