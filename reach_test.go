package redshard_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
	"weak"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redshard/redshard"
)

// handOut is one kind of thing a Client hands out: give gets it from the
// client and uses it once (which dials, so that the client runs
// goroutines); use fails the test unless it still works.
type handOut struct {
	name   string
	shards int
	// closed: done with once closed, not once unreachable (goroutines of
	// go-redis refer to it until it is closed).
	closed bool
	give   func(ctx context.Context, c *redshard.Client) (any, error)
	use    func(ctx context.Context, h any, servers []*miniredis.Miniredis) error
}

var handOuts = []handOut{
	{name: "Subscribe", shards: 2,
		give: func(ctx context.Context, c *redshard.Client) (any, error) {
			ps := c.Subscribe(ctx, "news")
			_, err := ps.Receive(ctx)
			return ps, err
		},
		use: func(ctx context.Context, h any, servers []*miniredis.Miniredis) error {
			return published(ctx, h.(*redis.PubSub), servers, "news")
		}},
	{name: "PSubscribe", shards: 2,
		give: func(ctx context.Context, c *redshard.Client) (any, error) {
			ps := c.PSubscribe(ctx, "new*")
			_, err := ps.Receive(ctx)
			return ps, err
		},
		use: func(ctx context.Context, h any, servers []*miniredis.Miniredis) error {
			return published(ctx, h.(*redis.PubSub), servers, "news")
		}},
	{name: "SubscribeChannel", shards: 2, closed: true,
		give: func(ctx context.Context, c *redshard.Client) (any, error) {
			ps := c.Subscribe(ctx, "news")
			_, err := ps.Receive(ctx)
			ps.Channel() // go-redis's goroutines refer to it until it is closed
			return ps, err
		},
		use: func(ctx context.Context, h any, servers []*miniredis.Miniredis) error {
			for _, s := range servers {
				s.Publish("news", "hello")
			}
			select {
			case msg, ok := <-h.(*redis.PubSub).Channel():
				if !ok {
					return fmt.Errorf("the PubSub's channel is closed")
				}
				if msg.Payload != "hello" {
					return fmt.Errorf("received %v, want hello", msg)
				}
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}},
	{name: "AutoPipeline", shards: 2, closed: true,
		give: func(ctx context.Context, c *redshard.Client) (any, error) {
			ap, err := c.AutoPipeline()
			if err != nil {
				return nil, err
			}
			return ap, setGet(ctx, ap, "give")
		},
		use: func(ctx context.Context, h any, _ []*miniredis.Miniredis) error {
			return setGet(ctx, h.(*redis.AutoPipeliner), "use")
		}},
	{name: "AsyncAutoPipeline", shards: 2, closed: true,
		give: func(ctx context.Context, c *redshard.Client) (any, error) {
			ap, err := c.AsyncAutoPipeline()
			if err != nil {
				return nil, err
			}
			return ap, setGet(ctx, ap, "give")
		},
		use: func(ctx context.Context, h any, _ []*miniredis.Miniredis) error {
			return setGet(ctx, h.(*redis.AutoPipeliner), "use")
		}},
	{name: "Conn", shards: 2, // routed over the shards' pools
		give: func(ctx context.Context, c *redshard.Client) (any, error) {
			conn := c.Conn()
			return conn, setGet(ctx, conn, "give")
		},
		use: func(ctx context.Context, h any, _ []*miniredis.Miniredis) error {
			return setGet(ctx, h.(*redis.Conn), "use")
		}},
	{name: "ConnOneShard", shards: 1, // a connection of the shard's client
		give: func(ctx context.Context, c *redshard.Client) (any, error) {
			// A Conn that initializes a new connection of the pool is
			// kept by it for good (go-redis stores the Conn's init func
			// on the connection): take one the pool has made already.
			if err := setGet(ctx, c, "warm"); err != nil {
				return nil, err
			}
			conn := c.Conn()
			return conn, setGet(ctx, conn, "give")
		},
		use: func(ctx context.Context, h any, _ []*miniredis.Miniredis) error {
			return setGet(ctx, h.(*redis.Conn), "use")
		}},
}

// published publishes a message on channel on every server and reports
// whether ps receives it.
func published(ctx context.Context, ps *redis.PubSub, servers []*miniredis.Miniredis, channel string) error {
	for _, s := range servers {
		s.Publish(channel, "hello")
	}
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		return err
	}
	if msg.Channel != channel || msg.Payload != "hello" {
		return fmt.Errorf("received %v, want hello on %s", msg, channel)
	}
	return nil
}

// setGet writes and reads back a few keys, spread over the shards.
func setGet(ctx context.Context, c redis.Cmdable, prefix string) error {
	for i := range 4 {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			return fmt.Errorf("SET %s: %w", k, err)
		}
		if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
			return fmt.Errorf("GET %s = %q, %v; want v", k, v, err)
		}
	}
	return nil
}

