package redshard

import (
	"runtime"
	"sync"
	"weak"

	"github.com/redis/go-redis/v9"
)

// What a Client hands out keeps it open.
//
// A Client that is never closed is closed once it is unreachable (NewClient
// adds a cleanup to the handle), but what it handed out refers to its state,
// never to the handle: a PubSub reaches the state through its multiplexer, an
// AutoPipeliner through its front client, a Conn through its hooks. So each
// of them is lent: counted as open from the moment it is handed out until
// it is done with, and the handle's cleanup closes the client only once no
// loan is open; otherwise it marks the client orphaned, and the last loan to
// end closes it. Both end on a cleanup or a goroutine of their own, in any
// order, under loans.mu.
//
// go-redis lets us see an AutoPipeliner close (WaitClosed), but not a PubSub or
// a Conn: those are done with once unreachable, which a closed one soon is
// (not a PubSub whose Channel runs, nor a Conn of one shard's client that
// made a new connection: go-redis refers to those until they are closed,
// and to the latter for good).
// Calls that hand out nothing that outlives them (Watch and its Tx,
// ForEachShard) keep the handle reachable until they return.

// loans counts what a client handed out that is still in use, and whether
// its handle is gone. Its zero value is ready; it is safe for concurrent use.
type loans struct {
	mu       sync.Mutex // guards the fields below
	open     int        // loans not ended
	orphaned bool       // the handle's cleanup has run
	// aps are the AutoPipeliners lent (blocking, async): go-redis hands
	// out one instance until it is closed, and it is lent once.
	aps [2]weak.Pointer[redis.AutoPipeliner]
}

// loan is one thing a client handed out, counted open until end.
type loan struct {
	c    *client
	once sync.Once
}

// lend counts one more thing handed out. The caller keeps the Client handle
// reachable until lend has returned (runtime.KeepAlive), so that the handle's
// cleanup, which may close the client once no loan is open, runs after it.
func (c *client) lend() *loan {
	c.loans.mu.Lock()
	c.loans.open++
	c.loans.mu.Unlock()
	return &loan{c: c}
}

// end ends the loan (once; later calls do nothing): the last loan of an
// orphaned client closes it.
func (l *loan) end() {
	l.once.Do(func() {
		ls := &l.c.loans
		ls.mu.Lock()
		ls.open--
		last := ls.open == 0 && ls.orphaned
		ls.mu.Unlock()
		if last {
			l.c.close()
		}
	})
}

// lendUntilUnreachable loans v until v is unreachable.
func lendUntilUnreachable[T any](c *client, v *T) {
	runtime.AddCleanup(v, func(l *loan) {
		// Close waits for the client's shared calls: not on the
		// runtime's cleanup goroutine, which runs cleanups one at a time.
		go l.end()
	}, c.lend())
}

// orphan is the cleanup of the client's handle: the client closes now if
// nothing it handed out is in use, else when the last of it is done with.
func (c *client) orphan() {
	c.loans.mu.Lock()
	c.loans.orphaned = true
	idle := c.loans.open == 0
	c.loans.mu.Unlock()
	if idle {
		c.close()
	}
}

// lendAutoPipeliner loans ap, the blocking (async false) or async
// AutoPipeliner of the client, until it is closed, by its owner or with
// the client. An unclosed AutoPipeliner is never unreachable (its
// flushers refer to it), so a goroutine waits for its Close.
func (c *client) lendAutoPipeliner(ap *redis.AutoPipeliner, async bool) {
	i := 0
	if async {
		i = 1
	}
	w := weak.Make(ap)
	c.loans.mu.Lock()
	lent := c.loans.aps[i] == w
	c.loans.aps[i] = w
	c.loans.mu.Unlock()
	if lent {
		return
	}
	l := c.lend()
	go func() {
		_ = ap.WaitClosed()
		l.end()
	}()
}
