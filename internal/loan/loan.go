package loan

import (
	"runtime"
	"sync"
	"weak"

	"github.com/redis/go-redis/v9"
)

// Loans counts what a client handed out that is still in use, and whether
// its handle is gone. Make it with New; it is safe for concurrent use.
type Loans struct {
	close func() // closes the client: once orphaned and no loan is open

	mu       sync.Mutex // guards the fields below
	open     int        // loans not ended
	orphaned bool       // the handle's cleanup has run (Orphan)
	// aps are the AutoPipeliners lent (blocking, async): go-redis hands
	// out one instance until it is closed, and it is lent once.
	aps [2]weak.Pointer[redis.AutoPipeliner]
}

// New returns the Loans of a client that close closes. close is called at
// most once by the Loans, from a goroutine other than the runtime's
// cleanup goroutine, and may block (a client's Close waits for its shared
// calls).
func New(close func()) *Loans { return &Loans{close: close} }

// loan is one thing a client handed out, counted open until end.
type loan struct {
	ls   *Loans
	once sync.Once
}

// lend counts one more thing handed out. The caller keeps the client's
// handle reachable until lend has returned (runtime.KeepAlive), so that
// the handle's cleanup, which may close the client once no loan is open,
// runs after it.
func (ls *Loans) lend() *loan {
	ls.mu.Lock()
	ls.open++
	ls.mu.Unlock()
	return &loan{ls: ls}
}

// end ends the loan (once; later calls do nothing): the last loan of an
// orphaned client closes it.
func (l *loan) end() {
	l.once.Do(func() {
		ls := l.ls
		ls.mu.Lock()
		ls.open--
		last := ls.open == 0 && ls.orphaned
		ls.mu.Unlock()
		if last {
			ls.close()
		}
	})
}

// UntilUnreachable lends v until v is unreachable. The caller keeps the
// client's handle reachable until it has returned.
func UntilUnreachable[T any](ls *Loans, v *T) {
	runtime.AddCleanup(v, func(l *loan) {
		// close waits for the client's shared calls: not on the
		// runtime's cleanup goroutine, which runs cleanups one at a time.
		go l.end()
	}, ls.lend())
}

// Orphan is the cleanup of the client's handle: the client closes now if
// nothing it handed out is in use, else when the last of it is done with.
// Call it on a goroutine of its own, not the runtime's cleanup goroutine.
func (ls *Loans) Orphan() {
	ls.mu.Lock()
	ls.orphaned = true
	idle := ls.open == 0
	ls.mu.Unlock()
	if idle {
		ls.close()
	}
}

// UntilClosed lends ap, the blocking (async false) or async AutoPipeliner
// of the client, until it is closed, by its owner or with the client. An
// unclosed AutoPipeliner is never unreachable (its flushers refer to it),
// so a goroutine waits for its Close. Lending the same instance again does
// nothing. The caller keeps the client's handle reachable until it has
// returned.
func (ls *Loans) UntilClosed(ap *redis.AutoPipeliner, async bool) {
	i := 0
	if async {
		i = 1
	}
	w := weak.Make(ap)
	ls.mu.Lock()
	lent := ls.aps[i] == w
	ls.aps[i] = w
	ls.mu.Unlock()
	if lent {
		return
	}
	l := ls.lend()
	go func() {
		_ = ap.WaitClosed()
		l.end()
	}()
}

// State returns how many loans are open and whether the handle's cleanup
// has run (Orphan), for tests.
func (ls *Loans) State() (open int, orphaned bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.open, ls.orphaned
}
