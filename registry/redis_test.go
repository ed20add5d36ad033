package registry_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/registrytest"
)

// redisNamespace returns a registrytest.Namespace on the server at addr,
// under a name of its own. Every registry has its own go-redis client, so
// that severing one (closing its client) is a process dying.
func redisNamespace(t *testing.T, addr string) registrytest.Namespace {
	var n atomic.Int64
	name := fmt.Sprintf("redshard:registry:%s:%d", t.Name(), time.Now().UnixNano())
	return func(o registrytest.Open) (registry.Registry, func()) {
		n.Add(1)
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		opt := &registry.Options{PollInterval: o.PollInterval, MemberTTL: o.MemberTTL}
		open := registry.NewRedisOptions
		if o.Lossy {
			open = registry.NewRedisLossy
		}
		r, err := open(rdb, name, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			_ = rdb.Close()
		})
		return r, func() { _ = rdb.Close() }
	}
}

func TestRedisMiniredis(t *testing.T) {
	registrytest.Run(t, func(t *testing.T) registrytest.Namespace {
		return redisNamespace(t, miniredis.RunT(t).Addr())
	})
}

func TestRedisServer(t *testing.T) {
	srv := redistest.Start(t)
	registrytest.Run(t, func(t *testing.T) registrytest.Namespace {
		return redisNamespace(t, srv.Addr())
	})
}