// TestHandedOutKeepsClientOpen: a program that keeps what a Client handed
// out and drops the Client keeps a working handle (before, the Client's
// cleanup closed the client under it); once it drops the handle too, the
// client's goroutines end.
func TestHandedOutKeepsClientOpen(t *testing.T) {
	for _, k := range handOuts {
		t.Run(k.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			servers, shards := miniShards(t, k.shards)
			before := goleak.IgnoreCurrent()
			box := &struct{ h any }{}
			d, wc := giveAndDrop(t, ctx, shards, k, box)
			t.Cleanup(func() { _ = d.Close() }) // the test failed: do not leak into the next ones

			gcUntil(t, "the Client is unreachable", func() bool { return wc.Value() == nil })
			gcUntil(t, "the Client's cleanup has run", d.Orphaned)
			if err := k.use(ctx, box.h, servers); err != nil {
				t.Fatalf("%s of an unreachable Client: %v", k.name, err)
			}
			if d.Closed() {
				t.Fatal("the client is closed while its handle is in use")
			}

			if closeOnDrop(k) {
				closeHandle(t, box.h)
			}
			box.h = nil // the last thing the client handed out is dropped
			gcUntil(t, "the client is closed", d.Closed)
			noLeak(t, before)
		})
	}
}

// TestHandedOutDroppedFirst: a handle dropped while its Client is still
// held closes nothing; the Client dropped afterwards is closed.
func TestHandedOutDroppedFirst(t *testing.T) {
	for _, k := range handOuts {
		t.Run(k.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, shards := miniShards(t, k.shards)
			before := goleak.IgnoreCurrent()
			c, err := redshard.NewClient(&redshard.Options{Shards: shards})
			if err != nil {
				t.Fatal(err)
			}
			d := redshard.Drop(c)
			t.Cleanup(func() { _ = d.Close() })
			dropHandle(t, ctx, c, k)
			gcUntil(t, "the handle is done with", func() bool { return d.Loans() == 0 })
			if d.Closed() {
				t.Fatalf("the client is closed when its %s is dropped", k.name)
			}
			if err := setGet(ctx, c, "after"); err != nil {
				t.Fatalf("the Client after its %s was dropped: %v", k.name, err)
			}
			c = nil
			gcUntil(t, "the client is closed", d.Closed)
			noLeak(t, before)
		})
	}
}

// TestHandedOutDroppedWithClient: a Client and its handle dropped together
// (their cleanups run in either order, or at once) close the client.
func TestHandedOutDroppedWithClient(t *testing.T) {
	for _, k := range handOuts {
		t.Run(k.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, shards := miniShards(t, k.shards)
			before := goleak.IgnoreCurrent()
			box := &struct{ h any }{}
			d, _ := giveAndDrop(t, ctx, shards, k, box)
			t.Cleanup(func() { _ = d.Close() })
			if closeOnDrop(k) {
				closeHandle(t, box.h)
			}
			box.h = nil
			gcUntil(t, "the client is closed", d.Closed)
			noLeak(t, before)
		})
	}
}

// closeOnDrop reports whether a handle of kind k must be closed to be done
// with (an AutoPipeliner's flushers refer to it until it is closed, as
// go-redis's goroutines refer to a PubSub whose Channel was used).
func closeOnDrop(k handOut) bool { return k.closed }

// closeHandle closes h.
func closeHandle(t *testing.T, h any) {
	t.Helper()
	if err := h.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
}

// dropHandle gets a handle of kind k from c, uses it, and drops it (closed
// first when go-redis's goroutines keep it in use until then).
//
//go:noinline
func dropHandle(t *testing.T, ctx context.Context, c *redshard.Client, k handOut) {
	h, err := k.give(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", k.name, err)
	}
	if closeOnDrop(k) {
		closeHandle(t, h)
	}
}

// TestClosedAutoPipelinerEndsItsLoan: an AutoPipeliner closed by its owner
// stops keeping the dropped Client open, though go-redis still holds the
// closed instance.
func TestClosedAutoPipelinerEndsItsLoan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, shards := miniShards(t, 2)
	before := goleak.IgnoreCurrent()
	box := &struct{ h any }{}
	k := handOuts[slices.IndexFunc(handOuts, func(k handOut) bool { return k.name == "AutoPipeline" })]
	d, wc := giveAndDrop(t, ctx, shards, k, box)
	t.Cleanup(func() { _ = d.Close() })
	gcUntil(t, "the Client's cleanup has run", func() bool { return wc.Value() == nil && d.Orphaned() })
	if err := k.use(ctx, box.h, nil); err != nil {
		t.Fatal(err)
	}
	if err := box.h.(*redis.AutoPipeliner).Close(); err != nil {
		t.Fatal(err)
	}
	gcUntil(t, "the client is closed", d.Closed) // box.h still refers to the closed AutoPipeliner
	noLeak(t, before)
	runtime.KeepAlive(box)
}

