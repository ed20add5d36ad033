package hot

import (
	"context"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRefillNoResendWithoutRetries: a refill whose reader connection is
// killed after its write ran must not send the write again when the
// shard's client does not retry (MaxRetries -1, which go-redis stores as
// 0): the INCR runs once on the server and the caller gets the error, as
// from go-redis. TestHotHistory (integration_test) found INCRs and DELs run
// twice this way: the check was MaxRetries >= 0, true for every client.
func TestRefillNoResendWithoutRetries(t *testing.T) {
	h, b, admin := newTestPath(t)
	ctx := context.Background()
	_ = b.client.Close()
	b.client = redis.NewClient(&redis.Options{Addr: b.addr, MaxRetries: -1})
	if err := admin.Set(ctx, "k", "10", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cacheKey(t, h, b, "k")
	b.mu.Lock()
	b.hold = func(local net.Addr) {
		waitValue(t, admin, "k", "11") // our INCR ran
		if err := admin.ClientKillByFilter(ctx, "addr", local.String()).Err(); err != nil {
			t.Error(err)
		}
	}
	b.mu.Unlock()
	err := do(t, h, b, redis.NewIntCmd(ctx, "incr", "k")).Err()
	b.mu.Lock()
	b.hold = nil
	b.mu.Unlock()
	if v, _ := admin.Get(ctx, "k").Result(); v != "11" {
		t.Fatalf("after one INCR whose connection was killed, the server holds %s; want 11 (the INCR was sent again although the client does not retry; its error: %v)", v, err)
	}
	if err == nil {
		t.Fatal("INCR whose connection was killed under it returned no error, and was not sent again")
	}
}
