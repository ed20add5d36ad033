package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/ring"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAdmission: a nil admission is open; a new one is closed until Open,
// which may be called again, and a waiter returns.
func TestAdmission(t *testing.T) {
	var none *Admission
	if !none.Wait(context.Background()) {
		t.Fatal("a nil admission is closed")
	}
	a := NewAdmission()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if a.Wait(ctx) {
		t.Fatal("a new admission admitted a connection whose context ended")
	}
	got := make(chan bool)
	go func() { got <- a.Wait(context.Background()) }()
	a.Open()
	a.Open()
	<-got // released by Open (or by admitWait on a loaded machine): it does not hang
	if !a.Wait(context.Background()) {
		t.Fatal("an opened admission is closed")
	}
	if !a.Wait(ctx) {
		t.Fatal("an opened admission refused a connection whose context ended")
	}
}

// TestFenceRank: a lost member id outranks a registry behind the fleet,
// which outranks a lease that ran out, wrapped or not.
func TestFenceRank(t *testing.T) {
	lost := fmt.Errorf("taken: %w", registry.ErrMemberIDInUse)
	behind := fmt.Errorf("x: %w", ErrRegistryBehind)
	if !(fenceRank(lost) > fenceRank(behind) && fenceRank(behind) > fenceRank(nil) &&
		fenceRank(errors.New("heartbeat failed")) == fenceRank(nil)) {
		t.Fatalf("ranks: lost %d, behind %d, other %d, nil %d", fenceRank(lost), fenceRank(behind),
			fenceRank(errors.New("x")), fenceRank(nil))
	}
}

// TestFenceRefuseAndFollow: a refusal wraps ErrFenced and the cause (or
// says the reason); the fence of a topology that follows a newer config
// keeps the cause and the beacons read, and knows the newer version.
func TestFenceRefuseAndFollow(t *testing.T) {
	cause := fmt.Errorf("x: %w", ErrRegistryBehind)
	fc := &Fence{known: registry.Version{Epoch: 1, Phase: registry.Stable}, reason: cause.Error(), cause: cause, cache: &beaconCache{}}
	err := fc.Refuse("k", "it moves in the change to epoch %d", 2)
	if !errors.Is(err, ErrFenced) || !errors.Is(err, ErrRegistryBehind) || !strings.Contains(err.Error(), "epoch 2") {
		t.Fatalf("refusal %v", err)
	}
	lease := &Fence{reason: "no heartbeat"}
	if err := lease.Refuse("k", "r"); !errors.Is(err, ErrFenced) || !strings.HasSuffix(err.Error(), "; no heartbeat") {
		t.Fatalf("refusal of a lease fence %v", err)
	}
	if (*Fence)(nil).Follow(registry.Config{}) != nil {
		t.Fatal("a trusted topology's successor is fenced")
	}
	next := registry.Initial(json.RawMessage(`{}`))
	next.Epoch = 2
	nf := fc.Follow(next)
	if nf.Known() != next.Version() || nf.knownID != next.ID() || nf.cause != cause || nf.cache != fc.cache || nf.Reason() != fc.Reason() {
		t.Fatalf("Follow: %+v from %+v", nf, fc)
	}
}

// TestBeaconSet: a reading that started before the one held is ignored; a
// reading of another version is a change, parsed; a first reading is not
// a change.
func TestBeaconSet(t *testing.T) {
	parsed := 0
	parse := func(doc []byte) (Ring, error) {
		parsed++
		r, err := ring.New([]ring.Node{{Name: "a", Weight: 1}}, nil)
		return Ring{R: r, IDs: []string{string(doc)}}, err
	}
	cfg := func(epoch uint64) []byte {
		c := registry.Initial(json.RawMessage(`"s1"`))
		c.Epoch = epoch
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	var bc beaconCache
	t0 := time.Unix(100, 0)
	if changed, err := bc.learn("s", t0, cfg(1), parse); err != nil || changed || parsed != 1 {
		t.Fatalf("first reading: changed %v, err %v, parsed %d", changed, err, parsed)
	}
	if changed, err := bc.learn("s", t0.Add(-time.Second), cfg(2), parse); err != nil || changed || parsed != 1 {
		t.Fatalf("older reading: changed %v, err %v, parsed %d", changed, err, parsed)
	}
	if changed, err := bc.learn("s", t0.Add(time.Second), cfg(1), parse); err != nil || changed || parsed != 1 {
		t.Fatalf("same reading: changed %v, err %v, parsed %d", changed, err, parsed)
	}
	if changed, err := bc.learn("s", t0.Add(2*time.Second), cfg(2), parse); err != nil || !changed || parsed != 2 {
		t.Fatalf("newer reading: changed %v, err %v, parsed %d", changed, err, parsed)
	}
	b := bc.entry("s")
	if b.cfg.Epoch != 2 || len(b.rings) != 1 || b.rings[0].Owner("k") != `"s1"` {
		t.Fatalf("held %+v", b)
	}
	if _, err := bc.learn("s", t0.Add(3*time.Second), []byte("{"), parse); err == nil {
		t.Fatal("a beacon that is not JSON was learnt")
	}
}
