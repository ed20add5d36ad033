package integration_test

import (
	"context"
	"fmt"
	"testing"
)

// TestHotMissThreeCommands: a read the cache misses costs three commands
// on the wire, CLIENT CACHING YES, the read and PTTL of its key (which
// bounds the cached reply's lifetime by the key's TTL); CLIENT TRACKING ON
// is sent once per reading connection (and again only when the
// invalidation connection changes), not with every read. Before PTTL it
// was two, and it failed with 3 when TRACKING ON went with every read.
func TestHotMissThreeCommands(t *testing.T) {
	c, admin := admitClient(t)
	ctx := context.Background()
	const n = 300
	before := map[string]int64{}
	stat := func(name string) int64 { return infoField(t, admin, "commandstats", name) }
	for _, s := range []string{"cmdstat_get", "cmdstat_pttl", "cmdstat_client|caching", "cmdstat_client|tracking"} {
		before[s] = stat(s)
	}
	for i := range n {
		c.Get(ctx, fmt.Sprint("two:", i)) // admitted (the cache has room): a tracked read that fills
	}
	gets := stat("cmdstat_get") - before["cmdstat_get"]
	pttls := stat("cmdstat_pttl") - before["cmdstat_pttl"]
	caching := stat("cmdstat_client|caching") - before["cmdstat_client|caching"]
	tracking := stat("cmdstat_client|tracking") - before["cmdstat_client|tracking"]
	if gets != n || caching != n || pttls != n {
		t.Fatalf("%d misses sent %d GETs, %d PTTLs and %d CLIENT CACHING; want %d of each", n, gets, pttls, caching, n)
	}
	if tracking > 2 {
		t.Fatalf("%d misses, one at a time, sent CLIENT TRACKING %d times; want once per connection", n, tracking)
	}
}