// giveAndDrop makes a client over shards, puts a handle of kind k in box,
// and drops the client: it returns only what watches the client's state
// and a weak pointer to the Client.
//
//go:noinline
func giveAndDrop(t *testing.T, ctx context.Context, shards []redshard.Shard, k handOut, box *struct{ h any }) (redshard.Dropped, weak.Pointer[redshard.Client]) {
	c, err := redshard.NewClient(&redshard.Options{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	d := redshard.Drop(c)
	h, err := k.give(ctx, c)
	if err != nil {
		_ = c.Close()
		t.Fatalf("%s: %v", k.name, err)
	}
	box.h = h
	return d, weak.Make(c)
}

// TestCallKeepsClientOpen: a Client whose last use is a Watch, a
// ForEachShard, a Pipelined or a TxPipelined stays open while fn runs with its Tx or shard clients
// (before, it was unreachable, and closed, there).
func TestCallKeepsClientOpen(t *testing.T) {
	calls := []struct {
		name string
		use  func(ctx context.Context, c *redshard.Client, inUse func() error) error
	}{
		{"Watch", func(ctx context.Context, c *redshard.Client, inUse func() error) error {
			// No key on two shards: the Tx routes each command as the Client.
			return c.Watch(ctx, func(tx *redis.Tx) error {
				if err := inUse(); err != nil {
					return err
				}
				return setGet(ctx, tx, "tx")
			})
		}},
		{"Pipelined", func(ctx context.Context, c *redshard.Client, inUse func() error) error {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				if err := inUse(); err != nil {
					return err
				}
				p.Set(ctx, "pipe", "v", 0)
				return nil
			})
			return err
		}},
		{"TxPipelined", func(ctx context.Context, c *redshard.Client, inUse func() error) error {
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				if err := inUse(); err != nil {
					return err
				}
				p.Set(ctx, "tx", "v", 0)
				return nil
			})
			return err
		}},
		{"ForEachShard", func(ctx context.Context, c *redshard.Client, inUse func() error) error {
			return c.ForEachShard(ctx, func(ctx context.Context, sc *redis.Client) error {
				if err := inUse(); err != nil {
					return err
				}
				return sc.Ping(ctx).Err()
			})
		}},
	}
	for _, call := range calls {
		t.Run(call.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, shards := miniShards(t, 2)
			before := goleak.IgnoreCurrent()
			d := lastUse(t, shards, func(c *redshard.Client, inUse func() error) error {
				return call.use(ctx, c, inUse)
			})
			gcUntil(t, "the client is closed", d.Closed)
			noLeak(t, before)
		})
	}
}

// lastUse makes a client over shards and calls use with it as the
// client's last use; inUse, called inside, runs the garbage collector and
// reports an error if the client is unreachable or closed by then.
//
//go:noinline
func lastUse(t *testing.T, shards []redshard.Shard, use func(c *redshard.Client, inUse func() error) error) redshard.Dropped {
	c, err := redshard.NewClient(&redshard.Options{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	d := redshard.Drop(c)
	t.Cleanup(func() { _ = d.Close() })
	wc := weak.Make(c)
	if err := setGet(context.Background(), c, "first"); err != nil { // dials: the heartbeat runs
		t.Fatal(err)
	}
	inUse := func() error {
		for range 3 {
			runtime.GC()
		}
		if wc.Value() == nil {
			return fmt.Errorf("the Client is unreachable while its call runs")
		}
		if d.Closed() {
			return fmt.Errorf("the client is closed while its call runs")
		}
		return nil
	}
	if err := use(c, inUse); err != nil {
		t.Fatal(err)
	}
	return d
}

// miniShards starts n miniredis servers and returns them and their shards.
func miniShards(t *testing.T, n int) ([]*miniredis.Miniredis, []redshard.Shard) {
	var servers []*miniredis.Miniredis
	var shards []redshard.Shard
	for i := range n {
		s := miniredis.RunT(t)
		servers = append(servers, s)
		shards = append(shards, redshard.Shard{Name: fmt.Sprintf("s%d", i), Addr: s.Addr()})
	}
	return servers, shards
}

// gcUntil runs the garbage collector until cond holds: cleanups run after a
// collection, on goroutines of their own. The bound is for a test that
// fails, not a time the test must keep: 1000 rounds of 10ms.
func gcUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		runtime.GC()
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("not so after 1000 collections: %s", what)
}

// noLeak fails the test if goroutines started since before are left: the
// cleanup's close runs on its own goroutine, so goleak's retries (a few
// seconds each time, ten times at most on a loaded machine) wait for it.
func noLeak(t *testing.T, before goleak.Option) {
	t.Helper()
	var err error
	for range 10 {
		if err = goleak.Find(before); err == nil {
			return
		}
	}
	t.Fatalf("goroutines of a dropped client: %v", err)
}
