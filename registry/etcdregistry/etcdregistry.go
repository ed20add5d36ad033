package etcdregistry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/internal/feed"
)

// etcdRegistry is the etcd Registry. Its mutable state is guarded by mu;
// everything else is set once by newRegistry.
type etcdRegistry struct {
	cli    *clientv3.Client
	prefix string
	opt    registry.Options
	err    error // a construction error every method returns

	configKey, membersPrefix, lockKey string

	// Test hooks: lossy treats every watch response as a broken watch;
	// watchFrom, when not 0, is the revision a watcher's first watch
	// starts at.
	lossy     bool
	watchFrom int64

	ctx    context.Context // done when the registry is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup // watchers

	mu     sync.Mutex // guards closed, leases, locks
	closed bool
	leases map[memberKey]clientv3.LeaseID // member → the lease of its key
	locks  map[*etcdLock]struct{}
}

// New returns a Registry kept in the etcd cluster cli reaches, under keys
// that start with prefix (a "/" is added if it does not end with one; see
// the package documentation for the layout), with the default Options. cli
// stays the caller's: Close does not close it. With a nil cli or an empty
// prefix every method of the registry fails with
// registry.ErrInvalidOptions; NewOptions reports that at once.
func New(cli *clientv3.Client, prefix string) registry.Registry {
	r, _ := newRegistry(cli, prefix, nil)
	return r
}

// NewOptions is New with Options (nil: the defaults). It fails with
// registry.ErrInvalidOptions for a nil cli, an empty prefix or invalid
// options.
func NewOptions(cli *clientv3.Client, prefix string, opt *registry.Options) (registry.Registry, error) {
	r, err := newRegistry(cli, prefix, opt)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func newRegistry(cli *clientv3.Client, prefix string, opt *registry.Options) (*etcdRegistry, error) {
	o, err := opt.WithDefaults()
	switch {
	case err != nil:
	case cli == nil:
		err = fmt.Errorf("%w: nil etcd client", registry.ErrInvalidOptions)
	case prefix == "":
		err = fmt.Errorf("%w: empty registry prefix", registry.ErrInvalidOptions)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &etcdRegistry{
		cli: cli, prefix: prefix, opt: o, err: err,
		configKey:     prefix + "config",
		membersPrefix: prefix + "members/",
		lockKey:       prefix + "lock",
		ctx:           ctx, cancel: cancel,
		leases: map[memberKey]clientv3.LeaseID{},
		locks:  map[*etcdLock]struct{}{},
	}, err
}

func (r *etcdRegistry) check() error {
	if r.err != nil {
		return r.err
	}
	if r.ctx.Err() != nil {
		return registry.ErrClosed
	}
	return nil
}

// seconds is d in etcd's lease unit, rounded up, at least 1.
func seconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

func (r *etcdRegistry) Get(ctx context.Context) (registry.Config, error) {
	if err := r.check(); err != nil {
		return registry.Config{}, err
	}
	c, _, err := r.get(ctx)
	return c, err
}

// get returns the stored config and the response's header revision.
func (r *etcdRegistry) get(ctx context.Context) (registry.Config, *clientv3.GetResponse, error) {
	resp, err := r.cli.Get(ctx, r.configKey)
	if err != nil {
		return registry.Config{}, nil, fmt.Errorf("registry: get %s: %w", r.configKey, err)
	}
	if len(resp.Kvs) == 0 {
		return registry.Config{}, resp, nil
	}
	c, err := registry.DecodeConfig(resp.Kvs[0].Value)
	return c, resp, err
}

func (r *etcdRegistry) Publish(ctx context.Context, prev, next registry.Config) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := registry.CheckTransition(prev, next); err != nil {
		return err
	}
	data, err := next.Encode()
	if err != nil {
		return fmt.Errorf("%w: %v", registry.ErrInvalidTransition, err)
	}
	conflict := func(stored registry.Version) error {
		return fmt.Errorf("%w: publish %s from %s: stored is %s", registry.ErrConflict, next.Version(), prev.Version(), stored)
	}
	// The stored config is prev when its key has not been written since
	// it was read as prev (or, for the first config, was never created).
	cmp := clientv3.Compare(clientv3.CreateRevision(r.configKey), "=", 0)
	if prev.Version() != (registry.Version{}) {
		cur, resp, err := r.get(ctx)
		if err != nil {
			return err
		}
		if cur.Version() != prev.Version() {
			return conflict(cur.Version())
		}
		cmp = clientv3.Compare(clientv3.ModRevision(r.configKey), "=", resp.Kvs[0].ModRevision)
	}
	txn, err := r.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(r.configKey, string(data))).Else(clientv3.OpGet(r.configKey)).Commit()
	if err != nil {
		return fmt.Errorf("registry: publish %s to %s: %w", next.Version(), r.configKey, err)
	}
	if !txn.Succeeded {
		var stored registry.Version
		if kvs := txn.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			if c, err := registry.DecodeConfig(kvs[0].Value); err == nil {
				stored = c.Version()
			}
		}
		return conflict(stored)
	}
	return nil
}

