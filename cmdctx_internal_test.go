package redshard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestCmdContext: routing finds the context a go-redis command was built
// with, for the command types of every kind of reply, and holdContext ends
// at the earliest deadline of a batch's commands and when any of them is
// cancelled. TestFleetHeldBatchDeadline depends on it; this says why when
// a go-redis upgrade moves the field.
func TestCmdContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, cmd := range []redis.Cmder{
		redis.NewCmd(ctx, "get", "k"), redis.NewStatusCmd(ctx, "set", "k", "v"), redis.NewStringCmd(ctx, "get", "k"),
		redis.NewIntCmd(ctx, "incr", "k"), redis.NewBoolCmd(ctx, "expire", "k", 1), redis.NewSliceCmd(ctx, "mget", "k"),
		redis.NewStringSliceCmd(ctx, "keys", "*"), redis.NewScanCmd(ctx, nil, "scan", 0),
	} {
		got, ok := cmdContext(cmd)
		if !ok || got != ctx {
			t.Errorf("cmdContext(%T) = %v, %v; want the context it was built with", cmd, got, ok)
		}
	}
	if _, ok := cmdContext(nil); ok {
		t.Error("cmdContext(nil) found a context")
	}

	base := context.Background()
	soon, cancelSoon := context.WithTimeout(base, 50*time.Millisecond)
	defer cancelSoon()
	later, cancelLater := context.WithTimeout(base, time.Hour)
	defer cancelLater()
	hctx, stop := holdContext(base, []redis.Cmder{redis.NewStringCmd(later, "get", "a"), redis.NewStringCmd(soon, "get", "b"),
		redis.NewStringCmd(base, "get", "c")})
	dl, ok := hctx.Deadline()
	if want, _ := soon.Deadline(); !ok || !dl.Equal(want) {
		t.Errorf("holdContext deadline %v, %v; want the earliest command's, %v", dl, ok, want)
	}
	stop()

	cctx, cancelC := context.WithCancel(base)
	hctx, stop = holdContext(base, []redis.Cmder{redis.NewStringCmd(later, "get", "a"), redis.NewStringCmd(cctx, "get", "b")})
	defer stop()
	cancelC()
	select {
	case <-hctx.Done():
		if !errors.Is(hctx.Err(), context.Canceled) {
			t.Errorf("holdContext after a command's cancellation: %v", hctx.Err())
		}
	case <-time.After(10 * time.Second):
		t.Error("holdContext did not end when a command's context was cancelled")
	}

	if hctx, stop := holdContext(base, []redis.Cmder{redis.NewStringCmd(base, "get", "a")}); hctx != base {
		t.Error("holdContext derived a context for commands with nothing to bound")
	} else {
		stop()
	}
}
