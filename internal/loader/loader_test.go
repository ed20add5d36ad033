package loader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/flight"
	"github.com/redshard/redshard/internal/loader"
)

const indexKey = "test:index"

// env returns an Env over one miniredis server, which owns every key.
func env(t *testing.T) (*loader.Env, *miniredis.Miniredis) {
	mini := miniredis.RunT(t)
	cl := redis.NewClient(&redis.Options{Addr: mini.Addr()})
	r := flight.New()
	t.Cleanup(func() {
		r.Close()
		_ = cl.Close()
	})
	return &loader.Env{
		KV:      cl,
		Owner:   func(string) (string, *redis.Client) { return "s0", cl },
		Flights: r,
		Index: func(ctx context.Context, c *redis.Client, cmd redis.Cmder, key string) error {
			_ = c.Process(ctx, cmd)
			c.SAdd(ctx, indexKey, key)
			return cmd.Err()
		},
		IndexKey: indexKey,
	}, mini
}

// TestGetLeaseLoadsOnceAndReleases: a miss with the fleet lease loads once,
// stores the value, and releases the lease and its index entry; the next
// call is a hit.
func TestGetLeaseLoadsOnceAndReleases(t *testing.T) {
	e, mini := env(t)
	var g loader.Group
	opt := loader.Options{Lease: time.Minute, Wait: time.Minute, PollInterval: time.Millisecond, Fleet: true}
	loads := 0
	load := func(ctx context.Context) (string, error) {
		loads++
		if !mini.Exists(loader.LeasePrefix + "k") {
			t.Error("load ran without the lease")
		}
		return "v", nil
	}
	for i := range 2 {
		v, err := g.Get(context.Background(), e, opt, "k", 0, load)
		if v != "v" || err != nil {
			t.Fatalf("call %d: Get = %q, %v", i, v, err)
		}
	}
	if got, _ := mini.Get("k"); got != "v" || loads != 1 {
		t.Errorf("stored %q after %d loads; want v after 1", got, loads)
	}
	if mini.Exists(loader.LeasePrefix+"k") || mini.Exists(indexKey) {
		t.Error("lease or its index entry not released")
	}
	if s := g.Stats(); s.Hits != 1 || s.Misses != 1 || s.Loads != 1 || s.LeaseWins != 1 {
		t.Errorf("Stats = %+v", s)
	}
}

// TestGetLeaseTakenWaitsForValue: a flight that finds the lease taken
// reads the key until the holder's value appears, and does not load.
func TestGetLeaseTakenWaitsForValue(t *testing.T) {
	e, mini := env(t)
	var g loader.Group
	_ = mini.Set(loader.LeasePrefix+"k", "someone else")
	opt := loader.Options{Lease: time.Minute, Wait: time.Minute, PollInterval: time.Millisecond, Fleet: true}
	polled := make(chan struct{})
	mini.Server().SetPreHook(func(_ *server.Peer, cmd string, args ...string) bool {
		if cmd == "GET" && len(args) == 1 && args[0] == "k" {
			select {
			case polled <- struct{}{}:
			default:
			}
		}
		return false
	})
	go func() {
		<-polled // the caller's GET
		<-polled // the flight's first poll
		_ = mini.Set("k", "theirs")
	}()
	v, err := g.Get(context.Background(), e, opt, "k", 0, func(context.Context) (string, error) {
		t.Error("loaded while another held the lease")
		return "mine", nil
	})
	if v != "theirs" || err != nil {
		t.Fatalf("Get = %q, %v; want theirs", v, err)
	}
	if s := g.Stats(); s.LeaseWaits != 1 || s.LeaseWaitHits != 1 || s.Loads != 0 {
		t.Errorf("Stats = %+v", s)
	}
}

// TestGetPanicAndError: a load's error is returned as is and nothing is
// stored; its panic reaches the caller as a *loader.Panic that unwraps to
// the panic value.
func TestGetPanicAndError(t *testing.T) {
	e, mini := env(t)
	var g loader.Group
	opt := loader.Options{Lease: time.Minute, Wait: time.Minute, PollInterval: time.Millisecond}
	boom := errors.New("boom")
	if _, err := g.Get(context.Background(), e, opt, "k", 0, func(context.Context) (string, error) { return "", boom }); err != boom {
		t.Errorf("Get = %v, want the load's error", err)
	}
	if mini.Exists("k") {
		t.Error("stored after a load error")
	}
	func() {
		defer func() {
			p, ok := recover().(*loader.Panic)
			if !ok || !errors.Is(p, boom) {
				t.Errorf("recovered %v; want a *loader.Panic wrapping the value", p)
			}
		}()
		_, _ = g.Get(context.Background(), e, opt, "k", 0, func(context.Context) (string, error) { panic(boom) })
	}()
	if s := g.Stats(); s.Errors != 2 || s.Loads != 2 {
		t.Errorf("Stats = %+v", s)
	}
}
