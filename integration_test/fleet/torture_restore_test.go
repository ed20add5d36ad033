package fleet_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redshard/redshard/internal/blackhole"
)

// The torture test's "restore-old" fault (issue 26, finding 1): the
// registry restored from an OLDER snapshot, one taken after an earlier
// change (not an empty one), in the middle of a change, while a process
// starts on it and another stops. The driver running then fails (the
// registry moved under it) and is run again until it has restored the
// registry from the servers' beacons and finished the change; the process
// that started on the old config must not have served a key under it.

// registrySnapshot puts a copy of the registry's data back in place of
// what it holds.
type registrySnapshot struct {
	applies int // the changes applied when it was taken
	restore func()
}

// restoreState is the torture run's part for this fault.
type restoreState struct {
	snapshots        []registrySnapshot // oldest first, at most 4
	started, stopped int                // processes started and stopped by the fault
	newcomers        []*proc            // started by the fault, oldest first, still running
	etcdCli          *clientv3.Client
}

// takeSnapshot copies the registry's data: every key of its name (Redis,
// by DUMP) or prefix (etcd) that does not expire by itself (a key with a
// time to live, or on a lease: the driver lock, etcd's members).
func (r *tortureRun) takeSnapshot() {
	t := r.t
	ctx, cancel := registryCtx()
	defer cancel()
	var restore func()
	switch r.kind {
	case "redis":
		rdb := r.regSrv.Client(t)
		const pattern = "redshard:registry:torture*"
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		saved := map[string]string{}
		for _, k := range keys {
			// A key with a time to live (the driver lock) is left out, as
			// etcd's keys on a lease are.
			if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl != -1 {
				continue
			}
			v, err := rdb.Dump(ctx, k).Result()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			if err == nil {
				saved[k] = v
			}
		}
		restore = func() {
			ctx, cancel := registryCtx()
			defer cancel()
			now, err := rdb.Keys(ctx, pattern).Result()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				if len(now) > 0 {
					p.Del(ctx, now...)
				}
				for k, v := range saved {
					p.RestoreReplace(ctx, k, 0, v)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	case "etcd":
		cli := r.etcdClient()
		const prefix = "/redshard/torture/"
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		saved := map[string]string{}
		for _, kv := range resp.Kvs {
			if kv.Lease == 0 {
				saved[string(kv.Key)] = string(kv.Value)
			}
		}
		restore = func() {
			ctx, cancel := registryCtx()
			defer cancel()
			cli := r.etcdClient() // the server's, now: "forget" restarts it
			now, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				t.Fatal(err)
			}
			var ops []clientv3.Op // one transaction, each key once
			for _, kv := range now.Kvs {
				if _, ok := saved[string(kv.Key)]; !ok {
					ops = append(ops, clientv3.OpDelete(string(kv.Key)))
				}
			}
			for k, v := range saved {
				ops = append(ops, clientv3.OpPut(k, v))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	rs := &r.restore
	rs.snapshots = append(rs.snapshots, registrySnapshot{r.applies, restore})
	if len(rs.snapshots) > 4 {
		rs.snapshots = rs.snapshots[1:]
	}
}

// registryCtx bounds the test's own calls to the registry: a registry
// that does not answer fails the test with the call that waited, rather
// than hang it until the test binary's -timeout.
func registryCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// etcdClient is the test's own client of the run's etcd server (the same
// address across restarts; forgetEtcd makes a new one).
func (r *tortureRun) etcdClient() *clientv3.Client {
	rs := &r.restore
	if rs.etcdCli == nil {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + r.etcd.client}, DialTimeout: 5 * time.Second})
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(func() { _ = cli.Close() })
		rs.etcdCli = cli
	}
	return rs.etcdCli
}

// forgetEtcd restarts the etcd server empty, and the test's client with it:
// nothing of the test's talks to the old server's cluster any more.
func (r *tortureRun) forgetEtcd() {
	r.etcd = r.etcd.restartEmpty(r.t)
	if cli := r.restore.etcdCli; cli != nil {
		_ = cli.Close()
		r.restore.etcdCli = nil
	}
}

// restoreOld is the fault: a process started, the registry restored from
// a snapshot older than the last change, another process started on it at
// once, and the one started before stopped (so is the oldest of those this
// fault started, while more than two of them run).
func (r *tortureRun) restoreOld() {
	t := r.t
	rs := &r.restore
	if len(rs.snapshots) == 0 {
		t.Fatal("restore-old: no snapshot taken")
	}
	before := r.startNewcomer()
	r.awaitWorking(before) // it follows the registry before the restore
	i := 0
	if n := len(rs.snapshots); n > 1 {
		i = r.rng.IntN(n - 1) // not the newest: older than the last change
	}
	snap := rs.snapshots[i]
	snap.restore()
	t.Logf("restore-old: the registry restored to its state after change %d (now %d applied)", snap.applies, r.applies)
	r.startNewcomer()
	r.stopNewcomer(before)
	for len(rs.newcomers) > 2 {
		r.stopNewcomer(rs.newcomers[0])
	}
}

// awaitWorking waits until p says it is working (fleetproc work: its
// client is made and SIGTERM ends it with its totals), for at most 60s.
func (r *tortureRun) awaitWorking(p *proc) {
	deadline := time.After(60 * time.Second)
	for !strings.Contains(p.stderr.String(), "working\n") {
		select {
		case <-p.done:
			r.t.Fatalf("worker %s ended before it worked: %v; stderr:\n%s", p.id, p.cmd.ProcessState, p.stderr.String())
		case <-deadline:
			r.t.Fatalf("worker %s did not start working in 60s; stderr:\n%s", p.id, p.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// stopNewcomer stops p, a process restoreOld started, once it works.
func (r *tortureRun) stopNewcomer(p *proc) {
	rs := &r.restore
	r.awaitWorking(p)
	rs.newcomers = slices.DeleteFunc(rs.newcomers, func(q *proc) bool { return q == p })
	r.t.Logf("%s: %v", p.id, p.stop(r.t))
	r.remove(p)
	rs.stopped++
}

// startNewcomer starts a process, with its registry traffic through a
// proxy as the first ones (the other faults may pick it).
func (r *tortureRun) startNewcomer() *proc {
	t := r.t
	rs := &r.restore
	rs.started++
	id := fmt.Sprintf("n%d", rs.started)
	regAddr, path := r.registryAddr()
	px, err := blackhole.Listen(regAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	r.proxies[id] = px
	mode := []string{"", "batch", "fullduplex"}[rs.started%3]
	p := r.worker(id, "--registry", r.kind+"://"+px.Addr()+path, "--autopipeline", mode)
	rs.newcomers = append(rs.newcomers, p)
	return p
}

// registryAddr is the registry's address and the URL path of its name.
func (r *tortureRun) registryAddr() (addr, path string) {
	if r.kind == "redis" {
		return r.regSrv.Addr(), "/redshard:registry:torture"
	}
	return r.etcd.client, "/redshard/torture"
}

// restoreCounts is this fault's part of the run's summary.
func (r *tortureRun) restoreCounts() string {
	rs := &r.restore
	return fmt.Sprintf("restore-old: %d snapshots kept, %d processes started, %d stopped", len(rs.snapshots), rs.started, rs.stopped)
}
