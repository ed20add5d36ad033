package redshard_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// TestFleetFlushDuringChange: FLUSHDB, FLUSHALL and SWAPDB are refused,
// alone, in a pipeline and in a transaction, from Prepare until the change
// is over. In Prepare a flush would reach the previous ring's server only,
// while another process in Migrate may already have moved keys to the new
// one; in Migrate and Commit another process's move taken before the flush
// could be settled after it (the flush empties the settled set that would
// refuse it). Nothing is flushed while refused; once Stable, FLUSHDB runs.
func TestFleetFlushDuringChange(t *testing.T) {
	f := newFleet(t, 2)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(1))
	c := f.client(t, f.openSteady(t), "p") // steady: a fenced process would be refused as fenced, not as in a handoff
	moving, _ := keyMoving(t, f, 1)
	if err := c.Set(ctx, moving, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	refusedAll := func(phase string) {
		t.Helper()
		for _, args := range [][]any{{"flushdb"}, {"flushall"}, {"swapdb", 0, 1}} {
			if err := c.Do(ctx, args...).Err(); !errors.Is(err, redshard.ErrHandoffInProgress) {
				t.Errorf("%s: %v alone: %v, want ErrHandoffInProgress", phase, args, err)
			}
			var cmd *redis.Cmd
			_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
				cmd = p.Do(ctx, args...)
				return nil
			})
			if !errors.Is(cmd.Err(), redshard.ErrHandoffInProgress) {
				t.Errorf("%s: %v in a pipeline: %v, want ErrHandoffInProgress", phase, args, cmd.Err())
			}
			if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, args...)
				return nil
			}); err == nil {
				t.Errorf("%s: %v in a transaction ran", phase, args)
			}
		}
		if n := f.mini[0].DB(0).Keys(); len(n) == 0 && !f.mini[1].Exists(moving) {
			t.Fatalf("%s: the data was flushed", phase)
		}
	}

	cur, _ := f.reg.Get(ctx)
	prep := cur.Begin(f.doc(2), "flush", "test")
	if err := f.reg.Publish(ctx, cur, prep); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, c, prep.Version())
	refusedAll("prepare")

	mig, _ := prep.Advance()
	if err := f.reg.Publish(ctx, prep, mig); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, c, mig.Version())
	refusedAll("migrate")
	if got, err := c.Get(ctx, moving).Result(); err != nil || got != "v" {
		t.Fatalf("GET in migrate: %q, %v", got, err)
	}

	com, _ := mig.Advance()
	if err := f.reg.Publish(ctx, mig, com); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, c, com.Version())
	refusedAll("commit")

	st, _ := com.Advance()
	if err := f.reg.Publish(ctx, com, st); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, c, st.Version())
	// Once stable FLUSHDB runs, unless the process is fenced (a lease that
	// went stale on a starved machine): then it is refused as such, and
	// runs once the fence has ended.
	for attempt := 0; ; attempt++ {
		err := c.FlushDB(ctx).Err()
		if err == nil {
			break
		}
		if !errors.Is(err, redshard.ErrFenced) || attempt == 20 {
			t.Fatalf("FLUSHDB once stable: %v", err)
		}
		waitFenced(t, c, false)
	}
	if n, err := c.Exists(ctx, moving).Result(); err != nil || n != 0 {
		t.Fatalf("after FLUSHDB: EXISTS %d, %v", n, err)
	}
}

// TestFlushInPipelineDuringSetShards: a single client's FLUSHDB during a
// handoff runs alone (reaching the removed servers), and is refused in a
// pipeline, which would not.
func TestFlushInPipelineDuringSetShards(t *testing.T) {
	cl := newCluster(t, 1, 1, 1)
	c := cl.c
	ctx := context.Background()
	if err := c.SetShards(ctx, cl.shards[:2]); err != nil {
		t.Fatal(err)
	}
	var cmd *redis.StatusCmd
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = p.FlushDB(ctx)
		return nil
	})
	if !errors.Is(cmd.Err(), redshard.ErrHandoffInProgress) {
		t.Fatalf("FLUSHDB in a pipeline during the handoff: %v, want ErrHandoffInProgress", cmd.Err())
	}
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("FLUSHDB alone during the handoff: %v", err)
	}
}
