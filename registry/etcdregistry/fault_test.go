package etcdregistry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/etcdregistry"
	"github.com/redshard/redshard/registry/registrytest"
)

// TestEtcdOutage kills the etcd server: the watcher stays open and keeps
// its last config, the other methods fail; the server restarts on its data,
// and the watcher delivers what is published next.
func TestEtcdOutage(t *testing.T) {
	srv := startEtcd(t)
	const prefix = "/outage/"
	pub := etcdregistry.New(client(t, srv.Endpoint()), prefix)
	defer pub.Close()
	w := etcdregistry.New(client(t, srv.Endpoint()), prefix)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var prev registry.Config
	for i := range 5 {
		next := registrytest.Next(t, prev, i)
		if err := pub.Publish(ctx, prev, next); err != nil {
			t.Fatal(err)
		}
		prev = next
	}
	ch, err := w.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := <-ch; c.Version() != prev.Version() {
		t.Fatalf("watch began with %s, want %s", c.Version(), prev.Version())
	}

	srv.Kill()
	octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
	defer ocancel()
	for what, err := range map[string]error{
		"Get":       func() error { _, err := pub.Get(octx); return err }(),
		"Publish":   pub.Publish(octx, prev, registrytest.Next(t, prev, 9)),
		"Heartbeat": pub.Heartbeat(octx, registry.Member{ID: "p"}),
		"Members":   func() error { _, err := pub.Members(octx); return err }(),
		"Lock":      func() error { _, err := pub.Lock(octx, "o", time.Second); return err }(),
	} {
		if err == nil || errors.Is(err, registry.ErrConflict) || errors.Is(err, registry.ErrLocked) {
			t.Errorf("%s with etcd down: %v, want an error reaching it", what, err)
		}
	}
	select {
	case c, ok := <-ch:
		t.Fatalf("watcher delivered %s (open %v) with etcd down", c.Version(), ok)
	case <-time.After(200 * time.Millisecond):
	}

	srv.Restart(t)
	next := registrytest.Next(t, prev, 10)
	start := time.Now()
	if err := pub.Publish(ctx, prev, next); err != nil {
		t.Fatalf("Publish after the restart: %v", err)
	}
	select {
	case c := <-ch:
		if c.Version() != next.Version() {
			t.Fatalf("after the restart the watcher delivered %s, want %s", c.Version(), next.Version())
		}
		t.Logf("after etcd restarted, %s delivered %v after Publish began", c.Version(), time.Since(start).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("nothing delivered after etcd restarted")
	}
}

// TestEtcdLockRemoved deletes a held lock's key behind its holder's back
// (an operator clearing it): the holder's Lost fires, and Unlock reports
// ErrLockLost.
func TestEtcdLockRemoved(t *testing.T) {
	cli := client(t, startEtcd(t).Endpoint())
	const prefix = "/lock-removed/"
	r := etcdregistry.New(cli, prefix)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := r.Lock(ctx, "alice", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost fired while the lock was held")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := cli.Delete(ctx, prefix+"lock"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-ctx.Done():
		t.Fatal("Lost did not fire after the lock was deleted")
	}
	if err := l.Unlock(ctx); !errors.Is(err, registry.ErrLockLost) {
		t.Fatalf("Unlock of a removed lock: %v, want ErrLockLost", err)
	}
}
