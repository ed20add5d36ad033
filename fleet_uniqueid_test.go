package redshard_test

// Regressions of issue 26: two live processes are never one member. The
// registry refuses a heartbeat of an id whose live entry holds another
// incarnation (registry.ErrMemberIDInUse); a process refused at its join
// fails NewClient, one refused later is fenced for good.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/registry"
)

// TestFleetMemberIDInUse: a second process with the MemberID of a live one
// fails NewClient with a clear error; the first goes on unharmed.
func TestFleetMemberIDInUse(t *testing.T) {
	f, ctx := newFleet(t, 1), context.Background()
	f.apply(t, ctx, f.doc(1))
	a := f.client(t, f.open(t), "same")
	sa, _ := a.FleetStatus()

	b, err := redshard.NewClient(&redshard.Options{Registry: f.open(t), Fleet: &redshard.FleetOptions{MemberID: "same"},
		Health: &redshard.HealthOptions{Disable: true}})
	if err == nil {
		_ = b.Close()
		t.Fatal("NewClient with the MemberID of a live process succeeded")
	}
	if !errors.Is(err, registry.ErrMemberIDInUse) || !errors.Is(err, redshard.ErrInvalidOptions) ||
		!strings.Contains(err.Error(), `member id "same" is in use by a live process; pick another FleetOptions.MemberID`) {
		t.Fatalf("NewClient with the MemberID of a live process: %v, want ErrMemberIDInUse and ErrInvalidOptions, naming the id and the option", err)
	}
	members, err := f.reg.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0].ID != "same" || members[0].Incarnation != sa.Member.Incarnation {
		t.Fatalf("members %+v: want the first process's entry (incarnation %q) only", members, sa.Member.Incarnation)
	}
	if err := a.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("the first process after the second was refused: %v", err)
	}
}

// TestFleetMemberIDTaken: a process whose entry another live process took
// over (here: its entry removed and replaced, through the registry's API,
// by another incarnation, as after a pause past its lease) fences itself
// for good: a key the change in flight moves is refused at once with
// ErrFenced naming the lost id (an unfenced process would hold it), its
// status says why, and closing it does not remove the other's entry.
func TestFleetMemberIDTaken(t *testing.T) {
	f, ctx := newFleet(t, 2), context.Background()
	moving, _ := f.stuckPrepare(t, ctx)
	a := f.client(t, f.open(t), "same")
	cur, err := f.reg.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The usurper's entry lives far longer than the test: a's refused
	// heartbeats are what the test waits for, however loaded the machine.
	usurper, err := registry.NewRedisOptions(f.rdb, "redshard:registry:test", &registry.Options{MemberTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = usurper.Close() })
	other := registry.Member{ID: "same", Incarnation: "usurper", Epoch: cur.Epoch, Phase: cur.Phase, Config: cur.ID()}
	bound, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, _ := a.FleetStatus() // a's entry: its id and incarnation
	for {
		if err := usurper.Leave(bound, st.Member); err != nil {
			t.Fatal(err)
		}
		err := usurper.Heartbeat(bound, other)
		if err == nil {
			break
		}
		if !errors.Is(err, registry.ErrMemberIDInUse) { // a heartbeat of a came between
			t.Fatalf("the usurper's heartbeat: %v", err)
		}
	}
	defer func() { _ = usurper.Leave(ctx, other) }()

	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st, _ := a.FleetStatus()
		if errors.Is(st.Err, registry.ErrMemberIDInUse) && st.Fenced {
			if !strings.Contains(st.Err.Error(), `member id "same" was taken by another live process`) {
				t.Fatalf("FleetStatus.Err = %v, want it to say the id was taken", st.Err)
			}
			break
		}
		select {
		case <-tick.C:
		case <-bound.Done():
			t.Fatalf("a did not fence itself for its lost id: status %+v", st)
		}
	}

	err = a.Set(bound, moving, "x", 0).Err()
	if !errors.Is(err, redshard.ErrFenced) || !errors.Is(err, registry.ErrMemberIDInUse) {
		t.Fatalf("SET of a moving key by a process that lost its id: %v, want ErrFenced wrapping ErrMemberIDInUse", err)
	}
	if f.mini[0].Exists(moving) || f.mini[1].Exists(moving) {
		t.Error("a refused SET was written")
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	members, err := f.reg.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0].Incarnation != "usurper" {
		t.Fatalf("members after a closed: %+v, want the usurper's entry kept", members)
	}
}
