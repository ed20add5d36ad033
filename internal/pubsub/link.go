package pubsub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/rediserr"
)

// linkKey names a mux's link: one per shard server and kind of connection
// (shard channels apart, so that a message says which kind it is).
type linkKey struct {
	s       Shard
	sharded bool
}

// link is one go-redis PubSub of a mux on a shard's command client
// (Shard.Client), with the shard's protocol, auth, TLS, dialer and
// Sentinel. Its writer sends
// the subscription changes the mux queues, each batch followed by a PING
// whose payload is a sync token: the server answers in order, so the
// token's PONG confirms everything sent before it (and, after a reconnect,
// go-redis's resubscription of the whole set). Its reader hands messages
// and PONGs to the mux. go-redis reconnects the PubSub; the link backs off
// between failures and says once per outage, on the front, that the shard
// failed.
//
// A shard that stops answering (a frozen process, a half-open connection,
// a partition) sends no error: the link probes it. The reader notes when
// it last received anything (heard); the writer's one timer sends a PING
// once the link has heard nothing for the probe interval; and every read
// has a deadline of the probe interval plus the probe timeout after heard,
// so a PING unanswered within the timeout fails the read, which go-redis
// takes as a broken connection (it closes it): the link fails as on any
// read error, and reconnects, resubscribes and tells the front.
type link struct {
	m      *mux
	key    linkKey
	ps     *redis.PubSub // used by the two goroutines; closed by the writer
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // 1-buffered: ops queued or a resync asked
	heard  atomic.Int64  // UnixNano when the reader last received something (roughly: see read)

	// Guarded by m.mu.
	want    [numSubKinds]map[string]bool // what it is subscribed to, or being
	ops     []linkOp                     // changes not sent yet
	sent    uint64                       // the last sync token issued
	acked   uint64                       // the last sync token the shard answered
	resync  bool                         // send a token covering everything (after a failure)
	barrier bool                         // send a token, with or without changes (mux.drain)
	failing bool                         // the front was told of a failure since the last PONG
	rename  bool                         // give the connection the mux's name first
}

type linkOp struct {
	sub  bool // subscribe, else unsubscribe
	kind int
	name string
}

const (
	syncPrefix   = "redshard:sync:"
	probePayload = "redshard:probe"
	minBackoff   = 10 * time.Millisecond
	maxBackoff   = time.Second
)

// linkCtx marks the context of a link's go-redis calls (see IsLink).
type linkCtx struct{}

// IsLink reports whether ctx is the context of a link's go-redis call,
// which is the context its connections are dialed with. The root's dial
// hook uses it to leave a link's connections out of those it severs when
// a heartbeat marks the shard down: a link finds a dead or frozen server
// by itself (its reads fail, or its probe does); cut by a heartbeat's
// verdict it would lose what is published while it resubscribes, and a
// verdict can come late (go-redis keeps failing a heartbeat client's
// dials for up to a second after a dial error, so a shard can be marked
// down after its link has resubscribed on the restarted server) or be
// wrong (a loaded machine missing a short heartbeat timeout twice).
func IsLink(ctx context.Context) bool { return ctx.Value(linkCtx{}) != nil }

// readCtx is the context of a link's reads: the link's, with a deadline
// that go-redis makes the socket's read deadline. A read that misses it
// fails as a broken connection (go-redis's Receive allows no timeout),
// so the connection is closed and a reply cut by the deadline is never
// parsed. It has no timer: only the socket waits for the deadline, and the
// link's context still ends it.
type readCtx struct {
	context.Context
	deadline time.Time
}

