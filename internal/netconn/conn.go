package netconn

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrSevered is what the reads and writes of a connection severed by
// Set.SeverAll return.
var ErrSevered = errors.New("redshard: connection severed: the shard was marked down")

// Watch returns c wrapped so that onClose runs once, when it is closed.
// A connection with a file descriptor keeps go-redis's health check of
// pooled connections (and its peek for RESP3 push messages before each
// command of a held connection), through a gate on clock (nil: every
// check runs, as in go-redis).
func Watch(c net.Conn, onClose func(), clock *atomic.Uint32) net.Conn {
	nc := &notifyConn{Conn: c, onClose: onClose}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			return newSysConn(nc, raw, clock, nil)
		}
	}
	return nc
}

// notifyConn calls onClose once, when it is closed. Once severed, its
// reads and writes fail with ErrSevered.
type notifyConn struct {
	net.Conn
	once    sync.Once
	onClose func() // nil: nothing to call
	severed atomic.Bool
}

func (c *notifyConn) Close() error {
	if c.onClose != nil {
		c.once.Do(c.onClose)
	}
	return c.Conn.Close()
}

func (c *notifyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.severed.Load() {
		err = ErrSevered
	}
	return n, err
}

func (c *notifyConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && c.severed.Load() {
		err = ErrSevered
	}
	return n, err
}

// NetConn returns the wrapped connection (as crypto/tls.Conn does).
func (c *notifyConn) NetConn() net.Conn { return c.Conn }

// sysConn is a notifyConn over a connection with a file descriptor.
// go-redis's pool checks such a connection each time it hands it out
// (connCheck: a non-blocking MSG_PEEK read, one system call per command,
// about a quarter of a GET's), through SyscallConn; the gate decides
// whether that check runs.
type sysConn struct {
	*notifyConn
	gate gate
}

func newSysConn(nc *notifyConn, raw syscall.RawConn, clock *atomic.Uint32, exact *atomic.Int32) *sysConn {
	c := &sysConn{notifyConn: nc, gate: gate{raw: raw, clock: clock, exact: exact}}
	if clock != nil {
		c.gate.seen.Store(clock.Load() - 1) // nothing read yet
	}
	return c
}

// Read records, for the gate, that the server answered on the
// connection, or that it failed: then every gate on the clock lets its
// next check run (a restarted server closed all of its connections, and
// go-redis's retry must not take another of them unchecked).
func (c *sysConn) Read(p []byte) (int, error) {
	n, err := c.notifyConn.Read(p)
	if c.gate.clock != nil {
		if n > 0 {
			if now := c.gate.clock.Load(); c.gate.seen.Load() != now {
				c.gate.seen.Store(now)
			}
		} else if err != nil && !isTimeout(err) { // a deadline is not a closed server
			c.gate.clock.Add(1)
		}
	}
	return n, err
}

// Write: as Read, a failure makes every gate on the clock check again.
func (c *sysConn) Write(p []byte) (int, error) {
	n, err := c.notifyConn.Write(p)
	if err != nil && c.gate.clock != nil && !isTimeout(err) {
		c.gate.clock.Add(1)
	}
	return n, err
}

// SyscallConn returns the gate, which stands for the connection's own
// RawConn (obtained once, at dial: net.TCPConn allocates one per call).
func (c *sysConn) SyscallConn() (syscall.RawConn, error) { return &c.gate, nil }

// gate passes go-redis's pool check of a connection through unless the
// server answered on the connection since the last tick of clock (the
// root's heartbeat ticker): a connection that just carried a reply is not
// checked again. What the check would catch there is a server that closed
// the connection within that interval (CLIENT KILL, a restart). Then the
// command's read finds the close (EOF) and go-redis runs the command again
// on a new connection (checked: the failure advanced the clock): the
// server closed before it read the command, so it ran once. Commands
// go-redis would not run again get checked connections (exact), and with
// no clock every check runs.
type gate struct {
	raw   syscall.RawConn
	clock *atomic.Uint32 // nil: never skip
	exact *atomic.Int32  // while positive, never skip; nil: no such commands (Watch)
	seen  atomic.Uint32  // clock's value when a read last returned data
}

func (g *gate) Control(f func(fd uintptr)) error { return g.raw.Control(f) }

func (g *gate) Write(f func(fd uintptr) bool) error { return g.raw.Write(f) }

// Read is the check's non-blocking peek: it runs f unless the connection
// answered within the current tick.
func (g *gate) Read(f func(fd uintptr) bool) error {
	if g.clock != nil && g.seen.Load() == g.clock.Load() && (g.exact == nil || g.exact.Load() == 0) {
		return nil
	}
	return g.raw.Read(f)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
