package redshard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// TestFleetHeldBatchDeadline (issue 26, finding 5): with a change stuck in
// Prepare, a command on a moving key with a short deadline returns by its
// deadline (ErrHandoffInProgress or the deadline's error) in every batching
// path, not after HoldTimeout: AutoPipeline, AsyncAutoPipeline, Pipelined,
// TxPipelined, and FullDuplex per-shard pipeliners. HoldTimeout is two
// minutes, so a wait bounded by it alone fails the test's 30s bound.
func TestFleetHeldBatchDeadline(t *testing.T) {
	f := newRealFleet(t, 2)
	f.apply(t, ctx, f.doc(1))
	moving, staying := keyMoving(t, f, 1)
	fo := func(id string) *redshard.FleetOptions {
		return &redshard.FleetOptions{MemberID: id, HoldTimeout: 2 * time.Minute}
	}
	c := fleetClient(t, f.open(t), fo("held"), nil, nil)
	fd := fleetClient(t, f.open(t), fo("held-fd"), nil, func(o *redshard.Options) {
		o.AutoPipeline = true
		ap := redis.DefaultBlockingAutoPipelineOptions()
		ap.FullDuplex = true
		o.AutoPipelineOptions = ap
	})
	cur, err := f.reg.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prep := cur.Begin(f.doc(2), "stuck", "dead") // no driver: it stays in Prepare
	if err := f.reg.Publish(ctx, cur, prep); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, c, prep.Version())
	waitVersion(t, fd, prep.Version())
	heldPaths(t, c, fd, moving, staying)
}

// heldPaths runs, in each batching path, a SET of moving (held) with a
// 300ms deadline and checks it returns by its deadline, refused.
func heldPaths(t *testing.T, c, fd *redshard.Client, moving, staying string) {
	ap, err := c.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	async, err := c.AsyncAutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	fdAP, err := fd.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	paths := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"AutoPipeline", func(ctx context.Context) error { return ap.Set(ctx, moving, "x", 0).Err() }},
		{"AsyncAutoPipeline", func(ctx context.Context) error { return async.Set(ctx, moving, "x", 0).Err() }},
		{"Pipelined", func(ctx context.Context) error {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, staying, "y", 0)
				p.Set(ctx, moving, "x", 0)
				return nil
			})
			return err
		}},
		{"TxPipelined", func(ctx context.Context) error {
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, moving, "x", 0)
				return nil
			})
			return err
		}},
		{"FullDuplex", func(ctx context.Context) error { return fd.Set(ctx, moving, "x", 0).Err() }},
		{"FullDuplex AutoPipeline", func(ctx context.Context) error { return fdAP.Set(ctx, moving, "x", 0).Err() }},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			err := heldCall(t, p.run)
			if !errors.Is(err, redshard.ErrHandoffInProgress) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("held SET with a 300ms deadline: %v, want ErrHandoffInProgress or the deadline", err)
			}
		})
	}
}

// heldCall runs run with a 300ms deadline and returns its error; it fails
// the test if run has not returned 30s later.
func heldCall(t *testing.T, run func(ctx context.Context) error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		done <- run(dctx)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("a command with a 300ms deadline held for 30s: its wait is not bounded by its own deadline")
		return nil
	}
}
