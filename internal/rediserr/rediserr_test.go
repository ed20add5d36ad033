package rediserr_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/rediserr"
)

func TestIs(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"redis.Nil", redis.Nil, true},
		{"wrapped redis.Nil", fmt.Errorf("get: %w", redis.Nil), true},
		{"server reply", redis.ErrNoScript, true},
		{"wrapped server reply", fmt.Errorf("evalsha: %w", redis.ErrNoScript), true},
		{"closed", redis.ErrClosed, false},
		{"net", &net.OpError{Op: "read", Err: errors.New("reset")}, false},
		{"deadline", context.DeadlineExceeded, false},
		{"plain", errors.New("ERR looks like a reply but is not one"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rediserr.Is(tc.err); got != tc.want {
				t.Fatalf("Is(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
