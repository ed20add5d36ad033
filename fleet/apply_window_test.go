package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
)

// errDriverStopped is what stopDriver's Publish returns: the driver stops
// there, as if killed.
var errDriverStopped = errors.New("test: the driver stops here")

// stopDriver is a registry whose Publish of the config at version at (not
// a restore) stops the driver: before the config is published, or, with
// after, just after.
type stopDriver struct {
	registry.Registry
	at    registry.Version
	after bool
}

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

// TestApplyRestoresFromEveryWindow (issue 26, finding 6): a driver stopped
// in any window of a change (its beacon written and its phase not yet
// published, or its phase just published), followed by the loss of the
// registry's data: apply, run again with the same document, restores the
// registry from the servers' beacons and finishes the change, with no
// hand work, and no acknowledged write is lost.
func TestApplyRestoresFromEveryWindow(t *testing.T) {
	for _, phase := range []registry.Phase{registry.Prepare, registry.Migrate, registry.Commit, registry.Stable} {
		for _, after := range []bool{false, true} {
			name := fmt.Sprintf("before %s", phase)
			if after {
				name = fmt.Sprintf("after %s", phase)
			}
			t.Run(name, func(t *testing.T) { applyWindow(t, registry.Version{Epoch: 2, Phase: phase}, after) })
		}
	}
}

func applyWindow(t *testing.T, at registry.Version, after bool) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(2))
	p := f.client(t, f.open(t), "p")
	q := f.client(t, f.open(t), "q")
	acked := map[string]string{}
	write := func(who string, c *redshard.Client, n int) {
		for i := range n {
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
	write("before", p, 60)

	_, err := fleet.Apply(ctx, &stopDriver{Registry: f.reg, at: at, after: after}, f.doc(3), fleet.ApplyOptions{Driver: "test",
		Client: &redshard.Options{Health: &redshard.HealthOptions{Disable: true}}})
	if !errors.Is(err, errDriverStopped) {
		t.Fatalf("Apply with the driver stopped at %s: %v", at, err)
	}
	write("stopped", q, 60)
	f.regm.FlushAll()
	write("lost", p, 60)

	rep, err := fleet.Apply(ctx, f.reg, f.doc(3), fleet.ApplyOptions{Driver: "test",
		Client: &redshard.Options{Health: &redshard.HealthOptions{Disable: true}}})
	if err != nil {
		t.Fatalf("apply again after the registry lost its data: %v", err)
	}
	t.Logf("apply again: restored %q, %s → %s", rep.Restored, rep.From, rep.To)
	if rep.Restored == "" || rep.To != (registry.Version{Epoch: 2, Phase: registry.Stable}) {
		t.Errorf("apply again: %+v, want the registry restored and the change finished at epoch 2 stable", rep)
	}
	for _, c := range []*redshard.Client{p, q} {
		awaitStatus(t, c, "on epoch 2 stable, unfenced", func(st redshard.FleetStatus) bool {
			return !st.Fenced && st.Err == nil && st.Version == rep.To
		})
	}
	write("after", q, 60)
	if len(acked) < 120 {
		t.Errorf("only %d writes acknowledged", len(acked))
	}
	for k, v := range acked {
		for i, c := range []*redshard.Client{p, q} {
			if got, err := c.Get(ctx, k).Result(); err != nil || got != v {
				t.Errorf("process %d: GET %s = %q, %v; acknowledged %q", i, k, got, err, v)
			}
		}
	}
}