func (r *etcdRegistry) Heartbeat(ctx context.Context, m registry.Member) error {
	if err := r.check(); err != nil {
		return err
	}
	data, err := registry.EncodeMember(m)
	if err != nil {
		return err
	}
	mk := memberKey{m.ID, m.Incarnation}
	r.mu.Lock()
	lease, ok := r.leases[mk]
	r.mu.Unlock()
	if ok {
		_, err := r.cli.KeepAliveOnce(ctx, lease)
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound): // expired: start again
			ok = false
		case err != nil:
			return fmt.Errorf("registry: heartbeat of %s: %w", m.ID, err)
		}
	}
	if !ok {
		g, err := r.cli.Grant(ctx, seconds(r.opt.MemberTTL))
		if err != nil {
			return fmt.Errorf("registry: heartbeat of %s: grant a lease: %w", m.ID, err)
		}
		lease = g.ID
	}
	if err := r.putMember(ctx, m, data, lease); err != nil {
		r.forgetLease(mk)
		if errors.Is(err, registry.ErrMemberIDInUse) {
			_, _ = r.cli.Revoke(ctx, lease) // it holds no key of this member's; it would expire
		}
		return err
	}
	r.mu.Lock()
	r.leases[mk] = lease
	r.mu.Unlock()
	return nil
}

// putMember stores m (data) under lease, with a compare-and-set on the
// incarnation: a live member key (expired ones are gone with their lease)
// that holds another, non-empty incarnation is kept, and putMember fails
// with registry.ErrMemberIDInUse. The put is conditional on the key's
// revision as read, so a process that takes the id between the read and
// the put is seen on the next round.
func (r *etcdRegistry) putMember(ctx context.Context, m registry.Member, data []byte, lease clientv3.LeaseID) error {
	key := r.membersPrefix + m.ID
	resp, err := r.cli.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("registry: heartbeat of %s: %w", m.ID, err)
	}
	kvs := resp.Kvs
	for {
		var rev int64 // 0: the key does not exist
		if len(kvs) > 0 {
			rev = kvs[0].ModRevision
			if cur, err := registry.DecodeMember(kvs[0].Value); err == nil && cur.Incarnation != "" && cur.Incarnation != m.Incarnation {
				return registry.InUse(m, cur.Incarnation)
			}
		}
		tx, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(data), clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return fmt.Errorf("registry: heartbeat of %s: %w", m.ID, err)
		}
		if tx.Succeeded {
			return nil
		}
		kvs = tx.Responses[0].GetResponseRange().Kvs // changed since read: compare again
	}
}

// memberKey names a member's lease: two processes that share a registry
// and an id are two members, and one never renews the other's lease.
type memberKey struct{ id, incarnation string }

func (r *etcdRegistry) forgetLease(mk memberKey) (clientv3.LeaseID, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lease, ok := r.leases[mk]
	delete(r.leases, mk)
	return lease, ok
}

func (r *etcdRegistry) Leave(ctx context.Context, m registry.Member) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := r.deleteMember(ctx, m); err != nil {
		return err
	}
	// This registry's lease of m (not of another incarnation of m.ID) has
	// no key any more, or one of m's that outlived the delete's read: it
	// goes, with what it holds.
	if lease, ok := r.forgetLease(memberKey{m.ID, m.Incarnation}); ok {
		_, _ = r.cli.Revoke(ctx, lease) // otherwise it would expire
	}
	return nil
}

// deleteMember deletes m.ID's key if it holds m.Incarnation (none
// counting as ""), with a compare-and-delete on the key's revision as
// read: a key that another incarnation took between the read and the
// delete is kept.
func (r *etcdRegistry) deleteMember(ctx context.Context, m registry.Member) error {
	key := r.membersPrefix + m.ID
	resp, err := r.cli.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("registry: leave of %s: %w", m.ID, err)
	}
	kvs := resp.Kvs
	for {
		if len(kvs) == 0 {
			return nil // gone: left, expired, or never joined
		}
		cur, _ := registry.DecodeMember(kvs[0].Value) // undecodable: no incarnation
		if cur.Incarnation != m.Incarnation {
			return nil // another incarnation's: it stays
		}
		tx, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return fmt.Errorf("registry: leave of %s: %w", m.ID, err)
		}
		if tx.Succeeded {
			return nil
		}
		kvs = tx.Responses[0].GetResponseRange().Kvs // changed since read: compare again
	}
}

