package fleet_test

import (
	"net"
	"sync"
	"testing"
)

// proxy forwards TCP connections from a loopback port to target. Holed,
// it forwards nothing in either direction and closes nothing: to both ends
// the link is a network that lost every packet, and what was sent arrives
// once the hole ends, as TCP's retransmissions would deliver it.
type proxy struct {
	l      net.Listener
	target string
	holeMu sync.Mutex
	holed  bool
	opened chan struct{} // closed when a hole ends

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) Addr() string { return p.l.Addr().String() }

// hole starts or ends the outage.
func (p *proxy) hole(on bool) {
	p.holeMu.Lock()
	defer p.holeMu.Unlock()
	switch {
	case on && !p.holed:
		p.holed, p.opened = true, make(chan struct{})
	case !on && p.holed:
		p.holed = false
		close(p.opened)
	}
}

// pass waits while the proxy is holed.
func (p *proxy) pass() {
	p.holeMu.Lock()
	holed, opened := p.holed, p.opened
	p.holeMu.Unlock()
	if holed {
		<-opened
	}
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies src to dst, holding what it read while the proxy is holed.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.pass()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a closed connection: the other side closes too
			return
		}
	}
}

func (p *proxy) close() {
	p.hole(false)
	_ = p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
