package etcdregistry_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/redshard/redshard/internal/syncbuf"
)

// The tests' etcd is a real etcd server (go.etcd.io/etcd/server/v3/embed)
// in a child process: the test binary run again with serveEnv set. A child
// keeps the server's goroutines out of the leak check and lets a test kill
// the server like any other process. It listens on 127.0.0.1 only, on
// ports picked free, with its data in the test's temp directory.
const (
	serveEnv     = "ETCDREGISTRY_TEST_SERVE" // "dir client-addr peer-addr"
	readyLine    = "etcd ready"
	startTimeout = 60 * time.Second // -race makes a cold start slow
	portRetries  = 5
)

// serve runs the etcd server of serveEnv until SIGTERM, or until its
// parent goes (stdin closes). It does not return.
func serve(spec string) {
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", serveEnv, spec)
		os.Exit(2)
	}
	cfg := embed.NewConfig()
	cfg.Name = "registrytest"
	cfg.Dir = f[0]
	cu, pu := url.URL{Scheme: "http", Host: f[1]}, url.URL{Scheme: "http", Host: f[2]}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start etcd: %v\n", err)
		os.Exit(3)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(startTimeout):
		fmt.Fprintln(os.Stderr, "etcd did not become ready")
		os.Exit(4)
	}
	fmt.Println(readyLine)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	gone := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(gone) }()
	select {
	case <-term:
	case <-gone:
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
	}
	e.Close()
	os.Exit(0)
}

// etcdServer is one etcd server of a test, at fixed addresses and data
// directory for its life (Restart reuses them). Its methods are not safe
// for concurrent use.
type etcdServer struct {
	dir, client, peer string
	proc              *etcdProcess // nil while killed
}

type etcdProcess struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	exited chan struct{}
}

// startEtcd starts an etcd server for t, stopped when t ends.
func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	s := &etcdServer{dir: t.TempDir()}
	t.Cleanup(s.stop)
	for attempt := 1; ; attempt++ {
		s.client, s.peer = freeAddr(t), freeAddr(t)
		err := s.launch()
		if err == nil {
			return s
		}
		if attempt == portRetries || !errors.Is(err, errBind) {
			t.Fatalf("etcd: %v", err)
		}
	}
}

// Endpoint returns the server's client URL.
func (s *etcdServer) Endpoint() string { return "http://" + s.client }

// Kill sends SIGKILL and waits for the server to exit.
func (s *etcdServer) Kill() {
	if p := s.proc; p != nil {
		_ = p.cmd.Process.Kill()
		<-p.exited
		_ = p.stdin.Close()
		s.proc = nil
	}
}

// Restart starts a killed server again, on its addresses and its data.
func (s *etcdServer) Restart(t *testing.T) {
	t.Helper()
	s.Kill()
	var err error
	for range 50 { // the ports may take a moment to be free again
		if err = s.launch(); !errors.Is(err, errBind) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("etcd restart: %v", err)
	}
}

func (s *etcdServer) stop() {
	p := s.proc
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	_ = p.stdin.Close()
	s.proc = nil
}

var errBind = errors.New("address in use")

func (s *etcdServer) launch() error {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"="+s.dir+" "+s.client+" "+s.peer)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	ready := make(chan struct{})
	var stderr syncbuf.Buffer
	cmd.Stdout = &lineWatcher{line: readyLine, seen: ready}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &etcdProcess{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	s.proc = p
	select {
	case <-ready:
		return nil
	case <-p.exited:
		s.proc = nil
		_ = stdin.Close()
		if strings.Contains(stderr.String(), "address already in use") {
			return errBind
		}
		return fmt.Errorf("etcd exited before it was ready: %s", stderr.String())
	case <-time.After(startTimeout):
		s.Kill()
		return fmt.Errorf("etcd not ready within %v: %s", startTimeout, stderr.String())
	}
}

// lineWatcher closes seen when line has been written to it, alone on a
// line.
type lineWatcher struct {
	line string
	seen chan struct{}
	buf  []byte
	once sync.Once
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if string(w.buf[:i]) == w.line {
			w.once.Do(func() { close(w.seen) })
		}
		w.buf = w.buf[i+1:]
	}
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
