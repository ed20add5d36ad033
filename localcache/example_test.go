package localcache_test

import (
	"fmt"
	"time"

	"github.com/redshard/redshard/localcache"
)

func Example() {
	c, err := localcache.New(&localcache.Config{MaxBytes: 16 << 20})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// A hot key's reply, read from shard 3.
	c.Set(3, "user:42", "get", "Ada", 3, time.Second)
	c.Set(3, "user:42", "strlen", int64(3), 8, time.Second)
	c.Wait() // tests only: new entries become visible asynchronously

	v, ok := c.Get(3, "user:42", "get")
	fmt.Println(v, ok)

	// A write through this client invalidates every cached reply of the
	// key before it returns.
	c.InvalidateKey("user:42")
	_, ok = c.Get(3, "user:42", "strlen")
	fmt.Println(ok)
	// Output:
	// Ada true
	// false
}

func ExampleCache_SetWithTicket() {
	c, err := localcache.New(nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// Take the ticket before sending the read to the shard...
	tk := c.Ticket(0, "counter")
	reply := "41" // ...the read is in flight...
	// ...and a write by this client lands meanwhile:
	c.InvalidateKey("counter")

	// The reply may predate the write, so it is not cached.
	fmt.Println(c.SetWithTicket(tk, "get", reply, int64(len(reply)), time.Second))

	// A reply read under a fresh ticket is.
	tk = c.Ticket(0, "counter")
	fmt.Println(c.SetWithTicket(tk, "get", "42", 2, time.Second))
	c.Wait()
	fmt.Println(c.Get(0, "counter", "get"))
	// Output:
	// false
	// true
	// 42 true
}

func ExampleNew() {
	_, err := localcache.New(&localcache.Config{MaxBytes: -1})
	fmt.Println(err)
	// Output:
	// localcache: invalid config: MaxBytes -1 is negative
}
