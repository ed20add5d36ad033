// Package blackhole is a TCP proxy for tests that can stop carrying bytes
// without closing anything, as a network that drops packets does: the
// client's writes are accepted (into buffers) and its reads wait, so only
// the client's own deadlines end them. Blackhole drops what was sent during
// the outage; Hold delivers it in order once the outage ends, as TCP's
// retransmissions would. It is nobody's public API.
package blackhole

import (
	"net"
	"sync"
)

// Proxy forwards every connection made to Addr to a target address. It is
// safe for concurrent use. Close stops it and waits for its goroutines.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex // guards conns, closed, hole
	conns  map[net.Conn]struct{}
	closed bool
	hole   chan struct{} // closed when the outage ends; nil: none
	drop   bool          // the outage drops bytes (Blackhole) rather than holds them (Hold)
}

// Listen starts a proxy on 127.0.0.1 (a free port) to target.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole stops (true) or resumes (false) forwarding bytes, both ways,
// on every connection, existing and new. While it is on, bytes read from
// either side are dropped; new connections are accepted and connect to
// the target, but nothing passes.
func (p *Proxy) Blackhole(on bool) { p.outage(on, true) }

// Hold is Blackhole that keeps what it reads and delivers it, in order,
// once it is off again (or at Close): a partition that heals, after which
// the streams on either side are still well formed.
func (p *Proxy) Hold(on bool) { p.outage(on, false) }

func (p *Proxy) outage(on, drop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.hole == nil:
		p.hole, p.drop = make(chan struct{}), drop
	case !on && p.hole != nil:
		close(p.hole)
		p.hole = nil
	}
}

// pass reports whether bytes just read are to be forwarded, waiting while
// an outage holds them.
func (p *Proxy) pass() bool {
	p.mu.Lock()
	hole, drop := p.hole, p.drop
	p.mu.Unlock()
	switch {
	case hole == nil:
		return true
	case drop:
		return false
	}
	<-hole
	return true
}

// Close closes the listener and every connection, and waits.
func (p *Proxy) Close() error {
	p.Hold(false) // held pipes go on, to find their connections closed
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track records c to close it on Close; false if the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			t, err := net.Dial("tcp", p.target)
			if err != nil {
				return
			}
			if !p.track(t) {
				_ = t.Close()
				return
			}
			defer p.untrack(t)
			var pipes sync.WaitGroup
			pipes.Add(2)
			go func() { defer pipes.Done(); p.pipe(t, c) }()
			go func() { defer pipes.Done(); p.pipe(c, t) }()
			pipes.Wait()
		}()
	}
}

// pipe copies from src to dst, dropping or holding what it reads during an
// outage. When either side ends, both are closed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.pass() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
