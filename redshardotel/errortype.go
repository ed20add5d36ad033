package redshardotel

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// Values of the error.type attribute. Each names a kind of failure, never
// a key, a shard or an address, so the attribute stays low-cardinality.
const (
	ErrorTypeShardDown      = "redshard.shard_down"      // redshard.ErrShardDown
	ErrorTypeCrossShard     = "redshard.cross_shard"     // redshard.ErrCrossShard
	ErrorTypeNotSharded     = "redshard.not_sharded"     // redshard.ErrNotSharded
	ErrorTypeUnknownCommand = "redshard.unknown_command" // redshard.ErrUnknownCommand
	ErrorTypeClosed         = "closed"                   // redis.ErrClosed
	ErrorTypeCanceled       = "canceled"                 // context.Canceled
	ErrorTypeTimeout        = "timeout"                  // a deadline or a network timeout
	ErrorTypeOther          = "_OTHER"                   // anything else (the semantic conventions' fallback)
)

// maxPrefix bounds the length of a Redis error prefix used as an
// error.type: real ones (WRONGTYPE, NOSCRIPT, CROSSSLOT, ...) are short.
const maxPrefix = 32

// ErrorType returns the error.type attribute value for err, or "" when err
// is not a failure (nil or redis.Nil, the reply to a missing key). The
// redshard sentinels, matched with errors.Is, give the ErrorType*
// constants; a reply error from Redis (redis.Error) gives its prefix, the
// first word of the message in capitals (WRONGTYPE, ERR, NOSCRIPT, ...);
// redis.ErrClosed gives "closed", cancellation "canceled", a deadline or a network timeout
// "timeout", and anything else "_OTHER". It is safe for concurrent use.
func ErrorType(err error) string {
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		return ""
	case errors.Is(err, redshard.ErrShardDown):
		return ErrorTypeShardDown
	case errors.Is(err, redshard.ErrCrossShard):
		return ErrorTypeCrossShard
	case errors.Is(err, redshard.ErrNotSharded):
		return ErrorTypeNotSharded
	case errors.Is(err, redshard.ErrUnknownCommand):
		return ErrorTypeUnknownCommand
	case errors.Is(err, redis.ErrClosed):
		return ErrorTypeClosed
	case errors.Is(err, context.Canceled):
		return ErrorTypeCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ErrorTypeTimeout
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		if p, ok := prefix(rerr.Error()); ok {
			return p
		}
		return ErrorTypeOther
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return ErrorTypeTimeout
	}
	return ErrorTypeOther
}

// prefix returns the error code that starts a Redis error message: a word
// of capitals, digits and underscores ("WRONGTYPE Operation against ...").
// A message without one (go-redis's own "redis: ..." errors) has none.
func prefix(msg string) (string, bool) {
	p, _, _ := strings.Cut(msg, " ")
	if p == "" || len(p) > maxPrefix {
		return "", false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", false
		}
	}
	return p, true
}
