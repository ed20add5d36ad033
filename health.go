package redshard

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// HealthOptions configures the per-shard heartbeat. The zero value is
// usable; a nil Options.Health means the defaults below. Values too small
// to mean anything (an Interval or Timeout under 10ms) are errors.
type HealthOptions struct {
	// Disable turns the heartbeat off: shards are never marked down and a
	// dead shard's commands fail however go-redis fails them (dial errors,
	// timeouts).
	Disable bool

	// Interval between heartbeats (a PING on a dedicated connection per
	// shard). At least 10ms. Default 500ms. Pub/Sub probes with it and
	// Timeout (at least 500ms and 1s there): a shard's subscriber
	// connection that has received nothing for Interval sends a PING, and
	// is replaced (the subscriber told) if nothing arrives within Timeout;
	// with Disable, 3s and 3s.
	Interval time.Duration

	// Timeout of one heartbeat: a shard that does not answer within it has
	// failed the heartbeat (a frozen host is detected by this, not by a
	// pool timeout). At least 10ms. Default Interval.
	Timeout time.Duration

	// FailureThreshold is the number of consecutive failed heartbeats that
	// mark a shard down. Default 2.
	FailureThreshold int

	// RecoveryThreshold is the number of consecutive good heartbeats that
	// mark a down shard up again. Default 2.
	RecoveryThreshold int

	// Failover, for cache workloads, sends a down shard's commands to the
	// next distinct shard on the ring that is up (a "gutter" as in
	// Facebook's memcache) instead of failing them. Keys written there get
	// their TTL capped to GutterTTL, and when the shard comes back the
	// client deletes, before routing to it again, every key it wrote
	// elsewhere during the outage, on both shards: the returning shard's
	// old values are never served. Off by default: data that must not be
	// lost or served stale should fail fast instead.
	Failover bool

	// GutterTTL caps the TTL of keys written to a stand-in shard. At least
	// 1ms. Default 30s.
	GutterTTL time.Duration

	// OnShardStateChange, if set, is called (from the monitor's goroutine,
	// one call at a time) when a shard is marked down or up.
	OnShardStateChange func(ShardStateChange)
}

// ShardStateChange reports a shard marked down or up by the health monitor.
type ShardStateChange struct {
	Shard string
	Addr  string
	Down  bool
	Err   error // the last heartbeat error when Down
	At    time.Time
}

const maxOutageKeys = 1 << 20

// outage records the keys written to stand-in shards while a shard is down.
type outage struct {
	mu sync.Mutex
	on map[string]*backend // guarded by mu: key -> the stand-in it was written to
}

// monitor pings every shard on a ticker until Close. The heartbeat state
// it keeps lives in each backend. Its goroutine starts on the client's
// first dial to a shard (heartbeatStart), so a client that is never used
// runs nothing.
type monitor struct {
	c    *client
	opt  HealthOptions
	stop chan struct{}
	done chan struct{}

	started atomic.Bool // run was started, or close came first: start has nothing to do
	mu      sync.Mutex  // serialises start with close
	closed  bool        // guarded by mu
}

// newMonitor returns the client's monitor, not started, or nil when the
// heartbeat is off.
func newMonitor(c *client) *monitor {
	if c.cfg.health.Disable {
		return nil
	}
	return &monitor{c: c, opt: c.cfg.health, stop: make(chan struct{}), done: make(chan struct{})}
}

// start runs the heartbeat unless it runs already or the client is
// closed. After the first call it costs one atomic load.
func (m *monitor) start() {
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

// close stops the monitor and waits for it if it was started. Idempotent
// via Client.Close.
func (m *monitor) close() {
	m.mu.Lock()
	m.closed = true
	running := m.started.Swap(true)
	m.mu.Unlock()
	if running {
		close(m.stop)
		<-m.done
	}
}

// heartbeatStart is a hook of every shard's command client that starts the
// heartbeat when the client first dials a shard, whatever opened the
// connection: a command, a pipeline, Pub/Sub, Watch, ShardFor. Dials are
// rare, and the hook adds nothing to the command path.
type heartbeatStart struct{ m *monitor }

func (h heartbeatStart) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.m.start()
		return next(ctx, network, addr)
	}
}

func (heartbeatStart) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (heartbeatStart) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (m *monitor) run() {
	defer close(m.done)
	t := time.NewTicker(m.opt.Interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.c.beats.Add(1)
			m.tick()
		}
	}
}

