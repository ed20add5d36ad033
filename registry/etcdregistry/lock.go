package etcdregistry

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/redshard/redshard/registry"
)

// Lock implements registry.Registry. The lock is a key bound to a lease of
// its own, created only if the key does not exist (CreateRevision 0); the
// session keeps the lease alive until Unlock or Close, and when it cannot
// (the cluster unreachable past the ttl), the lease and the key expire.
func (r *etcdRegistry) Lock(ctx context.Context, owner string, ttl time.Duration) (registry.DriverLock, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if owner == "" || ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: lock owner %q, ttl %v: want an owner and a ttl of at least 1ms", registry.ErrInvalidArgument, owner, ttl)
	}
	g, err := r.cli.Grant(ctx, seconds(ttl))
	if err != nil {
		return nil, fmt.Errorf("registry: lock %s: grant a lease: %w", r.lockKey, err)
	}
	sess, err := concurrency.NewSession(r.cli, concurrency.WithLease(g.ID), concurrency.WithContext(r.ctx))
	if err != nil {
		_, _ = r.cli.Revoke(ctx, g.ID)
		return nil, fmt.Errorf("registry: lock %s: %w", r.lockKey, err)
	}
	txn, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(r.lockKey), "=", 0)).
		Then(clientv3.OpPut(r.lockKey, owner, clientv3.WithLease(g.ID))).
		Else(clientv3.OpGet(r.lockKey)).
		Commit()
	if err != nil || !txn.Succeeded {
		sess.Orphan()
		_, _ = r.cli.Revoke(ctx, g.ID)
		if err != nil {
			return nil, fmt.Errorf("registry: lock %s: %w", r.lockKey, err)
		}
		holder := "(expired)"
		if kvs := txn.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			holder = string(kvs[0].Value)
		}
		return nil, fmt.Errorf("%w: %s is held by %q", registry.ErrLocked, r.lockKey, holder)
	}
	wctx, stopWatch := context.WithCancel(r.ctx)
	l := &etcdLock{
		r: r, sess: sess, rev: txn.Header.Revision,
		lost: make(chan struct{}), stopWatch: stopWatch, done: make(chan struct{}),
	}
	r.mu.Lock()
	r.locks[l] = struct{}{}
	r.mu.Unlock()
	if err := r.start(func() { l.watch(wctx) }); err != nil {
		close(l.done)
		_ = l.Unlock(ctx)
		return nil, err
	}
	return l, nil
}

// etcdLock is a held etcd driver lock.
type etcdLock struct {
	r    *etcdRegistry
	sess *concurrency.Session
	rev  int64 // the lock key's CreateRevision

	lost      chan struct{} // closed by markLost
	lostOnce  sync.Once
	stopWatch context.CancelFunc // stops watch
	done      chan struct{}      // closed when watch has returned

	once sync.Once
	err  error // set in once
}

// Lost implements registry.DriverLock.
func (l *etcdLock) Lost() <-chan struct{} { return l.lost }

func (l *etcdLock) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// watch marks the lock lost when its session ends (the lease expired or
// could not be kept alive) or its key is deleted or replaced — by an
// operator, say — until Unlock or Close. A broken watch is followed by a
// read of the key and a new watch.
func (l *etcdLock) watch(ctx context.Context) {
	defer close(l.done)
	defer l.markLost()
	from := l.rev + 1
	for {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := l.r.cli.Watch(wctx, l.r.lockKey, clientv3.WithRev(from))
		broken := false
		for !broken {
			select {
			case <-ctx.Done():
				cancel()
				return
			case <-l.sess.Done():
				cancel()
				return
			case resp, ok := <-wch:
				if !ok || resp.Canceled || resp.Err() != nil {
					broken = true
					break
				}
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypeDelete || ev.Kv.CreateRevision != l.rev {
						cancel()
						return
					}
					from = ev.Kv.ModRevision + 1
				}
			}
		}
		cancel()
		for {
			resp, err := l.r.cli.Get(ctx, l.r.lockKey)
			if err == nil {
				if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.rev {
					return
				}
				from = resp.Header.Revision + 1
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-l.sess.Done():
				return
			case <-time.After(l.r.opt.PollInterval):
			}
		}
	}
}

func (l *etcdLock) Unlock(ctx context.Context) error {
	l.once.Do(func() {
		l.stopWatch()
		<-l.done
		l.r.mu.Lock()
		delete(l.r.locks, l)
		l.r.mu.Unlock()
		txn, err := l.r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.r.lockKey), "=", l.rev)).
			Then(clientv3.OpDelete(l.r.lockKey)).
			Commit()
		l.sess.Orphan()
		_, _ = l.r.cli.Revoke(ctx, l.sess.Lease()) // ends the session (Lost)
		switch {
		case err != nil:
			l.err = fmt.Errorf("registry: unlock %s: %w", l.r.lockKey, err)
		case !txn.Succeeded:
			l.err = fmt.Errorf("%w: %s had expired or been taken", registry.ErrLockLost, l.r.lockKey)
		}
	})
	return l.err
}
