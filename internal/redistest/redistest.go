// Package redistest runs real redis-server processes for tests.
//
// Start launches a throw-away server on a free 127.0.0.1 port, without
// persistence and with its files in a test temp directory, and stops it when
// the test ends. The Server can then be killed, restarted on the same
// address, or frozen (SIGSTOP) to act like a hung server, so tests can
// exercise failure handling against the real thing rather than a fake.
//
// It never uses an existing server (in particular not one on 6379).
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timing of starts and stops. They bound how long a broken server can hold
// a test up; they are not what a test checks.
const (
	readyTimeout  = 10 * time.Second       // from exec to answering PING
	stopTimeout   = 10 * time.Second       // from SIGTERM to exit, then SIGKILL
	pollInterval  = 10 * time.Millisecond  // readiness probes
	rebindRetries = 50                     // Restart: binds tried on the same port
	rebindPause   = 100 * time.Millisecond // between those tries
	portRetries   = 5                      // Start: fresh ports tried
	logTailLines  = 30                     // lines of log shown when a start fails
)

// Option configures Start.
type Option func(*config)

type config struct {
	args     []string
	sentinel string // "name host port": run as a Sentinel monitoring that primary
}

// Sentinel makes the server a Redis Sentinel that monitors the primary at
// primaryAddr under masterName (quorum 1, down after 1s). Its config file
// is written in the run's directory, where Sentinel may rewrite it.
func Sentinel(masterName, primaryAddr string) Option {
	return func(c *config) {
		host, port, _ := net.SplitHostPort(primaryAddr)
		c.sentinel = masterName + " " + host + " " + port
	}
}

// Args passes extra command-line arguments to redis-server, after the
// harness's own, e.g. Args("--maxmemory", "10mb", "--maxmemory-policy",
// "allkeys-lru"). An argument that changes the port, bind address or
// directory breaks the harness.
func Args(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// Server is one redis-server started by Start, at a fixed address for its
// whole life (Restart reuses the port). Its methods are safe for concurrent
// use, except that two Restarts must not overlap (the second could not bind
// the port). Stop, Kill, Freeze and Thaw do nothing on a server that is not
// running.
type Server struct {
	bin      string
	base     string // temp directory; each run gets a fresh subdirectory
	args     []string
	sentinel string // see Sentinel; "" for a plain server
	port     int

	mu      sync.Mutex // guards proc and lastDir
	proc    *process   // the running server; nil when stopped or killed
	lastDir string     // the directory of the last run
}

// process is one run of redis-server.
type process struct {
	cmd    *exec.Cmd
	dir    string
	done   chan struct{} // closed once the process has exited and been waited for
	frozen bool
}

// Start launches a redis-server on a free 127.0.0.1 port with no persistence
// (--save "" --appendonly no, files in a t.TempDir()), waits until it
// answers PING, and stops it in t.Cleanup. If redis-server is not installed
// it calls t.Skip, unless the environment has CI=true, where it calls
// t.Fatal. If the server does not start, t.Fatal shows the tail of its log.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redistest: redis-server is not installed (not in PATH); install it (e.g. apt-get install redis-server) to run this test"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := &Server{bin: bin, base: t.TempDir(), args: c.args, sentinel: c.sentinel}
	t.Cleanup(s.Stop)

	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s.port = port
		err = s.launch()
		if err == nil {
			return s
		}
		var be *bindError
		if !errors.As(err, &be) || attempt == portRetries {
			t.Fatalf("redistest: %v", err)
		}
		// Someone took the port between our probe and the server's bind.
	}
}

// Addr returns the server's address, "127.0.0.1:port". It does not change
// across Restart.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Kill sends SIGKILL and waits for the process to exit: a crash, with
// clients' connections reset. It does nothing if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	p := s.proc
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // a stopped process dies of SIGKILL too
	<-p.done
	s.proc = nil
}

// Stop shuts the server down gracefully (SIGTERM; SIGKILL if it has not
// exited after a while) and waits for it. A frozen server is thawed first.
// Stop is idempotent, and runs in the cleanup of the test that started it.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return
	}
	if p.frozen {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.frozen = false
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
		s.proc = nil
	case <-timer.C:
		s.killLocked()
	}
}

// Restart starts the server again on the same port, with fresh empty data,
// after killing it if it is running. It retries for a few seconds while the
// port cannot be bound yet, then calls t.Fatal.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	s.relaunch(t, "restart", s.launch)
}

