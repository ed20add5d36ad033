package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
)

// TestFleetRegistryForgets flushes the registry of a fleet at epoch 2: a
// process following it says so (ErrRegistryBehind) and fences itself,
// rather than ignoring it; the next Apply restores the registry from the
// servers' beacons, above what the fleet followed, instead of publishing
// epoch 1 "as if new", and the change it then applies moves the data:
// every key is still there.
func TestFleetRegistryForgets(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(2))
	before := f.apply(t, ctx, f.doc(3)).To
	c := f.client(t, f.open(t), "p")
	for i := range 200 {
		if err := c.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	f.regm.FlushAll()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, _ := c.FleetStatus()
		if errors.Is(st.Err, redshard.ErrRegistryBehind) && st.Fenced {
			t.Logf("the process says: %v", st.Err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15s after the registry lost its data the process reports %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The same config again: restored, and nothing else published.
	same := f.apply(t, ctx, f.doc(3))
	if same.Restored == "" || !same.Unchanged || same.To != before {
		t.Errorf("Apply of the same config over a flushed registry: %+v, want it restored and unchanged at %s", same, before)
	}
	f.regm.FlushAll()

	rep := f.apply(t, ctx, f.doc(2))
	t.Logf("apply: %s; %s → %s", rep.Restored, rep.From, rep.To)
	if rep.Restored == "" || !strings.Contains(rep.Restored, before.String()) {
		t.Errorf("Apply over a flushed registry did not restore %s: %+v", before, rep)
	}
	if !before.Less(rep.To) {
		t.Errorf("Apply went from %s to %s: epochs went backwards", before, rep.To)
	}
	cur, err := f.reg.Get(ctx)
	if err != nil || cur.Version() != rep.To {
		t.Fatalf("the registry holds %s (%v), want %s", cur.Version(), err, rep.To)
	}
	waitFenced(t, c, false)
	if st, _ := c.FleetStatus(); st.Version != rep.To || st.Err != nil {
		t.Errorf("the process follows %s (err %v), want %s", st.Version, st.Err, rep.To)
	}
	for i := range 200 {
		k := fmt.Sprintf("key:%d", i)
		if n, err := c.Get(ctx, k).Int(); err != nil || n != i {
			t.Errorf("GET %s after the restore and a change: %d, %v", k, n, err)
		}
	}
}

// TestAckedConfig: an acknowledgement names a config, not only a version.
func TestAckedConfig(t *testing.T) {
	a := registry.Initial([]byte(`{"shards":[{"name":"a","addr":"127.0.0.1:1"}]}`))
	b := registry.Initial([]byte(`{"shards":[{"name":"b","addr":"127.0.0.1:2"}]}`))
	if a.ID() == b.ID() {
		t.Fatalf("two stable configs of one epoch have one ID %q", a.ID())
	}
	members := []registry.Member{
		{ID: "on-a", Epoch: 1, Phase: registry.Stable, Config: a.ID()},
		{ID: "on-b", Epoch: 1, Phase: registry.Stable, Config: b.ID()},
		{ID: "ahead", Epoch: 2, Phase: registry.Prepare, Config: "x"},
		{ID: "joining"},
	}
	late, astray := registry.AckedConfig(members, a)
	if len(late) != 1 || late[0].ID != "joining" || len(astray) != 2 || astray[0].ID != "on-b" || astray[1].ID != "ahead" {
		t.Errorf("AckedConfig: late %v, astray %v", late, astray)
	}
}

// slowPipelines delays every pipeline by per command in it: a slow server,
// or large values.
type slowPipelines struct{ per time.Duration }

func (slowPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (slowPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h slowPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		time.Sleep(time.Duration(len(cmds)) * h.per)
		return next(ctx, cmds)
	}
}

// TestFleetRebalanceSlowServer moves keys through pipelines that take 1ms
// a command, so a batch of the default 500 keys takes longer than the
// driver's lease (1s here) and every key of it would fail to move. The
// drain sizes its batches to the lease instead: it goes slower, and
// nothing fails.
func TestFleetRebalanceSlowServer(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(2))
	c := f.client(t, f.open(t), "p")
	for i := range 1500 {
		if err := c.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := fleet.Apply(ctx, f.reg, f.doc(3), fleet.ApplyOptions{Driver: "test",
		Client: &redshard.Options{Health: &redshard.HealthOptions{Disable: true},
			NewShardClient: func(_ redshard.Shard, opt *redis.Options) *redis.Client {
				cl := redis.NewClient(opt)
				cl.AddHook(slowPipelines{per: time.Millisecond})
				return cl
			}}})
	if err != nil {
		t.Fatalf("Apply through slow pipelines: %v", err)
	}
	if rb := rep.Rebalance; rb.Failed != 0 || rb.Moved == 0 || !rb.Finished {
		t.Fatalf("Rebalance through slow pipelines: %+v", rb)
	}
	t.Logf("moved %d keys in %v through pipelines of 1ms a command", rep.Rebalance.Moved, rep.Rebalance.Elapsed)
	for i := range 1500 {
		if n, err := c.Get(ctx, fmt.Sprintf("key:%d", i)).Int(); err != nil || n != i {
			t.Fatalf("key:%d after the change: %d, %v", i, n, err)
		}
	}
}
