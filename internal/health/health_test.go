package health_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/health"
)

// target is a health.Target whose heartbeats answer what the test sends
// on pings, and whose marks are reported on marks.
type target struct {
	beat   health.Beat
	down   atomic.Bool
	pings  chan error // the next heartbeat's answer
	marks  chan bool  // true: marked down, false: marked up
	upErrs chan error // what each MarkUp returns
}

func (t *target) Beat() *health.Beat { return &t.beat }
func (t *target) Ping(ctx context.Context) error {
	select {
	case err := <-t.pings:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (t *target) Down() bool { return t.down.Load() }
func (t *target) MarkDown(error) {
	t.down.Store(true)
	t.marks <- true
}
func (t *target) MarkUp() error {
	if err := <-t.upErrs; err != nil {
		return err
	}
	t.down.Store(false)
	t.marks <- false
	return nil
}

// TestMonitorThresholds: FailureThreshold failed heartbeats in a row mark
// a target down, RecoveryThreshold good ones mark it up, a failed MarkUp
// counts the good heartbeats again, and Close stops the monitor.
func TestMonitorThresholds(t *testing.T) {
	tg := &target{pings: make(chan error), marks: make(chan bool, 1), upErrs: make(chan error, 1)}
	m := health.New(health.Options{Interval: time.Millisecond, Timeout: time.Minute, FailureThreshold: 2, RecoveryThreshold: 2},
		func() []health.Target { return []health.Target{tg, tg} }) // one server twice: pinged once a tick
	defer m.Close()
	m.Start()
	m.Start()
	boom := errors.New("boom")
	expect := func(want string) {
		t.Helper()
		select {
		case down := <-tg.marks:
			if got := map[bool]string{true: "down", false: "up"}[down]; got != want {
				t.Fatalf("marked %s, want %s", got, want)
			}
		default:
			if want != "" {
				t.Fatalf("not marked, want %s", want)
			}
		}
	}
	tg.pings <- boom
	tg.pings <- nil // a good one between: the failures are counted from zero
	tg.pings <- boom
	tg.pings <- boom // the second in a row: MarkDown
	tg.pings <- nil  // that tick's apply has run
	expect("down")
	tg.pings <- nil                           // second good one: MarkUp is called
	tg.upErrs <- errors.New("cleanup failed") // and fails
	tg.pings <- nil                           // counted from zero again: first
	tg.pings <- nil                           // second: MarkUp is called
	expect("")
	tg.upErrs <- nil // and succeeds
	tg.pings <- nil  // that tick's apply has run
	expect("up")
	if m.Ticks().Load() < 9 {
		t.Errorf("Ticks = %d after 9 heartbeats", m.Ticks().Load())
	}
	m.Close()
	m.Close()
	m.Start() // closed: starts nothing (goleak checks)
}

// TestMonitorNotStarted: a monitor that never started closes at once, and
// a nil one does nothing.
func TestMonitorNotStarted(t *testing.T) {
	health.New(health.Options{Interval: time.Millisecond}, nil).Close()
	var m *health.Monitor
	m.Start()
	m.Close()
}

// TestOutage: keys recorded while down are deleted on the returning server
// and on their stand-ins before the mark; nothing is recorded once up.
func TestOutage(t *testing.T) {
	home, stand := miniredis.RunT(t), miniredis.RunT(t)
	homeCl := redis.NewClient(&redis.Options{Addr: home.Addr()})
	standCl := redis.NewClient(&redis.Options{Addr: stand.Addr()})
	defer homeCl.Close()
	defer standCl.Close()
	var o health.Outage
	var down atomic.Bool
	if o.Record(&down, "a", standCl) {
		t.Fatal("recorded while up")
	}
	down.Store(true)
	for _, k := range []string{"a", "b"} {
		if !o.Record(&down, k, standCl) {
			t.Fatalf("%s not recorded while down", k)
		}
		_ = home.Set(k, "old")
		_ = stand.Set(k, "new")
	}
	_ = stand.Set("c", "other")

	if n, err := o.MarkUp(&down, func() *redis.Client { return nil }, "s0"); !errors.Is(err, redis.ErrClosed) || n != 0 || !down.Load() {
		t.Fatalf("MarkUp with home closed = %d, %v, down %v; want 0, ErrClosed, still down", n, err, down.Load())
	}
	n, err := o.MarkUp(&down, func() *redis.Client { return homeCl }, "s0")
	if err != nil || n != 2 || down.Load() {
		t.Fatalf("MarkUp = %d, %v, down %v; want 2, nil, up", n, err, down.Load())
	}
	for _, k := range []string{"a", "b"} {
		if home.Exists(k) || stand.Exists(k) {
			t.Errorf("%s not deleted on both", k)
		}
	}
	if !stand.Exists("c") {
		t.Error("a key never recorded was deleted")
	}
	if o.Record(&down, "d", standCl) {
		t.Error("recorded once up")
	}
}