func (r *etcdRegistry) Members(ctx context.Context) ([]registry.Member, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	resp, err := r.cli.Get(ctx, r.membersPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("registry: members under %s: %w", r.membersPrefix, err)
	}
	ms := make([]registry.Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs { // in key order, so by ID
		m, err := registry.DecodeMember(kv.Value)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// Close implements registry.Registry.
func (r *etcdRegistry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	locks := make([]*etcdLock, 0, len(r.locks))
	for l := range r.locks {
		locks = append(locks, l)
	}
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, l := range locks {
		_ = l.Unlock(ctx) // best effort: otherwise its lease expires
	}
	r.cancel()
	r.wg.Wait()
	return nil
}

// start runs f in a goroutine owned by the registry, unless it is closed.
func (r *etcdRegistry) start(f func()) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return registry.ErrClosed
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
	return nil
}

// Watch implements registry.Registry. An etcd watcher reads the config and
// then watches its key from the next revision, so nothing published after
// the read is missed. When the watch breaks (the revision it needs was
// compacted, the member lost its leader, the watch was cancelled) it
// re-lists — reads the config again — and watches from the read's
// revision; a failed re-list is retried every PollInterval.
func (r *etcdRegistry) Watch(ctx context.Context) (<-chan registry.Config, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	cur, resp, err := r.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: watch: %w", err)
	}
	from := resp.Header.Revision + 1
	if r.watchFrom != 0 {
		from = r.watchFrom
	}
	out := make(chan registry.Config)
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	err = r.start(func() {
		defer close(out)
		defer cancel()
		defer stop()
		r.watch(wctx, cur, from, out)
	})
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	return out, nil
}

func (r *etcdRegistry) watch(ctx context.Context, cur registry.Config, from int64, out chan registry.Config) {
	f := &feed.Feed[registry.Config]{Less: func(a, b registry.Config) bool { return a.Version().Less(b.Version()) }}
	if cur.Epoch != 0 {
		f.Offer(cur)
	}
	var (
		wch     clientv3.WatchChan // nil while re-listing
		wcancel context.CancelFunc = func() {}
		retry   *time.Timer        // set while a failed re-list waits to be retried
		retryC  <-chan time.Time
	)
	defer func() { wcancel() }()
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	relist := func() {
		c, resp, err := r.get(ctx)
		if err != nil {
			if retry == nil {
				retry = time.NewTimer(r.opt.PollInterval)
			} else {
				retry.Reset(r.opt.PollInterval)
			}
			retryC = retry.C
			return
		}
		retryC = nil
		if c.Epoch != 0 {
			f.Offer(c)
		}
		from = resp.Header.Revision + 1
	}
	for {
		if wch == nil && retryC == nil {
			wch, wcancel = r.watchKey(ctx, from)
		}
		send, next := f.Next(out)
		select {
		case <-ctx.Done():
			return
		case send <- next:
			f.Sent()
		case <-retryC:
			relist()
		case resp, ok := <-wch:
			if ok && resp.Err() == nil && !resp.Canceled && !r.lossy {
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypePut {
						if c, err := registry.DecodeConfig(ev.Kv.Value); err == nil {
							f.Offer(c)
						}
					}
					from = ev.Kv.ModRevision + 1
				}
				continue
			}
			// A broken watch: what it would have delivered is in the
			// stored config.
			wcancel()
			wch = nil
			if ctx.Err() != nil {
				return
			}
			relist()
		}
	}
}

// watchKey watches the config key from revision from, until the returned
// cancel is called. The watch breaks when its member loses its leader,
// rather than going silent.
func (r *etcdRegistry) watchKey(ctx context.Context, from int64) (clientv3.WatchChan, context.CancelFunc) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	return r.cli.Watch(ctx, r.configKey, clientv3.WithRev(from)), cancel
}

// MemberTTL returns Options.MemberTTL. etcd leases count whole seconds, so
// a member lives up to a second longer: never shorter.
func (r *etcdRegistry) MemberTTL() time.Duration { return r.opt.MemberTTL }
