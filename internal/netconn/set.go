package netconn

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// Set is a set of open connections that can be severed at once. It is
// safe for concurrent use; its zero value is empty.
type Set struct {
	mu    sync.Mutex
	conns map[*notifyConn]struct{} // guarded by mu

	// exact counts the commands running that go-redis would not run
	// again on a new connection (transactions, NoRetry commands, Watch):
	// while any does, the set's gates let every check run, so such a
	// command never gets a connection the server closed unseen.
	exact atomic.Int32
}

// CheckAll makes the health checks of the set's connections run until the
// returned func is called. Call it around a command that go-redis would
// not run again on a new connection.
func (s *Set) CheckAll() func() {
	s.exact.Add(1)
	return func() { s.exact.Add(-1) }
}

// Track returns c wrapped so that it leaves the set when closed. A
// connection with a file descriptor keeps go-redis's health check of
// pooled connections, through a gate on clock (nil: every check runs, as
// in go-redis).
func (s *Set) Track(c net.Conn, clock *atomic.Uint32) net.Conn {
	nc := &notifyConn{Conn: c}
	nc.onClose = func() {
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[*notifyConn]struct{}{}
	}
	s.conns[nc] = struct{}{}
	s.mu.Unlock()
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			return newSysConn(nc, raw, clock, &s.exact)
		}
	}
	return nc
}

// SeverAll severs every connection of the set: their I/O fails with
// ErrSevered from now on, and they are closed (outside the set's lock:
// Close calls back into the set).
func (s *Set) SeverAll() {
	s.mu.Lock()
	all := make([]*notifyConn, 0, len(s.conns))
	for c := range s.conns {
		all = append(all, c)
	}
	s.mu.Unlock()
	for _, c := range all {
		c.severed.Store(true)
		_ = c.Close()
	}
}
