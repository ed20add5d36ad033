package netconn

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
)

// countingRaw is a syscall.RawConn that counts the health checks run
// through it.
type countingRaw struct{ reads int }

func (r *countingRaw) Control(func(uintptr)) error    { return nil }
func (r *countingRaw) Write(func(uintptr) bool) error { return nil }
func (r *countingRaw) Read(f func(uintptr) bool) error {
	r.reads++
	f(0)
	return nil
}

// scriptedConn is a net.Conn whose reads return what the test sets.
type scriptedConn struct {
	net.Conn
	n   int
	err error
}

func (c *scriptedConn) Read([]byte) (int, error)  { return c.n, c.err }
func (c *scriptedConn) Write([]byte) (int, error) { return 0, c.err }

// TestPeekGate: go-redis's pool check of a connection runs unless the
// server answered on it since the clock's last tick and no command that
// go-redis would not retry is running; a failed read or write makes every
// gate on the clock check again.
func TestPeekGate(t *testing.T) {
	var clock atomic.Uint32
	var set Set
	raw := &countingRaw{}
	conn := &scriptedConn{}
	c := newSysConn(&notifyConn{Conn: conn}, raw, &clock, &set.exact)
	check := func(want int, why string) {
		t.Helper()
		before := raw.reads
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Read(func(uintptr) bool { return true }); err != nil {
			t.Fatal(err)
		}
		if got := raw.reads - before; got != want {
			t.Fatalf("%s: %d checks ran, want %d", why, got, want)
		}
	}
	read := func(n int, err error) {
		t.Helper()
		conn.n, conn.err = n, err
		_, _ = c.Read(make([]byte, 8))
	}

	check(1, "a connection that never answered")
	read(5, nil)
	check(0, "right after a reply")
	check(0, "a second time in the same tick")
	clock.Add(1)
	check(1, "after a tick")
	read(3, nil)
	check(0, "after a reply in the new tick")

	done := set.CheckAll()
	check(1, "while a transaction runs")
	done()
	check(0, "once it ended")

	read(0, os.ErrDeadlineExceeded)
	check(0, "after a read that timed out")
	read(0, errors.New("EOF"))
	check(1, "after a failed read")
	read(3, nil)
	conn.err = syscall.ECONNRESET
	_, _ = c.Write([]byte("x"))
	check(1, "after a failed write")

	// No clock (no heartbeats, or no retries): every check runs.
	raw2 := &countingRaw{}
	c2 := newSysConn(&notifyConn{Conn: &scriptedConn{n: 1}}, raw2, nil, nil)
	_, _ = c2.Read(make([]byte, 8))
	rc, _ := c2.SyscallConn()
	_ = rc.Read(func(uintptr) bool { return true })
	if raw2.reads != 1 {
		t.Fatalf("without a clock: %d checks ran, want 1", raw2.reads)
	}
}
