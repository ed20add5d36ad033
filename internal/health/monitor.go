package health

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options are a Monitor's resolved settings.
type Options struct {
	Interval          time.Duration // between ticks; > 0
	Timeout           time.Duration // of one heartbeat
	FailureThreshold  int           // failed heartbeats in a row that mark a server down
	RecoveryThreshold int           // good heartbeats in a row that mark a down server up
}

// Target is one server as the monitor sees it at one tick.
type Target interface {
	// Beat returns the server's heartbeat counters: one Beat per server,
	// the same for every Target of it, kept across ticks.
	Beat() *Beat
	// Ping sends one heartbeat on the server's own heartbeat
	// connection (so that it never waits behind the server's pool).
	Ping(ctx context.Context) error
	// Down reports whether the server is marked down.
	Down() bool
	// MarkDown marks the server down; err is the last heartbeat's error.
	MarkDown(err error)
	// MarkUp marks the server up. If it fails, the server stays down and
	// RecoveryThreshold good heartbeats are counted again before the next
	// try.
	MarkUp() error
}

// Beat is a server's heartbeat counters, touched only by the monitor's
// goroutine. Its zero value is ready.
type Beat struct {
	fails, oks int // consecutive failed and good heartbeats
}

// Monitor pings the servers of Targets on a ticker until Close. It is
// safe for concurrent use; a nil *Monitor is a heartbeat that is off.
type Monitor struct {
	opt     Options
	targets func() []Target
	ticks   atomic.Uint32 // ticks so far
	stop    chan struct{}
	done    chan struct{}

	started atomic.Bool // run was started, or Close came first: Start has nothing to do
	mu      sync.Mutex  // serialises Start with Close
	closed  bool        // guarded by mu
}

// New returns a monitor, not started, of the servers targets returns at
// each tick (called from the monitor's goroutine).
func New(opt Options, targets func() []Target) *Monitor {
	return &Monitor{opt: opt, targets: targets, stop: make(chan struct{}), done: make(chan struct{})}
}

// Ticks is the number of ticks so far, counted before each tick's
// heartbeats are sent: a coarse clock of the monitor's Interval.
func (m *Monitor) Ticks() *atomic.Uint32 { return &m.ticks }

// Start runs the heartbeat unless it runs already or m is closed. After
// the first call it costs one atomic load.
func (m *Monitor) Start() {
	if m == nil || m.started.Load() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.started.Load() {
		return
	}
	m.started.Store(true)
	go m.run()
}

// Close stops the monitor and waits for it if it was started. Once
// closed, Start does nothing. It is idempotent.
func (m *Monitor) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	again := m.closed
	m.closed = true
	running := m.started.Swap(true)
	m.mu.Unlock()
	if running && !again {
		close(m.stop)
		<-m.done
	}
}

// Hook returns a go-redis hook that starts m when its client first dials,
// whatever opened the connection (a command, a pipeline, Pub/Sub...).
// Dials are rare, and it adds nothing to the command path.
func (m *Monitor) Hook() redis.Hook { return startHook{m} }

type startHook struct{ m *Monitor }

func (h startHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.m.Start()
		return next(ctx, network, addr)
	}
}

func (startHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (startHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (m *Monitor) run() {
	defer close(m.done)
	t := time.NewTicker(m.opt.Interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.ticks.Add(1)
			m.tick()
		}
	}
}

// tick pings every server in parallel and applies the thresholds. A
// server that several Targets share (the same Beat) is pinged once, as
// the last of them.
func (m *Monitor) tick() {
	live := map[*Beat]Target{}
	for _, t := range m.targets() {
		live[t.Beat()] = t
	}
	type result struct {
		t   Target
		err error
	}
	results := make(chan result, len(live))
	for _, t := range live {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), m.opt.Timeout)
			defer cancel()
			results <- result{t, t.Ping(ctx)}
		}()
	}
	for range live {
		r := <-results
		m.apply(r.t, r.err)
	}
}

func (m *Monitor) apply(t Target, err error) {
	b := t.Beat()
	if err != nil {
		b.fails, b.oks = b.fails+1, 0
		if !t.Down() && b.fails >= m.opt.FailureThreshold {
			t.MarkDown(err)
		}
		return
	}
	b.fails, b.oks = 0, b.oks+1
	if t.Down() && b.oks >= m.opt.RecoveryThreshold {
		if err := t.MarkUp(); err != nil {
			b.oks = 0 // try again after RecoveryThreshold more
		}
	}
}
