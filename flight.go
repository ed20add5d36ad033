package redshard

import (
	"context"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/internal/flight"
)

// flights is the Client's flight.Runner (internal/flight): the calls it
// shares between callers (hot-key reads and copy fills, handoffs of moved
// keys, GetOrLoad loads) and the goroutines of its Pub/Sub, cancelled and
// waited for by Client.Close. It is safe for concurrent use.
type flights struct {
	ctx context.Context // r.Context(): cancelled by close
	r   *flight.Runner
}

func newFlights() *flights {
	r := flight.New()
	return &flights{ctx: r.Context(), r: r}
}

// do is flight.Runner.Do.
func (f *flights) do(ctx context.Context, g *singleflight.Group, key string, timeout time.Duration,
	fn func(context.Context) (any, error)) (v any, joined bool, err error) {
	return f.r.Do(ctx, g, key, timeout, fn)
}

// close cancels the running calls and waits for them to return. Calls
// started later do not run. It is idempotent.
func (f *flights) close() { f.r.Close() }