// tick pings every backend of the current topology in parallel, on its
// own heartbeat connection (so a heartbeat never waits behind the shard's
// pool), and applies the thresholds.
func (m *monitor) tick() {
	top := m.c.top.Load()
	live := map[*backend]*shard{}
	for _, s := range top.sources() {
		live[s.backend] = s
	}
	type result struct {
		s   *shard
		err error
	}
	results := make(chan result, len(live))
	for b, s := range live {
		go func() {
			hb := b.heartbeatClient()
			if hb == nil {
				results <- result{s, redis.ErrClosed}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), m.opt.Timeout)
			defer cancel()
			results <- result{s, hb.Ping(ctx).Err()}
		}()
	}
	for range live {
		r := <-results
		m.apply(top, r.s, r.err)
	}
}

func (m *monitor) apply(top *topology, s *shard, err error) {
	b := s.backend
	if err != nil {
		b.fails, b.oks, b.lastErr = b.fails+1, 0, err
		if !b.down.Load() && b.fails >= m.opt.FailureThreshold {
			b.markDown(s.Shard, err)
			m.notify(s, true, err)
		}
		return
	}
	b.fails, b.oks = 0, b.oks+1
	if b.down.Load() && b.oks >= m.opt.RecoveryThreshold {
		if err := m.c.markUp(top, b); err != nil {
			b.oks, b.lastErr = 0, err // try again on the next heartbeat
			return
		}
		m.notify(s, false, nil)
	}
}

func (m *monitor) notify(s *shard, down bool, err error) {
	if down {
		m.c.stats.shardDowns.Add(1)
	}
	if f := m.opt.OnShardStateChange; f != nil {
		f(ShardStateChange{Shard: s.Name, Addr: s.Addr, Down: down, Err: err, At: time.Now()})
	}
}

// recordOutage remembers that key is written to stand-in j while its
// owner is down. It reports false, recording nothing, once the owner is up
// again: the write must then go to the owner, since the cleanup that ran
// before it came up did not see this key.
func (b *backend) recordOutage(key string, standIn *backend) bool {
	o := &b.outage
	o.mu.Lock()
	defer o.mu.Unlock()
	if !b.down.Load() {
		return false
	}
	if o.on == nil {
		o.on = map[string]*backend{}
	}
	if len(o.on) < maxOutageKeys {
		o.on[key] = standIn
	}
	return true
}

// markUp marks b up once every key written to a stand-in during its
// outage is cleaned: the cleanup runs until a round finds nothing new, and
// the last check and the mark are made under the outage lock, which every
// record takes, so no stand-in write can slip in between.
func (c *client) markUp(top *topology, b *backend) error {
	if top.gutterTTL <= 0 {
		b.down.Store(false)
		return nil
	}
	o := &b.outage
	for range 8 {
		if err := c.cleanOutage(top, b); err != nil {
			return err
		}
		o.mu.Lock()
		if len(o.on) == 0 {
			b.down.Store(false)
			o.mu.Unlock()
			return nil
		}
		o.mu.Unlock()
	}
	return fmt.Errorf("redshard: writes to stand-ins keep coming while shard %s returns", b.shard)
}

// cleanOutage deletes, on the returning backend and on the stand-ins, every
// key written to a stand-in while b was down.
func (c *client) cleanOutage(top *topology, b *backend) error {
	o := &b.outage
	o.mu.Lock()
	keys := o.on
	o.on = nil
	o.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	byBackend := map[*backend][]string{}
	for k, s := range keys {
		byBackend[b] = append(byBackend[b], k)
		byBackend[s] = append(byBackend[s], k)
	}
	for target, ks := range byBackend {
		cl := target.client
		if target == b { // still marked down: its command client refuses to dial
			if cl = b.heartbeatClient(); cl == nil {
				return redis.ErrClosed
			}
		}
		for len(ks) > 0 {
			n := min(len(ks), 500)
			if err := cl.Del(ctx, ks[:n]...).Err(); err != nil {
				o.mu.Lock() // put them back for the next attempt
				if o.on == nil {
					o.on = map[string]*backend{}
				}
				for k, s := range keys {
					o.on[k] = s
				}
				o.mu.Unlock()
				return err
			}
			ks = ks[n:]
		}
	}
	c.stats.outageKeysCleaned.Add(int64(len(keys)))
	return nil
}