func (c *readCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// link returns the mux's link for key, starting it if needed. Caller holds m.mu.
func (m *mux) link(key linkKey) *link {
	if l := m.links[key]; l != nil {
		return l
	}
	l := &link{m: m, key: key, wake: make(chan struct{}, 1), rename: m.name != ""}
	l.ctx, l.cancel = context.WithCancel(context.WithValue(m.ctx, linkCtx{}, true))
	l.heard.Store(time.Now().UnixNano())
	for k := range l.want {
		l.want[k] = map[string]bool{}
	}
	l.ps = key.s.Client().Subscribe(l.ctx) // no channel: nothing is sent yet
	m.links[key] = l
	host := m.hub.host
	if !host.Go(l.write) {
		l.cancel()
		_ = l.ps.Close()
		return l
	}
	if !host.Go(l.read) {
		l.cancel() // write returns and closes ps
	}
	return l
}

func (l *link) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *link) empty() bool {
	for _, w := range l.want {
		if len(w) > 0 {
			return false
		}
	}
	return true
}

func (l *link) shardName() string { return l.key.s.Name() }

// write sends the queued changes and sync tokens until the link is
// closed, and a PING when the link has heard nothing for the probe
// interval.
func (l *link) write() {
	defer func() { _ = l.ps.Close() }() // also ends read's Receive
	interval, _ := l.m.hub.host.ProbeTimes()
	probe := time.NewTimer(interval)
	defer probe.Stop()
	var backoff time.Duration
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-probe.C:
			l.probe(probe, interval)
			continue
		case <-l.wake:
		}
		for {
			ops, tok, name, ok := l.take()
			if !ok {
				break
			}
			err := l.apply(ops, tok, name)
			if l.ctx.Err() != nil {
				return
			}
			if err == nil {
				backoff = 0
				continue
			}
			l.failed(err, ops)
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			if !sleep(l.ctx, backoff) {
				return
			}
		}
	}
}

// probe sends a PING if the link has heard nothing for interval, and sets
// the timer for the next check: interval after what it heard last, or
// after this PING. A PING that fails to go out is not reported here: it
// broke the connection, which the reader's Receive reports.
func (l *link) probe(t *time.Timer, interval time.Duration) {
	if quiet := time.Since(time.Unix(0, l.heard.Load())); quiet < interval {
		t.Reset(interval - quiet)
		return
	}
	_ = l.ps.Ping(l.ctx, probePayload)
	t.Reset(interval)
}

// take returns the queued changes, the sync token that will follow them,
// and the name to give the connection first (nil: none), recording which
// waiting subscriptions the token covers.
func (l *link) take() ([]linkOp, uint64, *string, bool) {
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(l.ops) == 0 && !l.resync && !l.rename && !l.barrier {
		return nil, 0, nil, false
	}
	var name *string
	// After a failure go-redis reconnected and resubscribed: a RESP3
	// connection takes a name in subscribed mode, a RESP2 one refuses it.
	if l.rename || l.resync && m.name != "" && l.key.s.Client().Options().Protocol != 2 {
		name = new(string)
		*name = m.name
	}
	l.rename, l.barrier = false, false
	ops := l.ops
	l.ops = nil
	l.sent++
	tok := l.sent
	for _, op := range ops {
		if st := m.subs[op.kind][op.name]; op.sub && st != nil {
			if _, ok := st.waiting[l]; ok {
				st.waiting[l] = tok
			}
		}
	}
	if l.resync {
		l.resync = false
		for kind := range l.want {
			for name := range l.want[kind] {
				if st := m.subs[kind][name]; st != nil {
					if t, ok := st.waiting[l]; ok && t != 0 {
						st.waiting[l] = tok
					}
				}
			}
		}
	}
	return ops, tok, name, true
}

