package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is one redis-server process the runner started, on a free
// 127.0.0.1 port (never 6379 or another port the go-redis suite hard-codes).
type server struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// reservedPorts are ports the go-redis suite (or a developer's own server)
// uses; the runner never starts a server on them.
var reservedPorts = map[int]bool{6379: true, 6380: true, 6381: true, 6390: true, 6391: true, 6392: true}

// startServer starts a redis-server without persistence, its files in dir,
// and waits until it answers PING.
func startServer(bin, dir string) (*server, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		sdir := filepath.Join(dir, "redis-"+strconv.Itoa(port))
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return nil, err
		}
		log, err := os.Create(filepath.Join(sdir, "redis.log"))
		if err != nil {
			return nil, err
		}
		// A config file (empty) so CONFIG REWRITE has one to rewrite.
		conf := filepath.Join(sdir, "redis.conf")
		if err := os.WriteFile(conf, nil, 0o644); err != nil {
			log.Close()
			return nil, err
		}
		cmd := exec.Command(bin, conf,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", sdir,
			"--daemonize", "no", "--protected-mode", "no",
			// The suite has DEBUG specs; a plain client passes them only
			// when the server allows the command.
			"--enable-debug-command", "yes")
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			log.Close()
			return nil, fmt.Errorf("start %s: %w", bin, err)
		}
		s := &server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); log.Close(); close(s.done) }()
		if lastErr = s.waitReady(10 * time.Second); lastErr == nil {
			return s, nil
		}
		s.stop()
	}
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !reservedPorts[port] {
			return port, nil
		}
	}
}

func (s *server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on %s exited", s.Addr)
		default:
		}
		err := ping(s.Addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping sends PING over RESP and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING %s: %q", addr, line)
	}
	return nil
}

// stop ends the server (SIGTERM, then SIGKILL after 5s) and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// serverVersion is redis-server's "major.minor" (REDIS_VERSION for the
// suite, which skips the specs of newer servers).
func serverVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", err
	}
	// Redis server v=7.0.15 sha=...
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			parts := strings.SplitN(v, ".", 3)
			if len(parts) >= 2 {
				return parts[0] + "." + parts[1], nil
			}
		}
	}
	return "", fmt.Errorf("cannot read the version in %q", out)
}
