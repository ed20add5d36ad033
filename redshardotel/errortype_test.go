package redshardotel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/redshardotel"
)

// replyError is a reply error from Redis, as go-redis returns them.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// timeoutError is a network timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestErrorType(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"redis.Nil", redis.Nil, ""},
		{"wrapped redis.Nil", fmt.Errorf("get: %w", redis.Nil), ""},
		{"shard down", fmt.Errorf("shard a(10.0.0.1:6379): %w", redshard.ErrShardDown), "redshard.shard_down"},
		{"cross shard", redshard.ErrCrossShard, "redshard.cross_shard"},
		{"not sharded", fmt.Errorf("INFO: %w", redshard.ErrNotSharded), "redshard.not_sharded"},
		{"unknown command", redshard.ErrUnknownCommand, "redshard.unknown_command"},
		{"closed", redis.ErrClosed, "closed"},
		{"canceled", context.Canceled, "canceled"},
		{"deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), "timeout"},
		{"os deadline", os.ErrDeadlineExceeded, "timeout"},
		{"net timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}, "timeout"},
		{"WRONGTYPE", replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), "WRONGTYPE"},
		{"ERR", replyError("ERR unknown command 'FOO'"), "ERR"},
		{"NOSCRIPT", fmt.Errorf("evalsha: %w", replyError("NOSCRIPT No matching script.")), "NOSCRIPT"},
		{"bare code", replyError("LOADING"), "LOADING"},
		{"no code", replyError("redis: something odd"), "_OTHER"},
		{"lower-case code", replyError("err lower"), "_OTHER"},
		{"code too long", replyError("ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ x"), "_OTHER"},
		{"refused dial", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, "_OTHER"},
		{"other", errors.New("boom"), "_OTHER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redshardotel.ErrorType(tc.err); got != tc.want {
				t.Errorf("ErrorType(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// TestErrorTypeRealReplies checks the prefix of replies a real go-redis
// client parses (from miniredis).
func TestErrorTypeRealReplies(t *testing.T) {
	cl := newCluster(t, 1, redshard.Options{})
	cl.c.Set(ctx, "s", "v", 0)
	_, rdb := cl.c.ShardFor("s")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"WRONGTYPE", rdb.LPush(ctx, "s", "x").Err(), "WRONGTYPE"},
		{"NOSCRIPT", rdb.EvalSha(ctx, "0000000000000000000000000000000000000000", []string{"s"}).Err(), "NOSCRIPT"},
		{"ERR", rdb.Do(ctx, "NOSUCHCOMMAND").Err(), "ERR"},
		{"missing key", rdb.Get(ctx, "missing").Err(), ""},
	} {
		if got := redshardotel.ErrorType(tc.err); got != tc.want {
			t.Errorf("%s: ErrorType(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
	}
}
