package etcdregistry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redshard/redshard/internal/blackhole"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/etcdregistry"
	"github.com/redshard/redshard/registry/registrytest"
)

// TestEtcdBlackholed puts the etcd server behind a proxy that stops
// carrying bytes without closing anything (packets dropped): every method
// called with a 500ms deadline returns an error, rather than waiting for
// the connection to come back.
func TestEtcdBlackholed(t *testing.T) {
	srv := startEtcd(t)
	p, err := blackhole.Listen(strings.TrimPrefix(srv.Endpoint(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	r, err := etcdregistry.NewOptions(client(t, "http://"+p.Addr()), "/blackholed/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Blackhole(false); _ = r.Close() })
	ctx := context.Background()
	first := registrytest.Next(t, registry.Config{}, 0)
	if err := r.Publish(ctx, registry.Config{}, first); err != nil {
		t.Fatal(err)
	}
	if err := r.Heartbeat(ctx, registry.Member{ID: "m"}); err != nil {
		t.Fatal(err)
	}
	held, err := r.Lock(ctx, "held", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	calls := registrytest.Calls(t, r, first, held)
	calls = append(calls, registrytest.Call{What: "Heartbeat of a new member", Call: func(ctx context.Context) error {
		return r.Heartbeat(ctx, registry.Member{ID: "n"})
	}})
	registrytest.CallEach(t, calls, 5*time.Second, func(err error) bool {
		return errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline")
	}, func() { _ = p.Close() })
}
