package redshard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

// flights runs the calls redshard shares between callers (hot-key reads
// and copy fills, handoffs of moved keys, GetOrLoad loads): one call per
// key at a time, detached from the callers' contexts so that one caller
// giving up does not fail the others, bounded by a deadline, and cancelled
// and waited for by Client.Close. It is safe for concurrent use.
type flights struct {
	ctx     context.Context // cancelled by close
	cancel  context.CancelFunc
	running tracker
}

// tracker counts running calls so that close can wait for them; a call
// that would start after close is refused. It is safe for concurrent use;
// its zero value is open.
type tracker struct {
	mu     sync.Mutex // guards closed; orders wg.Add before close's wg.Wait
	closed bool
	wg     sync.WaitGroup
}

// enter registers a call, or reports that close has begun.
func (t *tracker) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// leave ends a call registered by enter.
func (t *tracker) leave() { t.wg.Done() }

// close refuses new calls and waits for the running ones. Idempotent.
func (t *tracker) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}

func newFlights() *flights {
	f := &flights{}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// do runs fn once for all callers asking g with the same key at the same
// time, and waits for its result or for the caller's ctx. fn runs with a
// context that keeps ctx's values but not its cancellation, ends after
// timeout, and is cancelled by close. joined reports that this caller got
// another caller's result instead of running fn itself. After close, fn
// does not run and do returns redis.ErrClosed.
func (f *flights) do(ctx context.Context, g *singleflight.Group, key string, timeout time.Duration,
	fn func(context.Context) (any, error)) (v any, joined bool, err error) {
	var led atomic.Bool
	ch := g.DoChan(key, func() (any, error) {
		led.Store(true)
		if !f.running.enter() {
			return nil, redis.ErrClosed
		}
		defer f.running.leave()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		stop := context.AfterFunc(f.ctx, cancel)
		defer stop()
		return fn(fctx)
	})
	select {
	case <-ctx.Done():
		return nil, !led.Load(), ctx.Err()
	case r := <-ch:
		return r.Val, !led.Load(), r.Err
	}
}

// close cancels the running calls and waits for them to return. Calls
// started later do not run. It is idempotent.
func (f *flights) close() {
	f.cancel()
	f.running.close()
}
