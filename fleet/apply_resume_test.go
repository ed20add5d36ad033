package fleet_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
)

// cutHook makes the first pipeline of EVALSHA (a move's take) sent under
// a deadline wait for that deadline and fail with it: a batch cut at the
// driver's lease, as a loaded machine makes happen, without depending on
// the load.
type cutHook struct{ cut *atomic.Bool }

func (cutHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (cutHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h cutHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if _, ok := ctx.Deadline(); ok && len(cmds) > 0 && cmds[0].Name() == "evalsha" && h.cut.CompareAndSwap(false, true) {
			<-ctx.Done()
			for _, c := range cmds {
				c.SetErr(ctx.Err())
			}
			return ctx.Err()
		}
		return next(ctx, cmds)
	}
}

// TestApplyResumesCutMigration: a data migration whose batch is cut at
// the driver's lease (moveContext) no longer fails apply with "moving keys
// from shard ...: context deadline exceeded (run apply again to resume)":
// apply runs the migration again while it makes progress, and every key
// ends on its owner. TestFleetRecipeChange failed this way under load.
func TestApplyResumesCutMigration(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(2))
	c := f.client(t, f.open(t), "p0")
	const keys = 200
	for i := range keys {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var cut atomic.Bool
	opt := &redshard.Options{Health: &redshard.HealthOptions{Disable: true},
		NewShardClient: func(_ redshard.Shard, o *redis.Options) *redis.Client {
			rc := redis.NewClient(o)
			rc.AddHook(cutHook{&cut})
			return rc
		}}
	rep, err := fleet.Apply(ctx, f.reg, f.doc(3), fleet.ApplyOptions{Driver: "test", Client: opt})
	if !cut.Load() {
		t.Fatal("no move was cut: the test did not test anything")
	}
	if err != nil {
		t.Fatalf("Apply after a batch cut at the lease: %v", err)
	}
	if !rep.Rebalance.Finished || rep.Rebalance.Moved == 0 || rep.Rebalance.Failed != 0 {
		t.Errorf("Rebalance report %+v; want finished, keys moved, none failed", rep.Rebalance)
	}
	for i := range keys {
		k := fmt.Sprintf("k%d", i)
		if got, err := c.Get(ctx, k).Int(); err != nil || got != i {
			t.Errorf("GET %s = %d, %v; want %d", k, got, err, i)
		}
	}
}
