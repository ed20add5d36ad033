package integration_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// heldJoiner starts a server to add to c's ring whose connections are held
// at their dial until release is called: SetShards carrying c's function
// libraries to it waits there. dialing receives once the first dial began.
func heldJoiner(t *testing.T, c *redshard.Client) (grown []redshard.Shard, dialing <-chan struct{}, release func()) {
	t.Helper()
	joiner := redistest.Start(t)
	held, began := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release) // a failed test must not leave SetShards waiting
	opt := &redis.Options{Dialer: func(_ context.Context, network, addr string) (net.Conn, error) {
		select {
		case began <- struct{}{}:
		default:
		}
		<-held
		var d net.Dialer
		return d.DialContext(context.Background(), network, addr)
	}}
	grown = append(slices.Clone(c.Shards()), redshard.Shard{Name: "joiner", Addr: joiner.Addr(), Options: opt})
	return grown, began, release
}

// within fails the test unless done delivers (or closes) within a generous
// bound: what it waits for takes microseconds, and would never come while
// a lock it must not take is held.
func within(t *testing.T, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return while SetShards carried functions to a new server", what)
	}
}

// countGets is a hook counting the GETs of one key that pass it.
type countGets struct {
	key string
	n   atomic.Int64
}

func (h *countGets) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countGets) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "get" && len(args) == 2 && args[1] == h.key {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *countGets) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestSetShardsCarryHoldsNoLock: while SetShards carries the function
// libraries to a new server (network round trips), the client is not held:
// AddHook returns, and the hook reaches the new server's client too, once
// the change is published; Close returns, and the SetShards then fails
// with redis.ErrClosed, the ring unchanged.
func TestSetShardsCarryHoldsNoLock(t *testing.T) {
	ctx := context.Background()
	t.Run("AddHook", func(t *testing.T) {
		c, _ := keylessClient(t, 2, nil)
		if err := c.FunctionLoad(ctx, funcLibs(1)[0]).Err(); err != nil {
			t.Fatal(err)
		}
		grown, dialing, release := heldJoiner(t, c)
		done := make(chan error, 1)
		go func() { done <- c.SetShards(ctx, grown) }()
		within(t, "the carry's first dial", dialing)
		hook := &countGets{}
		added := make(chan struct{})
		go func() {
			c.AddHook(hook)
			close(added)
		}()
		within(t, "AddHook", added)
		release()
		if err := <-done; err != nil {
			t.Fatalf("SetShards: %v", err)
		}
		hook.key = keyOwnedBy(t, c, "joiner")
		if err := c.Get(ctx, hook.key).Err(); err != redis.Nil {
			t.Fatalf("GET %s: %v", hook.key, err)
		}
		if n := hook.n.Load(); n != 1 {
			t.Fatalf("the hook added during the carry saw %d GETs of a key of the new server; want 1", n)
		}
	})
	t.Run("Close", func(t *testing.T) {
		c, _ := keylessClient(t, 2, nil)
		if err := c.FunctionLoad(ctx, funcLibs(1)[0]).Err(); err != nil {
			t.Fatal(err)
		}
		before := c.Shards()
		grown, dialing, release := heldJoiner(t, c)
		done := make(chan error, 1)
		go func() { done <- c.SetShards(ctx, grown) }()
		within(t, "the carry's first dial", dialing)
		closed := make(chan struct{})
		go func() {
			_ = c.Close()
			close(closed)
		}()
		within(t, "Close", closed)
		release()
		if err := <-done; !errors.Is(err, redis.ErrClosed) {
			t.Fatalf("SetShards on a client closed during its carry: %v; want redis.ErrClosed", err)
		}
		if got := c.Shards(); !slices.Equal(got, before) {
			t.Fatalf("the ring changed to %v", got)
		}
	})
}
