package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStartKillRestart(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	addr := s.Addr()

	s.Kill()
	if listening(s.Addr()) {
		t.Fatal("a killed server still accepts connections")
	}
	s.Kill() // no-op

	s.Restart(t)
	if s.Addr() != addr {
		t.Fatalf("Restart moved the server from %s to %s", addr, s.Addr())
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after Restart = %d, %v; want 0 (fresh data)", n, err)
	}

	s.Restart(t) // restarting a running server kills it first
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after second Restart: %v", err)
	}
}

func TestFreezeThaw(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	c := redis.NewClient(&redis.Options{
		Addr:        s.Addr(),
		ReadTimeout: 200 * time.Millisecond,
		MaxRetries:  -1,
	})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}

	s.Freeze()
	var netErr interface{ Timeout() bool }
	if err := c.Ping(ctx).Err(); !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("PING to a frozen server: %v; want a timeout", err)
	}

	s.Thaw()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Thaw: %v", err)
	}
}

func TestArgs(t *testing.T) {
	s := Start(t, Args("--maxmemory", "10mb"), Args("--maxmemory-policy", "allkeys-lru"))
	got, err := s.Client(t).ConfigGet(context.Background(), "maxmemory*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got["maxmemory"] != "10485760" || got["maxmemory-policy"] != "allkeys-lru" {
		t.Fatalf("CONFIG GET maxmemory* = %v", got)
	}
}

func TestStopIsIdempotent(t *testing.T) {
	s := Start(t)
	s.Stop()
	s.Stop()
	s.Kill()
	s.Freeze() // no-ops on a stopped server
	s.Thaw()
	if listening(s.Addr()) {
		t.Fatal("a stopped server still accepts connections")
	}
}

// A server left frozen by its test is thawed and stopped by the cleanup,
// and its process is reaped.
func TestCleanupStopsFrozenServer(t *testing.T) {
	var s *Server
	var pid int
	t.Run("leave frozen", func(t *testing.T) {
		s = Start(t)
		pid = s.proc.cmd.Process.Pid
		s.Freeze()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		t.Fatal("cleanup left the server running")
	}
	// The process was waited for: its pid no longer exists (no zombie).
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(%d, 0) = %v; want ESRCH", pid, err)
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	ft := &fakeTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		Start(ft, Args("--no-such-option", "1"))
	}()
	if !ft.failed {
		t.Fatal("Start with a bad option did not fail")
	}
	if !strings.Contains(ft.msg, "no-such-option") {
		t.Fatalf("failure message does not show the server's complaint:\n%s", ft.msg)
	}
	ft.runCleanups()
}

// fakeTB records Fatal instead of failing the real test.
type fakeTB struct {
	testing.TB
	failed   bool
	msg      string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}

func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func listening(addr string) bool {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}