// relaunch runs launch, retrying for a few seconds while the port cannot
// be bound yet, then calls t.Fatal.
func (s *Server) relaunch(t testing.TB, what string, launch func() error) {
	t.Helper()
	var err error
	for range rebindRetries {
		if err = launch(); err == nil {
			return
		}
		var be *bindError
		if !errors.As(err, &be) {
			break
		}
		time.Sleep(rebindPause)
	}
	t.Fatalf("redistest: %s on %s: %v", what, s.Addr(), err)
}

// Freeze stops the process with SIGSTOP: it keeps its connections open but
// answers nothing, like a hung server, until Thaw.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP, true) }

// Thaw resumes a frozen server with SIGCONT.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, frozen bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.cmd.Process.Signal(sig)
	s.proc.frozen = frozen
}

// Client returns a go-redis client for the server with go-redis's default
// options (so it retries and redials: commands to a killed server take a
// while to fail), closed in t.Cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// bindError means redis-server could not listen on its port.
type bindError struct{ err error }

func (e *bindError) Error() string { return e.err.Error() }

// launch starts redis-server on s.port and waits until it answers PING.
func (s *Server) launch() error {
	dir, err := os.MkdirTemp(s.base, "run-")
	if err != nil {
		return err
	}
	return s.launchIn(dir)
}

// Recover starts the server again on the same port after killing it if
// it is running, in the directory of its last run: with persistence on
// (Args("--appendonly", "yes", "--appendfsync", "always")), it comes back
// with every write it acknowledged, as a crashed server restarted on its
// disk does.
func (s *Server) Recover(t testing.TB) {
	t.Helper()
	s.Kill()
	s.mu.Lock()
	dir := s.lastDir
	s.mu.Unlock()
	s.relaunch(t, "recover", func() error { return s.launchIn(dir) })
}

func (s *Server) launchIn(dir string) error {
	s.mu.Lock()
	s.lastDir = dir
	s.mu.Unlock()
	out, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
	}, s.args...)
	if s.sentinel != "" {
		name := strings.Fields(s.sentinel)[0]
		conf := filepath.Join(dir, "sentinel.conf")
		text := "sentinel monitor " + s.sentinel + " 1\n" +
			"sentinel down-after-milliseconds " + name + " 1000\n"
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			_ = out.Close()
			return err
		}
		args = append([]string{conf, "--sentinel"}, args...)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = out, out // startup errors go to stderr before the log file opens
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // reaps the process: no zombies
		_ = out.Close()
		close(p.done)
	}()

	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for {
		if ping(s.Addr(), cmd.Process.Pid) {
			s.mu.Lock()
			s.proc = p
			s.mu.Unlock()
			return nil
		}
		select {
		case <-p.done:
			err := fmt.Errorf("redis-server on port %d exited: %v\n%s", s.port, cmd.ProcessState, p.logTail())
			if p.bindFailed() {
				return &bindError{err}
			}
			return err
		case <-deadline.C:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			return fmt.Errorf("redis-server on port %d did not answer PING within %v\n%s", s.port, readyTimeout, p.logTail())
		case <-ticker.C:
		}
	}
}

// ping reports whether the server at addr answers PING with PONG and is the
// process pid (another process could hold the port the server failed to bind).
func ping(addr string, pid int) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\nINFO server\r\n")); err != nil {
		return false
	}
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		return false
	}
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 {
		return false
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return false
	}
	return bytes.Contains(info, []byte("\r\nprocess_id:"+strconv.Itoa(pid)+"\r\n"))
}

// logs returns what the process wrote to its log file and its stdout/stderr.
func (p *process) logs() []byte {
	var b bytes.Buffer
	for _, name := range []string{"redis.log", "stdout.log"} {
		if data, err := os.ReadFile(filepath.Join(p.dir, name)); err == nil {
			b.Write(data)
		}
	}
	return b.Bytes()
}

func (p *process) bindFailed() bool {
	l := p.logs()
	return bytes.Contains(l, []byte("Address already in use")) ||
		bytes.Contains(l, []byte("Could not create server TCP listening socket"))
}

func (p *process) logTail() string {
	lines := strings.Split(strings.TrimRight(string(p.logs()), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return "--- tail of redis-server log (" + p.dir + ") ---\n" + strings.Join(lines, "\n")
}

// freePort returns a port that was free on 127.0.0.1 a moment ago. It is
// never 6379, the port of a server a developer may be running.
func freePort() (int, error) {
	for range 10 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port != 6379 {
			return port, nil
		}
	}
	return 0, errors.New("find a free port: only 6379 was offered")
}
