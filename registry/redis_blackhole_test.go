package registry_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/blackhole"
	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/registrytest"
)

// TestRedisBlackholed puts the registry's server behind a proxy that stops
// carrying bytes without closing anything (packets dropped): every method
// called with a 500ms deadline returns an error once the deadline has
// passed, whatever timeouts the registry's client was built with. go-redis
// ignores context deadlines on sockets unless a client has
// ContextTimeoutEnabled, so each call used to block for the client's
// ReadTimeout (3s by default, for ever with -1), and a heartbeat could not
// fail in time for its member to fence itself.
func TestRedisBlackholed(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name string
		opt  redis.Options
		// bound is how long a call may take before the test says it hung:
		// with go-redis's defaults, the client's own ReadTimeout (3s) would
		// end it, and returning after it proves nothing.
		bound time.Duration
	}{
		{"go-redis defaults", redis.Options{}, 3 * time.Second},
		{"ReadTimeout 1m", redis.Options{ReadTimeout: time.Minute, WriteTimeout: time.Minute}, 5 * time.Second},
		{"no ReadTimeout", redis.Options{ReadTimeout: -1, WriteTimeout: -1}, 5 * time.Second},
		{"ContextTimeoutEnabled", redis.Options{ReadTimeout: time.Minute, ContextTimeoutEnabled: true}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := blackhole.Listen(srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			opt := tc.opt
			opt.Addr = p.Addr()
			rdb := redis.NewClient(&opt)
			r, err := registry.NewRedisOptions(rdb, "redshard:registry:blackholed:"+tc.name, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close(); _ = rdb.Close() })

			ctx := context.Background()
			first := registrytest.Next(t, registry.Config{}, 0)
			if err := r.Publish(ctx, registry.Config{}, first); err != nil {
				t.Fatal(err)
			}
			held, err := r.Lock(ctx, "held", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			p.Blackhole(true)
			registrytest.CallEach(t, registrytest.Calls(t, r, first, held), tc.bound, isTimeout, func() { _ = p.Close() })
			p.Blackhole(false)
		})
	}
}

// isTimeout reports whether err says a deadline or an I/O timeout ended
// the call.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
