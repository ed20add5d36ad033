package registry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/registrytest"
)

const faultDeadline = 20 * time.Second

func openRedis(t *testing.T, addr, name string, opt *registry.Options) registry.Registry {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	r, err := registry.NewRedisOptions(rdb, name, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Close()
		_ = rdb.Close()
	})
	return r
}

func startWatch(t *testing.T, r registry.Registry) <-chan registry.Config {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := r.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func expect(t *testing.T, ch <-chan registry.Config, want registry.Version) time.Duration {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(faultDeadline)
	defer timer.Stop()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatalf("watch closed while waiting for %s", want)
		}
		if c.Version() != want {
			t.Fatalf("watcher delivered %s, want %s", c.Version(), want)
		}
	case <-timer.C:
		t.Fatalf("%s not delivered within %v", want, faultDeadline)
	}
	return time.Since(start)
}

// TestRedisResubscribe cuts the watcher's subscription (CLIENT KILL TYPE
// pubsub) and publishes at once: the announcement may be lost while
// go-redis re-subscribes, but the re-subscription makes the watcher
// re-read, so the config arrives without waiting for a poll (the poll is
// an hour here).
func TestRedisResubscribe(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	const name = "redshard:registry:resubscribe"
	pub := openRedis(t, srv.Addr(), name, nil)
	w := openRedis(t, srv.Addr(), name, &registry.Options{PollInterval: time.Hour})
	ctx := context.Background()
	prev := registrytest.Next(t, registry.Config{}, 0)
	if err := pub.Publish(ctx, registry.Config{}, prev); err != nil {
		t.Fatal(err)
	}
	ch := startWatch(t, w)
	expect(t, ch, prev.Version())
	for i := range 5 {
		if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
		next := registrytest.Next(t, prev, i+1)
		if err := pub.Publish(ctx, prev, next); err != nil {
			t.Fatal(err)
		}
		t.Logf("after a killed subscription, %s delivered in %v", next.Version(), expect(t, ch, next.Version()).Round(time.Microsecond))
		prev = next
	}
}

// TestRedisOutage stops the registry's server: the watcher keeps its last
// config and stays open, the other methods fail; the server comes back
// empty and is re-seeded. The watcher delivers nothing older than what it
// had, and the first newer config.
func TestRedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	const name = "redshard:registry:outage"
	pub := openRedis(t, srv.Addr(), name, &registry.Options{MemberTTL: time.Minute})
	w := openRedis(t, srv.Addr(), name, &registry.Options{PollInterval: 50 * time.Millisecond})
	ctx := context.Background()
	var prev registry.Config
	for i := range 5 { // epoch 1 stable ... epoch 2 stable
		next := registrytest.Next(t, prev, i)
		if err := pub.Publish(ctx, prev, next); err != nil {
			t.Fatal(err)
		}
		prev = next
	}
	ch := startWatch(t, w)
	expect(t, ch, prev.Version())

	srv.Kill()
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for what, err := range map[string]error{
		"Get":       func() error { _, err := pub.Get(octx); return err }(),
		"Publish":   pub.Publish(octx, prev, registrytest.Next(t, prev, 9)),
		"Heartbeat": pub.Heartbeat(octx, registry.Member{ID: "p"}),
		"Members":   func() error { _, err := pub.Members(octx); return err }(),
		"Lock":      func() error { _, err := pub.Lock(octx, "o", time.Second); return err }(),
	} {
		if err == nil || errors.Is(err, registry.ErrConflict) || errors.Is(err, registry.ErrLocked) {
			t.Errorf("%s with the registry down: %v, want a connection error", what, err)
		}
	}
	select {
	case c, ok := <-ch:
		t.Fatalf("watcher delivered %s (open %v) with the registry down", c.Version(), ok)
	case <-time.After(200 * time.Millisecond): // a few polls
	}

	srv.Restart(t) // empty
	// Re-seeding from epoch 1 is ignored up to the version the watcher
	// has; the first newer config is delivered.
	var seed registry.Config
	for i := range 6 { // epoch 1 stable ... epoch 3 prepare
		next := registrytest.Next(t, seed, 10+i)
		if err := pub.Publish(ctx, seed, next); err != nil {
			t.Fatal(err)
		}
		seed = next
	}
	if seed.Version() != (registry.Version{Epoch: 3, Phase: registry.Prepare}) {
		t.Fatalf("seeded up to %s", seed.Version())
	}
	t.Logf("after the registry came back, %s delivered in %v", seed.Version(), expect(t, ch, seed.Version()).Round(time.Microsecond))
}

func TestNewRedisInvalid(t *testing.T) {
	if _, err := registry.NewRedisOptions(nil, "x", nil); !errors.Is(err, registry.ErrInvalidOptions) {
		t.Fatalf("NewRedisOptions(nil): %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if _, err := registry.NewRedisOptions(rdb, "", nil); !errors.Is(err, registry.ErrInvalidOptions) {
		t.Fatalf("NewRedisOptions with an empty name: %v", err)
	}
	if _, err := registry.NewRedisOptions(rdb, "x", &registry.Options{MemberTTL: -1}); !errors.Is(err, registry.ErrInvalidOptions) {
		t.Fatalf("NewRedisOptions with a negative MemberTTL: %v", err)
	}
	r := registry.NewRedis(rdb, "")
	defer r.Close()
	if _, err := r.Watch(context.Background()); !errors.Is(err, registry.ErrInvalidOptions) {
		t.Fatalf("Watch of a registry without a name: %v", err)
	}
	if err := r.Heartbeat(context.Background(), registry.Member{ID: "x"}); !errors.Is(err, registry.ErrInvalidOptions) {
		t.Fatalf("Heartbeat of a registry without a name: %v", err)
	}
}

// TestRedisLockRemoved deletes a held lock behind its holder's back (an
// operator clearing it): the holder's Lost fires at its next renewal, and
// Unlock reports ErrLockLost.
func TestRedisLockRemoved(t *testing.T) {
	srv := redistest.Start(t)
	const name = "redshard:registry:lock-removed"
	r := openRedis(t, srv.Addr(), name, nil)
	ctx := context.Background()
	l, err := r.Lock(ctx, "alice", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Client(t).Del(ctx, name+":lock").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(faultDeadline):
		t.Fatal("Lost did not fire after the lock was deleted")
	}
	if err := l.Unlock(ctx); !errors.Is(err, registry.ErrLockLost) {
		t.Fatalf("Unlock of a removed lock: %v, want ErrLockLost", err)
	}
}
