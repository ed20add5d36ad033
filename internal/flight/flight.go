package flight

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

// Runner runs the calls a client shares between callers, and the
// goroutines it starts for them, until Close. It is safe for concurrent
// use; make one with New.
type Runner struct {
	ctx     context.Context // cancelled by Close
	cancel  context.CancelFunc
	running Tracker
}

// Tracker counts running calls so that Close can wait for them; a call
// that would start after Close is refused. It is safe for concurrent use;
// its zero value is open.
type Tracker struct {
	mu     sync.Mutex // guards closed; orders wg.Add before Close's wg.Wait
	closed bool
	wg     sync.WaitGroup
}

// Enter registers a call, or reports (false) that Close has begun.
func (t *Tracker) Enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// Leave ends a call registered by Enter.
func (t *Tracker) Leave() { t.wg.Done() }

// Close refuses new calls and waits for the running ones. It is
// idempotent.
func (t *Tracker) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}

// New returns a Runner that runs calls until Close.
func New() *Runner {
	r := &Runner{}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// Context returns the Runner's context, cancelled when Close begins: the
// parent of work that must end with the client, whoever started it.
func (r *Runner) Context() context.Context { return r.ctx }

// Do runs fn once for all callers asking g with the same key at the same
// time, and waits for its result or for the caller's ctx. fn runs with a
// context that keeps ctx's values but not its cancellation, ends after
// timeout, and is cancelled by Close. joined reports that this caller got
// another caller's result instead of running fn itself. After Close, fn
// does not run and Do returns redis.ErrClosed.
func (r *Runner) Do(ctx context.Context, g *singleflight.Group, key string, timeout time.Duration,
	fn func(context.Context) (any, error)) (v any, joined bool, err error) {
	var led atomic.Bool
	ch := g.DoChan(key, func() (any, error) {
		led.Store(true)
		if !r.running.Enter() {
			return nil, redis.ErrClosed
		}
		defer r.running.Leave()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		stop := context.AfterFunc(r.ctx, cancel)
		defer stop()
		return fn(fctx)
	})
	select {
	case <-ctx.Done():
		return nil, !led.Load(), ctx.Err()
	case res := <-ch:
		return res.Val, !led.Load(), res.Err
	}
}

// Go runs fn in a goroutine that Close waits for, and reports whether it
// did: after Close has begun, fn does not run. fn should return once
// Context is done.
func (r *Runner) Go(fn func()) bool {
	if !r.running.Enter() {
		return false
	}
	go func() {
		defer r.running.Leave()
		fn()
	}()
	return true
}

// Close cancels the running calls and waits for them (and the goroutines
// of Go) to return. Calls started later do not run. It is idempotent.
func (r *Runner) Close() {
	r.cancel()
	r.running.Close()
}
