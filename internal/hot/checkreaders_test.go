package hot

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// breakConn is a connection whose next write, once armed, closes it and
// fails, as a connection the server killed does when next used.
type breakConn struct {
	net.Conn
	arm *atomic.Bool
}

func (c *breakConn) Write(p []byte) (int, error) {
	if c.arm.CompareAndSwap(true, false) {
		_ = c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// TestCheckReadersRetriesBrokenConnection: CLIENT KILL TYPE normal closes
// the heartbeat connection the reader check runs on along with the reader
// connections it checks. The check that runs next must not give up on its
// broken connection and leave the reader's close to the check after it: it
// asks once more, on a new connection, and drops the shard's cached replies
// at once. Without the second try it dropped nothing.
func TestCheckReadersRetriesBrokenConnection(t *testing.T) {
	h, b, admin := newTestPath(t)
	var arm atomic.Bool
	var dials atomic.Int64
	_ = b.heartbeat.Close()
	b.heartbeat = redis.NewClient(&redis.Options{Addr: b.addr, MaxRetries: -1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			cn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &breakConn{Conn: cn, arm: &arm}, nil
		}})
	cacheKey(t, h, b, "k")
	hs := b.HotState()
	// The test runs the check itself: stop the shard's own.
	hs.mu.Lock()
	stop, watched := hs.stop, hs.watched
	hs.mu.Unlock()
	stop()
	<-watched

	hs.idsMu.Lock()
	var readers []int64
	for id := range hs.ids {
		readers = append(readers, id)
	}
	hs.idsMu.Unlock()
	if len(readers) == 0 {
		t.Fatal("no reader connection recorded")
	}
	ctx := context.Background()
	for _, id := range readers {
		if err := admin.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lost, before := hs.lost.Load(), dials.Load()
	arm.Store(true) // the heartbeat's connection was killed too
	hs.checkReaders(ctx)
	if arm.Load() {
		t.Fatal("the check did not use its broken connection: the test shows nothing")
	}
	if hs.lost.Load() == lost {
		t.Fatalf("the check whose connection broke dropped nothing (heartbeat dials %d -> %d): the killed reader connections %v go unnoticed until the next check", before, dials.Load(), readers)
	}
}
