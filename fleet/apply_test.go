package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
)

func TestFleetApplyRefusals(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(1))
	c := f.client(t, f.openSteady(t), "p")
	if err := c.SetShards(ctx, nil); !errors.Is(err, redshard.ErrFleetManaged) {
		t.Errorf("SetShards: %v, want ErrFleetManaged", err)
	}
	// A change stuck in prepare (its driver died): another config is
	// refused, the same one resumes.
	cur, _ := f.reg.Get(ctx)
	prep := cur.Begin(f.doc(2), "stuck", "dead")
	if err := f.reg.Publish(ctx, cur, prep); err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.Apply(ctx, f.reg, f.doc(3), fleet.ApplyOptions{}); !errors.Is(err, redshard.ErrHandoffInProgress) {
		t.Errorf("Apply of another config mid-change: %v, want ErrHandoffInProgress", err)
	}
	lock, err := f.reg.Lock(ctx, "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.Apply(ctx, f.reg, f.doc(2), fleet.ApplyOptions{}); !errors.Is(err, registry.ErrLocked) {
		t.Errorf("Apply while another driver holds the lock: %v, want ErrLocked", err)
	}
	_ = lock.Unlock(ctx)
	rep := f.apply(t, ctx, f.doc(2))
	if rep.From != prep.Version() || rep.To.Epoch != prep.Epoch || rep.To.Phase != registry.Stable {
		t.Errorf("resumed: %+v", rep)
	}
	waitVersion(t, c, rep.To)
	if rep := f.apply(t, ctx, f.doc(2)); !rep.Unchanged {
		t.Errorf("same config again: %+v", rep)
	}
}

// TestApplyAfterDriverCrash: a driver killed mid-change leaves its own
// client's member entry live for a member lifetime; apply run again under
// the same driver name must wait that entry out, not fail because the
// registry refuses to let two processes share a member id.
func TestApplyAfterDriverCrash(t *testing.T) {
	f := newFleet(t, 2)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(1))
	cur, err := f.reg.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// What the killed run's client last wrote: the driver's member id
	// ("test/apply" for Driver "test") under an incarnation of its own.
	crashed := registry.Member{ID: "test/apply", Incarnation: "killed-run", Epoch: cur.Epoch, Phase: cur.Phase, Config: cur.ID()}
	if err := f.reg.Heartbeat(ctx, crashed); err != nil {
		t.Fatal(err)
	}
	rep := f.apply(t, ctx, f.doc(2))
	if rep.To.Phase != registry.Stable || rep.To.Epoch != cur.Epoch+1 {
		t.Fatalf("apply after the crash reached %s, want epoch %d stable", rep.To, cur.Epoch+1)
	}
}

// TestApplyRefusesBadSentinelDoc: a document's Sentinel shard is checked
// as the configuration file's, before anything is published.
func TestApplyRefusesBadSentinelDoc(t *testing.T) {
	f := newFleet(t, 1)
	ctx := context.Background()
	for _, tc := range []struct{ doc, want string }{
		{`{"shards":[{"name":"a","addr":"` + f.addrs[0] + `","sentinel":{"master":"m","addrs":["s:26379"]}}]}`, `shards[0]: `},
		{`{"shards":[{"name":"a","sentinel":{"master":"m","addrs":[]}}]}`, `shards[0].sentinel.addrs: `},
		{`{"shards":[{"name":"a","sentinel":{"master":"m","addrs":["s"]}}]}`, `shards[0].sentinel.addrs[0]: `},
		{`{"shards":[{"name":"a","sentinel":{"master":"m","addrs":["s:1"],"password":"x"}}]}`, `unknown field "password"`},
	} {
		_, err := fleet.Apply(ctx, f.reg, json.RawMessage(tc.doc), fleet.ApplyOptions{Driver: "test"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Apply(%s) = %v, want an error with %q", tc.doc, err, tc.want)
		}
	}
	if cfg, err := f.reg.Get(ctx); err != nil || cfg.Epoch != 0 {
		t.Errorf("the registry holds %+v, %v; want nothing published", cfg, err)
	}
}

// slowPublish is a registry whose Publish of a Prepare phase takes at
// least delay: a loaded machine, or a slow registry.
type slowPublish struct {
	registry.Registry
	delay time.Duration
}

func (r *slowPublish) Publish(ctx context.Context, prev, next registry.Config) error {
	if next.Phase == registry.Prepare {
		time.Sleep(r.delay)
	}
	return r.Registry.Publish(ctx, prev, next)
}

// TestApplyReportsEveryPhase: the report lists every phase of a change,
// Prepare too when its beacons were written longer ago than the wait
// Migrate asks for (publishing it was slow). The Prepare phase went
// missing from the report on a loaded machine, where the wait that
// remained after the publish came out negative and was taken for "do not
// report".
func TestApplyReportsEveryPhase(t *testing.T) {
	f := newFleet(t, 2)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(1))
	// Longer than the wait for the beacons (twice their freshness, 500ms).
	reg := &slowPublish{Registry: f.reg, delay: time.Second}
	rep, err := fleet.Apply(ctx, reg, f.doc(2), fleet.ApplyOptions{Driver: "test",
		Client: &redshard.Options{Health: &redshard.HealthOptions{Disable: true}}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	var got []registry.Phase
	for _, p := range rep.Phases {
		if p.Version.Epoch != rep.To.Epoch {
			t.Errorf("phase %s reported in the change to %s", p.Version, rep.To)
		}
		got = append(got, p.Version.Phase)
	}
	want := []registry.Phase{registry.Prepare, registry.Migrate, registry.Commit, registry.Stable}
	if !slices.Equal(got, want) {
		t.Errorf("reported phases %v, want %v", got, want)
	}
}
