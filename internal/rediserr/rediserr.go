// Package rediserr tells a server's error reply from a failure of the
// connection, for the root package and the internal mechanisms that talk
// to shards (pub/sub links, key moves): a go-redis command fails with a
// redis.Error when the server answered with an error (the connection is
// fine, a retry elsewhere would get the same answer), and with another
// error when the network or a deadline failed. It has no state.
package rediserr

import (
	"errors"

	"github.com/redis/go-redis/v9"
)

// Is reports whether err is, or wraps, a server's error reply
// (redis.Error), redis.Nil included.
func Is(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
