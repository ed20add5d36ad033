package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/registry"
)

// stallRegistry delivers no config newer than its ceiling while one is
// set: its process stays in the phase it has, as one whose watcher lags.
type stallRegistry struct {
	registry.Registry
	mu      sync.Mutex
	ceiling *registry.Version
}

func (r *stallRegistry) stall(v *registry.Version) {
	r.mu.Lock()
	r.ceiling = v
	r.mu.Unlock()
}

func (r *stallRegistry) above(cfg registry.Config) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ceiling != nil && r.ceiling.Less(cfg.Version())
}

func (r *stallRegistry) Watch(ctx context.Context) (<-chan registry.Config, error) {
	in, err := r.Registry.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan registry.Config)
	go func() {
		defer close(out)
		for cfg := range in {
			if r.above(cfg) {
				continue
			}
			select {
			case out <- cfg:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (r *stallRegistry) Get(ctx context.Context) (registry.Config, error) {
	cfg, err := r.Registry.Get(ctx)
	if err == nil && r.above(cfg) {
		return registry.Config{}, errors.New("stalled")
	}
	return cfg, err
}

// TestKeyspaceInPrepareBesideMigrate (issue 26, finding 4): process p is
// still in Prepare while process m is in Migrate and has moved keys to
// the next ring. KEYS, a full SCAN and DBSIZE through p count every key
// once (they reported 43 of 60: the moved keys were missed), and RANDOMKEY
// through p finds a key when every key left has moved (it answered nil).
func TestKeyspaceInPrepareBesideMigrate(t *testing.T) {
	const n = 60
	f := newFleet(t, 2)
	f.apply(t, ctx, f.doc(1))
	stalled := &stallRegistry{Registry: f.open(t)}
	p := f.client(t, stalled, "p")
	m := f.client(t, f.open(t), "m")
	for i := range n {
		if err := m.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := f.reg.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prep := cur.Begin(f.doc(2), "grow", "test")
	if err := f.reg.Publish(ctx, cur, prep); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, p, prep.Version())
	waitVersion(t, m, prep.Version())
	v := prep.Version()
	stalled.stall(&v)
	mig, err := prep.Advance()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Publish(ctx, prep, mig); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, m, mig.Version())
	// m moves every key the change moves (by handoff: a read); p, in
	// Prepare, routes by the first ring still.
	moved := 0
	var staying []string
	for i := range n {
		k := fmt.Sprintf("key:%d", i)
		if err := m.Get(ctx, k).Err(); err != nil {
			t.Fatalf("GET %s in Migrate: %v", k, err)
		}
		if f.mini[0].Exists(k) {
			staying = append(staying, k)
		} else {
			moved++
		}
	}
	if moved == 0 || len(staying) == 0 {
		t.Fatalf("%d keys moved, %d stayed: the test proves nothing", moved, len(staying))
	}
	if st, _ := p.FleetStatus(); st.Version != prep.Version() {
		t.Fatalf("p is at %s, want %s", st.Version, prep.Version())
	}
	keys, err := p.Keys(ctx, "key:*").Result()
	if err != nil || len(keys) != n {
		t.Errorf("KEYS in Prepare beside Migrate: %d keys, %v; want %d (%d moved)", len(keys), err, n, moved)
	}
	if got, err := p.DBSize(ctx).Result(); err != nil || got != n {
		t.Errorf("DBSIZE in Prepare beside Migrate: %d, %v; want %d", got, err, n)
	}
	seen := map[string]int{}
	iter := p.Scan(ctx, 0, "", 7).Iterator()
	for iter.Next(ctx) {
		seen[iter.Val()]++
	}
	if err := iter.Err(); err != nil || len(seen) != n {
		t.Errorf("SCAN in Prepare beside Migrate: %d distinct keys, %v; want %d", len(seen), err, n)
	}
	// Every key left has moved: RANDOMKEY must still find one.
	if err := m.Del(ctx, staying...).Err(); err != nil {
		t.Fatal(err)
	}
	k, err := p.RandomKey(ctx).Result()
	if err != nil || !f.mini[1].Exists(k) {
		t.Errorf("RANDOMKEY in Prepare with every key moved: %q, %v; want a moved key", k, err)
	}
	var pipeKey *redis.StringCmd
	if _, err := p.Pipelined(ctx, func(pp redis.Pipeliner) error {
		pipeKey = pp.RandomKey(ctx)
		return nil
	}); err != nil || !f.mini[1].Exists(pipeKey.Val()) {
		t.Errorf("pipelined RANDOMKEY in Prepare with every key moved: %q, %v", pipeKey.Val(), err)
	}
	stalled.stall(nil)
}

// TestRandomKeyShardDown (issue 26, finding 7): with every key on a shard
// that is down, RANDOMKEY answers that shard's ErrShardDown, alone and in
// a pipeline, not nil (DESIGN.md semantics 8); nil stays the answer of
// shards that are up and empty.
func TestRandomKeyShardDown(t *testing.T) {
	cl, events, c := healthCluster(t, false)
	for _, k := range cl.keysOn(t, "shard-1", "k", 5) {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cl.mini["shard-1"].Close()
	waitEvent(t, events, "shard-1", true)
	if err := c.RandomKey(ctx).Err(); !errors.Is(err, redshard.ErrShardDown) {
		t.Errorf("RANDOMKEY with every key on a down shard: %v, want ErrShardDown", err)
	}
	var rk *redis.StringCmd
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		rk = p.RandomKey(ctx)
		return nil
	})
	if !errors.Is(rk.Err(), redshard.ErrShardDown) {
		t.Errorf("pipelined RANDOMKEY with every key on a down shard: %v, want ErrShardDown", rk.Err())
	}
	// A key on a shard that is up is an answer.
	live := cl.keysOn(t, "shard-0", "k", 1)[0]
	if err := c.Set(ctx, live, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.RandomKey(ctx).Result(); err != nil || got != live {
		t.Errorf("RANDOMKEY with a key on a live shard: %q, %v; want %q", got, err, live)
	}
	// Up again, so that go-redis's redial of it ends before the test does.
	if err := cl.mini["shard-1"].Restart(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, "shard-1", false)
}
