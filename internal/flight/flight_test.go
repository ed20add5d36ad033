package flight_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/internal/flight"
)

// TestDoDetached: the call is detached from its callers' contexts: the
// leader giving up does not end it, and a caller asking the same key
// while it runs joins it rather than running fn again.
func TestDoDetached(t *testing.T) {
	r := flight.New()
	defer r.Close()
	var g singleflight.Group
	started, release := make(chan struct{}), make(chan struct{})
	lctx, lcancel := context.WithCancel(context.Background())
	leader := make(chan error, 1)
	fnErr := make(chan error, 1)
	go func() {
		_, joined, err := r.Do(lctx, &g, "k", time.Hour, func(fctx context.Context) (any, error) {
			close(started)
			<-release
			fnErr <- fctx.Err()
			return "v", nil
		})
		if joined {
			err = errors.New("the leader joined")
		}
		leader <- err
	}()
	<-started
	lcancel()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v, want its own context's cancellation", err)
	}
	// The call still runs: a caller of the same key joins it (its own
	// context, done already, ends its wait, not the call).
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, joined, err := r.Do(done, &g, "k", time.Hour, func(context.Context) (any, error) {
		t.Error("fn ran again while the call ran")
		return nil, nil
	})
	if !joined || !errors.Is(err, context.Canceled) {
		t.Fatalf("second caller: joined %v, %v; want joined, Canceled", joined, err)
	}
	close(release)
	if err := <-fnErr; err != nil {
		t.Fatalf("fn's context ended with a caller's: %v", err)
	}
}

// TestDoResult: a caller gets fn's value and error.
func TestDoResult(t *testing.T) {
	r := flight.New()
	defer r.Close()
	var g singleflight.Group
	boom := errors.New("boom")
	v, joined, err := r.Do(context.Background(), &g, "k", time.Hour, func(context.Context) (any, error) { return "v", boom })
	if v != "v" || joined || err != boom {
		t.Fatalf("Do = %v, %v, %v; want v, false, boom", v, joined, err)
	}
}

// TestDoTimeout: fn's context ends after the timeout.
func TestDoTimeout(t *testing.T) {
	r := flight.New()
	defer r.Close()
	var g singleflight.Group
	_, _, err := r.Do(context.Background(), &g, "k", time.Millisecond, func(fctx context.Context) (any, error) {
		<-fctx.Done()
		return nil, fctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do = %v, want DeadlineExceeded", err)
	}
}

// TestCloseEndsAndWaits: Close cancels a running call and a goroutine of
// Go, returns only after both have, and refuses what comes later.
func TestCloseEndsAndWaits(t *testing.T) {
	r := flight.New()
	var g singleflight.Group
	inDo, inGo := make(chan struct{}), make(chan struct{})
	var doneDo, doneGo bool
	doErr := make(chan error, 1)
	go func() {
		_, _, err := r.Do(context.Background(), &g, "k", time.Hour, func(fctx context.Context) (any, error) {
			close(inDo)
			<-fctx.Done()
			doneDo = true // written before Close returns: Close waits for fn
			return nil, fctx.Err()
		})
		doErr <- err
	}()
	if !r.Go(func() {
		close(inGo)
		<-r.Context().Done()
		doneGo = true
	}) {
		t.Fatal("Go refused before Close")
	}
	<-inDo
	<-inGo
	r.Close()
	if !doneDo || !doneGo {
		t.Fatalf("Close returned before the call (%v) and the goroutine (%v) ended", doneDo, doneGo)
	}
	if err := <-doErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the running call: %v, want Canceled", err)
	}
	if _, _, err := r.Do(context.Background(), &g, "k2", time.Hour, func(context.Context) (any, error) {
		t.Error("fn ran after Close")
		return nil, nil
	}); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("Do after Close = %v, want redis.ErrClosed", err)
	}
	if r.Go(func() { t.Error("Go's fn ran after Close") }) {
		t.Fatal("Go after Close reported true")
	}
	r.Close() // idempotent
}

// TestTrackerCloseWaits: Close waits for the calls entered before it and
// refuses later ones.
func TestTrackerCloseWaits(t *testing.T) {
	var tr flight.Tracker
	if !tr.Enter() {
		t.Fatal("a zero Tracker refused")
	}
	closed := make(chan struct{})
	go func() {
		tr.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned with a call running")
	default:
	}
	// Enter is refused once Close has begun; until then it may succeed
	// (and must be left).
	for tr.Enter() {
		tr.Leave()
	}
	tr.Leave()
	<-closed
	tr.Close()
}
