package etcdregistry_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/etcdregistry"
	"github.com/redshard/redshard/registry/registrytest"
)

// client returns an etcd client of endpoint, closed when t ends.
func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// namespace returns a registrytest.Namespace under a prefix of its own.
// Every registry has its own client, so that severing one (closing its
// client) is a process dying.
func namespace(t *testing.T, endpoint string) registrytest.Namespace {
	var n atomic.Int64
	prefix := fmt.Sprintf("/redshard/registry/%s/%d/", t.Name(), time.Now().UnixNano())
	return func(o registrytest.Open) (registry.Registry, func()) {
		n.Add(1)
		cli := client(t, endpoint)
		opt := &registry.Options{PollInterval: o.PollInterval, MemberTTL: o.MemberTTL}
		open := etcdregistry.NewOptions
		if o.Lossy {
			open = etcdregistry.NewLossy
		}
		r, err := open(cli, prefix, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return r, func() { _ = cli.Close() }
	}
}

func TestEtcd(t *testing.T) {
	endpoint := startEtcd(t).Endpoint()
	registrytest.Run(t, func(t *testing.T) registrytest.Namespace { return namespace(t, endpoint) })
}

// TestWatchAfterCompaction starts a watcher whose watch needs a compacted
// revision: it re-lists and delivers the stored config, then what follows.
func TestWatchAfterCompaction(t *testing.T) {
	cli := client(t, startEtcd(t).Endpoint())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const prefix = "/compaction/"
	pub := etcdregistry.New(cli, prefix)
	defer pub.Close()
	var prev registry.Config
	for i := range 6 {
		next := registrytest.Next(t, prev, i)
		if err := pub.Publish(ctx, prev, next); err != nil {
			t.Fatal(err)
		}
		prev = next
	}
	resp, err := cli.Get(ctx, "nothing")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	w, err := etcdregistry.NewWatchingFrom(cli, prefix, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ch, err := w.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := <-ch; c.Version() != prev.Version() {
		t.Fatalf("first config %s, want the stored %s", c.Version(), prev.Version())
	}
	// The first publish may be found by the re-list itself; the second
	// comes through the new watch.
	for i := 7; i < 9; i++ {
		next := registrytest.Next(t, prev, i)
		if err := pub.Publish(ctx, prev, next); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-ch:
			if c.Version() != next.Version() {
				t.Fatalf("after re-listing the watcher delivered %s, want %s", c.Version(), next.Version())
			}
		case <-ctx.Done():
			t.Fatal("nothing delivered after a compacted watch")
		}
		prev = next
	}
}

func TestInvalidOptions(t *testing.T) {
	if _, err := etcdregistry.NewOptions(nil, "/x/", nil); !errors.Is(err, registry.ErrInvalidOptions) {
		t.Fatalf("NewOptions(nil client): %v, want ErrInvalidOptions", err)
	}
	if _, err := etcdregistry.NewOptions(&clientv3.Client{}, "/x/", &registry.Options{PollInterval: -1}); !errors.Is(err, registry.ErrInvalidOptions) {
		t.Fatalf("NewOptions(PollInterval -1): %v, want ErrInvalidOptions", err)
	}
	r := etcdregistry.New(nil, "")
	if _, err := r.Get(context.Background()); !errors.Is(err, registry.ErrInvalidOptions) {
		t.Fatalf("Get on a registry without a client: %v, want ErrInvalidOptions", err)
	}
	_ = r.Close()
}
