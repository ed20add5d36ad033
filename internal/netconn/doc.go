// Package netconn wraps the network connections that redshard's shard
// clients dial, for three needs of the root package:
//
//   - Set tracks a client's open connections so that they can be severed
//     at once (a shard marked down): their I/O fails with ErrSevered from
//     then on, which go-redis does not retry, and they are closed.
//   - Watch reports the close of a connection (the hot-key layer's tracked
//     reader: once it closes, the server forgets what it tracked).
//   - A tracked connection with a file descriptor keeps go-redis's pool
//     health check (a non-blocking MSG_PEEK read each time the pool hands
//     the connection out) but lets it skip when the server answered on the
//     connection since the last tick of a clock the root advances (its
//     heartbeat). See gate for why that is safe.
//
// What the root provides: the clock (an *atomic.Uint32 it ticks), and
// CheckAll around each command go-redis would not run again on a new
// connection. The package knows nothing of shards or topologies.
//
// Concurrency: Set is safe for concurrent use and its zero value is empty.
// A wrapped connection is used as go-redis uses a net.Conn (one reader,
// one writer at a time); Close may be called from any goroutine, and its
// callback runs once, outside any lock of this package.
package netconn
