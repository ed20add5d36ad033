package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redshard/redshard"
	rsfleet "github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/etcdregistry"
)

// Issue 26, findings 1 and 6, in this test's process on real
// redis-servers, with a Redis registry and an etcd one.

// regEnv is one registry, opened in this process, with what a test does to
// its data from outside: back it up, restore a backup, lose everything.
type regEnv struct {
	kind string
	open func(t *testing.T) registry.Registry
	// backup copies the registry's data; the function it returns puts
	// that copy back in place of what the registry then holds.
	backup func(t *testing.T) (restore func(t *testing.T))
	flush  func(t *testing.T)
}

// regOptions are the options of the registries of these tests.
var regOptions = &registry.Options{PollInterval: 200 * time.Millisecond, MemberTTL: 2 * time.Second}

// redisEnv is a Redis registry on a redis-server of its own, under
// "fleet:restored" (a name outside "redshard:", so that every key of the
// registry starts with it).
func redisEnv(t *testing.T) *regEnv {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	const name = "fleet:restored"
	ctx := context.Background()
	keys := func(t *testing.T) []string {
		ks, err := rdb.Keys(ctx, name+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	return &regEnv{
		kind: "redis",
		open: func(t *testing.T) registry.Registry {
			cl := srv.Client(t)
			reg, err := registry.NewRedisOptions(cl, name, regOptions)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = reg.Close() })
			return reg
		},
		backup: func(t *testing.T) func(*testing.T) {
			type dumped struct {
				v   string
				ttl time.Duration
			}
			saved := map[string]dumped{}
			for _, k := range keys(t) {
				v, err := rdb.Dump(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				ttl, err := rdb.PTTL(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				saved[k] = dumped{v, max(ttl, 0)}
			}
			return func(t *testing.T) {
				_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
					if ks := keys(t); len(ks) > 0 {
						p.Del(ctx, ks...)
					}
					for k, d := range saved {
						p.RestoreReplace(ctx, k, d.ttl, d.v)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		},
		flush: func(t *testing.T) {
			if ks := keys(t); len(ks) > 0 {
				if err := rdb.Del(ctx, ks...).Err(); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
}

// etcdEnv is an etcd registry on an etcd server of its own (fleetproc
// etcd), under "/redshard/restored/". A backup holds the keys without a
// lease (the config; a member's key lives on its lease, and a restored
// etcd's leases are its own matter).
func etcdEnv(t *testing.T) *regEnv {
	addr := startEtcd(t, fleetproc(t))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	const prefix = "/redshard/restored/"
	ctx := context.Background()
	return &regEnv{
		kind: "etcd",
		open: func(t *testing.T) registry.Registry {
			reg, err := etcdregistry.NewOptions(cli, prefix, regOptions)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = reg.Close() })
			return reg
		},
		backup: func(t *testing.T) func(*testing.T) {
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
			return func(t *testing.T) {
				now, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
				if err != nil {
					t.Fatal(err)
				}
				var ops []clientv3.Op // one transaction; etcd refuses a key twice in one
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
		},
		flush: func(t *testing.T) {
			if _, err := cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// eachRegistry runs fn with a Redis registry and with an etcd one.
func eachRegistry(t *testing.T, fn func(t *testing.T, env *regEnv)) {
	needRedis(t)
	t.Run("redis", func(t *testing.T) { fn(t, redisEnv(t)) })
	t.Run("etcd", func(t *testing.T) { fn(t, etcdEnv(t)) })
}

// dataServers starts n redis-servers and returns the document of the
// first k of them, for every k.
func dataServers(t *testing.T, n int) func(k int) json.RawMessage {
	var addrs []string
	for range n {
		addrs = append(addrs, redistest.Start(t).Addr())
	}
	return func(k int) json.RawMessage {
		var shards []map[string]any
		for i := range k {
			shards = append(shards, map[string]any{"name": fmt.Sprintf("s%d", i), "addr": addrs[i]})
		}
		b, _ := json.Marshal(map[string]any{"shards": shards})
		return b
	}
}

var noHealth = &redshard.HealthOptions{Disable: true}

func applyDoc(t *testing.T, reg registry.Registry, doc json.RawMessage) rsfleet.ApplyReport {
	t.Helper()
	rep, err := rsfleet.Apply(context.Background(), reg, doc, rsfleet.ApplyOptions{Driver: "test", Client: &redshard.Options{Health: noHealth}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return rep
}

func member(t *testing.T, reg registry.Registry, id string) *redshard.Client {
	t.Helper()
	c, err := redshard.NewClient(&redshard.Options{Registry: reg, Fleet: &redshard.FleetOptions{MemberID: id}, Health: noHealth})
	if err != nil {
		t.Fatalf("NewClient %s: %v", id, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// movingKeys returns n keys whose owner differs between docs a and b, and
// n whose owner does not.
func movingKeys(t *testing.T, a, b json.RawMessage, n int) (moving, staying []string) {
	t.Helper()
	ring := func(doc json.RawMessage) *redshard.Client {
		var d struct {
			Shards []redshard.Shard `json:"shards"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		c, err := redshard.NewClient(&redshard.Options{Shards: d.Shards, Health: noHealth})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ra, rb := ring(a), ring(b)
	defer ra.Close()
	defer rb.Close()
	for i := 0; len(moving) < n || len(staying) < n; i++ {
		key := fmt.Sprintf("restored:%d", i)
		x, _ := ra.ShardFor(key)
		y, _ := rb.ShardFor(key)
		switch {
		case x != y && len(moving) < n:
			moving = append(moving, key)
		case x == y && len(staying) < n:
			staying = append(staying, key)
		}
	}
	return moving, staying
}

// awaitFleetStatus waits, for at most 30s, until c's FleetStatus satisfies ok.
func awaitFleetStatus(t *testing.T, c *redshard.Client, what string, ok func(redshard.FleetStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ := c.FleetStatus()
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the process is not %s: %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFleetRestoredRegistryNewProcess (issue 26, finding 1): the fleet is
// at epoch 2, every server's beacon says so, and the registry is restored
// from a backup taken at epoch 1. Process A, live, keeps serving what it
// may; process C, which starts now, must not follow epoch 1 as if it were
// current: it starts fenced with ErrRegistryBehind, and neither's
// acknowledged writes are missing for the other. Once apply restores the
// registry, C ends its fence and reads A's writes.
func TestFleetRestoredRegistryNewProcess(t *testing.T) {
	eachRegistry(t, func(t *testing.T, env *regEnv) {
		ctx := context.Background()
		doc := dataServers(t, 3)
		reg := env.open(t)
		applyDoc(t, reg, doc(2))
		restore := env.backup(t)
		a := member(t, env.open(t), "a")
		applyDoc(t, reg, doc(3))
		moving, staying := movingKeys(t, doc(2), doc(3), 10)
		for _, k := range append(moving, staying...) {
			if err := a.Set(ctx, k, "a", 0).Err(); err != nil {
				t.Fatalf("A: SET %s: %v", k, err)
			}
		}

		restore(t)
		c := member(t, env.open(t), "c")
		if st, _ := c.FleetStatus(); !st.Fenced || !errors.Is(st.Err, redshard.ErrRegistryBehind) {
			t.Errorf("C, started on the registry restored to epoch 1, reports %+v; want fenced with ErrRegistryBehind", st)
		} else {
			t.Logf("C says: %v", st.Err)
		}
		lostA, lostC, refused := 0, 0, 0
		for _, k := range moving {
			got, err := c.Get(ctx, k).Result()
			switch {
			case err != nil && errors.Is(err, redshard.ErrFenced) && errors.Is(err, redshard.ErrRegistryBehind):
				refused++
			case err != nil && !errors.Is(err, redis.Nil):
				t.Errorf("C: GET %s: %v", k, err)
			case got != "a":
				lostA++
			}
			if err := c.Set(ctx, k, "c", 0).Err(); err != nil {
				if !errors.Is(err, redshard.ErrFenced) || !errors.Is(err, redshard.ErrRegistryBehind) {
					t.Errorf("C: SET %s: %v", k, err)
				}
				continue
			}
			if got, err := a.Get(ctx, k).Result(); err != nil || got != "c" {
				lostC++
			}
		}
		if lostA+lostC > 0 || refused == 0 {
			t.Errorf("of the %d keys epoch 2 moved, %d of A's acknowledged writes are missing for C, %d of C's for A; C refused %d",
				len(moving), lostA, lostC, refused)
		}
		for _, k := range staying {
			if err := c.Set(ctx, k, "c", 0).Err(); err != nil {
				t.Errorf("C: SET %s, a key no change moved: %v", k, err)
			} else if got, err := a.Get(ctx, k).Result(); err != nil || got != "c" {
				t.Errorf("C acknowledged SET %s c, A reads %q, %v", k, got, err)
			}
		}

		rep := applyDoc(t, reg, doc(3))
		if rep.Restored == "" {
			t.Fatalf("apply over the restored registry: %+v, want it restored", rep)
		}
		awaitFleetStatus(t, c, "unfenced on the restored config", func(st redshard.FleetStatus) bool {
			return !st.Fenced && st.Err == nil && st.Version == rep.To
		})
		for _, k := range moving {
			if got, err := c.Get(ctx, k).Result(); err != nil || got != "a" {
				t.Errorf("C after the restore: GET %s = %q, %v; want %q", k, got, err, "a")
			}
		}
	})
}

// stopDriver is a registry whose Publish of the config at version at (not
// a restore) stops the driver: before the config is published, or, with
// after, just after.
type stopDriver struct {
	registry.Registry
	at    registry.Version
	after bool
}

var errDriverStopped = errors.New("test: the driver stops here")

func (r *stopDriver) Publish(ctx context.Context, prev, next registry.Config) error {
	if next.Version() != r.at || next.Restored != "" {
		return r.Registry.Publish(ctx, prev, next)
	}
	if r.after {
		if err := r.Registry.Publish(ctx, prev, next); err != nil {
			return err
		}
	}
	return errDriverStopped
}

// TestFleetApplyFromEveryWindow (issue 26, finding 6): the driver of a
// change stops in each window (a phase's beacon written and the phase not
// yet published; the phase just published), then the registry loses its
// data. apply, run again, restores it from the servers' beacons and
// finishes the change with no hand work, and every acknowledged write is
// read back by both processes.
func TestFleetApplyFromEveryWindow(t *testing.T) {
	eachRegistry(t, func(t *testing.T, env *regEnv) {
		for _, phase := range []registry.Phase{registry.Prepare, registry.Migrate, registry.Commit, registry.Stable} {
			for _, after := range []bool{false, true} {
				name := "before " + string(phase)
				if after {
					name = "after " + string(phase)
				}
				t.Run(name, func(t *testing.T) {
					window(t, env, registry.Version{Epoch: 2, Phase: phase}, after)
				})
			}
		}
	})
}

func window(t *testing.T, env *regEnv, at registry.Version, after bool) {
	ctx := context.Background()
	env.flush(t) // the previous window's
	doc := dataServers(t, 3)
	reg := env.open(t)
	applyDoc(t, reg, doc(2))
	p, q := member(t, env.open(t), "p"), member(t, env.open(t), "q")
	acked := map[string]string{}
	write := func(who string, c *redshard.Client) {
		for i := range 40 {
			k, v := fmt.Sprintf("%s:%d", who, i), fmt.Sprintf("%s-%d", who, i)
			// A write of a key that moves waits in Prepare for the phase
			// the stopped driver never publishes: a short deadline.
			wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			err := c.Set(wctx, k, v, 0).Err()
			cancel()
			switch {
			case err == nil:
				acked[k] = v
			case !errors.Is(err, redshard.ErrFenced) && !errors.Is(err, redshard.ErrHandoffInProgress):
				t.Errorf("%s: SET %s: %v", who, k, err)
			}
		}
	}
	write("before", p)
	_, err := rsfleet.Apply(ctx, &stopDriver{Registry: reg, at: at, after: after}, doc(3),
		rsfleet.ApplyOptions{Driver: "test", Client: &redshard.Options{Health: noHealth}})
	if !errors.Is(err, errDriverStopped) {
		t.Fatalf("Apply with the driver stopped at %s: %v", at, err)
	}
	write("stopped", q)
	env.flush(t)
	write("lost", p)

	rep := applyDoc(t, reg, doc(3))
	t.Logf("apply again: %s → %s; %s", rep.From, rep.To, rep.Restored)
	if rep.Restored == "" || rep.To != (registry.Version{Epoch: 2, Phase: registry.Stable}) {
		t.Errorf("apply again: %+v, want the registry restored and the change finished at epoch 2 stable", rep)
	}
	for _, c := range []*redshard.Client{p, q} {
		awaitFleetStatus(t, c, "on epoch 2 stable, unfenced", func(st redshard.FleetStatus) bool {
			return !st.Fenced && st.Err == nil && st.Version == rep.To
		})
	}
	write("after", q)
	for k, v := range acked {
		for i, c := range []*redshard.Client{p, q} {
			if got, err := c.Get(ctx, k).Result(); err != nil || got != v {
				t.Errorf("process %d: GET %s = %q, %v; acknowledged %q", i, k, got, err, v)
			}
		}
	}
	if len(acked) < 80 {
		t.Errorf("only %d writes acknowledged", len(acked))
	}
}