// apply names the connection (name not nil), sends ops, consecutive ones
// of a kind together, then token tok.
func (l *link) apply(ops []linkOp, tok uint64, name *string) error {
	if name != nil {
		if err := l.ps.ClientSetName(l.ctx, *name); err != nil {
			return err
		}
	}
	for i := 0; i < len(ops); {
		j := i + 1
		for j < len(ops) && ops[j].sub == ops[i].sub && ops[j].kind == ops[i].kind {
			j++
		}
		names := make([]string, 0, j-i)
		for _, op := range ops[i:j] {
			names = append(names, op.name)
		}
		var err error
		switch op := ops[i]; {
		case op.kind == subChannel && op.sub:
			err = l.ps.Subscribe(l.ctx, names...)
		case op.kind == subChannel:
			err = l.ps.Unsubscribe(l.ctx, names...)
		case op.kind == subPattern && op.sub:
			err = l.ps.PSubscribe(l.ctx, names...)
		case op.kind == subPattern:
			err = l.ps.PUnsubscribe(l.ctx, names...)
		case op.sub:
			err = l.ps.SSubscribe(l.ctx, names...)
		default:
			err = l.ps.SUnsubscribe(l.ctx, names...)
		}
		if err != nil {
			return err
		}
		i = j
	}
	return l.ps.Ping(l.ctx, syncPrefix+strconv.FormatUint(tok, 10))
}

// read hands what the shard sends to the mux until the link is closed.
// Each read may wait until interval + timeout after what the link heard
// last (the writer's PING goes out after interval); heard, and the
// deadline with it, moves on at most every slack, so that a busy link
// allocates no context per message.
func (l *link) read() {
	interval, timeout := l.m.hub.host.ProbeTimes()
	slack := min(interval, timeout) / 8
	var rctx *readCtx
	hear := func(now time.Time) {
		l.heard.Store(now.UnixNano())
		rctx = &readCtx{Context: l.ctx, deadline: now.Add(interval + timeout)}
	}
	hear(time.Now())
	var backoff time.Duration
	for {
		msg, err := l.ps.Receive(rctx)
		if l.ctx.Err() != nil {
			return
		}
		if now := time.Now(); err == nil || rediserr.Is(err) {
			if now.Sub(time.Unix(0, l.heard.Load())) >= slack {
				hear(now)
			}
		} else if isTimeout(err) && !now.Before(rctx.deadline) {
			err = fmt.Errorf("nothing received for %v, a PING included: %w", interval+timeout, err)
		}
		if err != nil {
			if rediserr.Is(err) { // a command failed; the connection is fine
				l.m.shardError(l, err)
				continue
			}
			l.failed(err, nil)
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			if !sleep(l.ctx, backoff) {
				return
			}
			hear(time.Now()) // the next connection has the whole probe to answer
			continue
		}
		backoff = 0
		switch msg := msg.(type) {
		case *redis.Message:
			l.m.deliver(l, msg)
		case *redis.Pong:
			if tok, ok := strings.CutPrefix(msg.Payload, syncPrefix); ok {
				if n, err := strconv.ParseUint(tok, 10, 64); err == nil {
					l.m.synced(l, n)
				}
			}
		}
	}
}

// failed records that the link's connection failed: ops (not sent, or not
// known to be) are queued again, a sync token covering everything will be
// sent, and the front is told once per outage. The subscriptions waiting
// for this link stop holding up the front's replies.
func (l *link) failed(err error, ops []linkOp) {
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	l.ops = append(ops, l.ops...)
	l.resync = true
	l.signal()
	if m.closed || l.failing || l.ctx.Err() != nil {
		return
	}
	l.failing = true // the subscriptions waiting for l stop holding up the replies (subscription.failing)
	what := "SUBSCRIBE/PSUBSCRIBE"
	if l.key.sharded {
		what = "SSUBSCRIBE"
	}
	if down := l.key.s.DownErr(); down != nil {
		err = down
	}
	m.replyError(fmt.Sprintf("ERR redshard: %s on shard %s failed: %v; subscribing again when it answers", what, l.shardName(), err))
	m.flush()
}

// shardError passes a server's error reply on a link to the front.
func (m *mux) shardError(l *link, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	msg := err.Error()
	prefix, rest, _ := strings.Cut(msg, " ")
	m.replyError(fmt.Sprintf("%s redshard: shard %s: %s", prefix, l.shardName(), rest))
	m.flush()
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sleep waits d, or until ctx is done (then it returns false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
