package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestHotMissCommands: a read the cache misses costs two commands on the
// wire, CLIENT CACHING YES and the read, and one more, PTTL of its key
// (which bounds the cached reply's lifetime by the key's TTL), only when
// the key is read again; CLIENT TRACKING ON is sent once per reading
// connection (and again only when the invalidation connection changes),
// not with every read. It failed with 3 commands per miss when TRACKING
// ON went with every read, and with a PTTL per miss when every miss sent
// one.
func TestHotMissCommands(t *testing.T) {
	c, admin := admitClient(t)
	ctx := context.Background()
	const n = 300
	names := []string{"cmdstat_get", "cmdstat_pttl", "cmdstat_client|caching", "cmdstat_client|tracking"}
	stat := func(name string) int64 { return infoField(t, admin, "commandstats", name) }
	snapshot := func() map[string]int64 {
		m := map[string]int64{}
		for _, s := range names {
			m[s] = stat(s)
		}
		return m
	}
	before := snapshot()
	for i := range n {
		c.Get(ctx, fmt.Sprint("two:", i)) // admitted (the cache has room): a tracked read that fills
	}
	after := snapshot()
	gets := after["cmdstat_get"] - before["cmdstat_get"]
	pttls := after["cmdstat_pttl"] - before["cmdstat_pttl"]
	caching := after["cmdstat_client|caching"] - before["cmdstat_client|caching"]
	tracking := after["cmdstat_client|tracking"] - before["cmdstat_client|tracking"]
	if gets != n || caching != n || pttls != 0 {
		t.Fatalf("%d first reads sent %d GETs, %d PTTLs and %d CLIENT CACHING; want %d, 0 and %d", n, gets, pttls, caching, n, n)
	}
	if tracking > 2 {
		t.Fatalf("%d misses, one at a time, sent CLIENT TRACKING %d times; want once per connection", n, tracking)
	}

	// A key read again: its miss after another client's write learns its
	// TTL.
	if err := admin.Set(ctx, "again", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before = snapshot()
	for range 2 { // a miss (no PTTL), then a hit
		if v, err := c.Get(ctx, "again").Result(); err != nil || v != "1" {
			t.Fatalf("GET again = %q, %v", v, err)
		}
	}
	if err := admin.Del(ctx, "again").Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := c.Get(ctx, "again").Result()
		if err == redis.Nil {
			break // the invalidation came, and this read missed
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the DEL's invalidation did not come in 10s")
		}
	}
	after = snapshot()
	gets = after["cmdstat_get"] - before["cmdstat_get"]
	pttls = after["cmdstat_pttl"] - before["cmdstat_pttl"]
	caching = after["cmdstat_client|caching"] - before["cmdstat_client|caching"]
	if gets != 2 || caching != 2 || pttls != 1 {
		t.Fatalf("a first read and a miss after an invalidation sent %d GETs, %d PTTLs and %d CLIENT CACHING; want 2, 1 and 2", gets, pttls, caching)
	}
}
