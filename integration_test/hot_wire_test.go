package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// TestHotMissCommands: a read the cache misses costs two commands on the
// wire, CLIENT CACHING YES and the read, and one more, PTTL of its key
// (which bounds the cached reply's lifetime by the key's TTL), only when
// the key is read again, or when MaxStaleness is set (a first read's reply
// would then live as long as any tracked one, and only its key's TTL bounds
// that); CLIENT TRACKING ON is sent once per reading connection (and again
// only when the invalidation connection changes), not with every read. It
// failed with 3 commands per miss when TRACKING ON went with every read,
// with a PTTL per miss when every miss sent one, and with none on a first
// read under a set MaxStaleness (TestHotAdversaryFirstReadOutlivesKeyTTL).
func TestHotMissCommands(t *testing.T) {
	ctx := context.Background()
	c, servers := hotClient(t, 1, redshard.HotKeyOptions{Mitigation: redshard.LocalCache}) // MaxStaleness left zero
	admin := servers["shard-0"].Client(t)
	cachedAndTracked(t, c, "shard-0", "two:probe", "")
	const n = 300
	before := missCounts(t, admin)
	for i := range n {
		c.Get(ctx, fmt.Sprint("two:", i)) // admitted (the cache has room): a tracked read that fills
	}
	if d := missCounts(t, admin).minus(before); d.gets != n || d.caching != n || d.pttls != 0 {
		t.Fatalf("%d first reads sent %d GETs, %d PTTLs and %d CLIENT CACHING; want %d, 0 and %d", n, d.gets, d.pttls, d.caching, n, n)
	} else if d.tracking > 2 {
		t.Fatalf("%d misses, one at a time, sent CLIENT TRACKING %d times; want once per connection", n, d.tracking)
	}

	// A key read again: its next miss, after another client's write (or
	// once its first reply's second is over), learns its TTL.
	if err := admin.Set(ctx, "again", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before = missCounts(t, admin)
	if v, err := c.Get(ctx, "again").Result(); err != nil || v != "1" {
		t.Fatalf("GET again = %q, %v", v, err)
	}
	if err := admin.Del(ctx, "again").Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := c.Get(ctx, "again").Result()
		if err == redis.Nil {
			break // this read missed: the invalidation came, or the reply's life ended
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the DEL's invalidation did not come in 10s")
		}
	}
	if d := missCounts(t, admin).minus(before); d.gets != 2 || d.caching != 2 || d.pttls != 1 {
		t.Fatalf("a first read and a miss after an invalidation sent %d GETs, %d PTTLs and %d CLIENT CACHING; want 2, 1 and 2", d.gets, d.pttls, d.caching)
	}

	// MaxStaleness set: every tracked read sends PTTL, the first too.
	c, admin = admitClient(t)
	before = missCounts(t, admin)
	const m = 50
	for i := range m {
		c.Get(ctx, fmt.Sprint("set:", i))
	}
	if d := missCounts(t, admin).minus(before); d.gets != m || d.pttls != m {
		t.Fatalf("with MaxStaleness set, %d first reads sent %d GETs and %d PTTLs; want %d and %d", m, d.gets, d.pttls, m, m)
	}
}

// missCalls counts the commands of a tracked read that the server ran
// (INFO commandstats).
type missCalls struct{ gets, pttls, caching, tracking int64 }

// missCounts reads admin's server's missCalls.
func missCounts(t *testing.T, admin *redis.Client) missCalls {
	t.Helper()
	f := func(name string) int64 { return infoField(t, admin, "commandstats", name) }
	return missCalls{f("cmdstat_get"), f("cmdstat_pttl"), f("cmdstat_client|caching"), f("cmdstat_client|tracking")}
}

func (a missCalls) minus(b missCalls) missCalls {
	return missCalls{a.gets - b.gets, a.pttls - b.pttls, a.caching - b.caching, a.tracking - b.tracking}
}
