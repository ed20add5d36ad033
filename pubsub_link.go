package redshard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// linkKey names a mux's link: one per shard server and kind of connection
// (shard channels apart, so that a message says which kind it is).
type linkKey struct {
	b       *backend
	sharded bool
}

// link is one go-redis PubSub of a mux on a shard's command client, with
// the shard's protocol, auth, TLS, dialer and Sentinel. Its writer sends
// the subscription changes the mux queues, each batch followed by a PING
// whose payload is a sync token: the server answers in order, so the
// token's PONG confirms everything sent before it (and, after a reconnect,
// go-redis's resubscription of the whole set). Its reader hands messages
// and PONGs to the mux. go-redis reconnects the PubSub; the link backs off
// between failures and says once per outage, on the front, that the shard
// failed.
type link struct {
	m      *mux
	key    linkKey
	ps     *redis.PubSub // used by the two goroutines; closed by the writer
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // 1-buffered: ops queued or a resync asked

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
	syncPrefix = "redshard:sync:"
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// link returns the mux's link for key, starting it if needed. Caller holds m.mu.
func (m *mux) link(key linkKey) *link {
	if l := m.links[key]; l != nil {
		return l
	}
	l := &link{m: m, key: key, wake: make(chan struct{}, 1), rename: m.name != ""}
	l.ctx, l.cancel = context.WithCancel(m.ctx)
	for k := range l.want {
		l.want[k] = map[string]bool{}
	}
	l.ps = key.b.client.Subscribe(l.ctx) // no channel: nothing is sent yet
	m.links[key] = l
	running := &m.c.flights.running
	if !running.enter() {
		l.cancel()
		_ = l.ps.Close()
		return l
	}
	if !running.enter() {
		running.leave()
		l.cancel()
		_ = l.ps.Close()
		return l
	}
	go l.write()
	go l.read()
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

func (l *link) shardName() string { return l.key.b.shard.Name }

// write sends the queued changes and sync tokens until the link is closed.
func (l *link) write() {
	defer l.m.c.flights.running.leave()
	defer func() { _ = l.ps.Close() }() // also ends read's Receive
	var backoff time.Duration
	for {
		select {
		case <-l.ctx.Done():
			return
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
	if l.rename || l.resync && m.name != "" && l.key.b.client.Options().Protocol != 2 {
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
func (l *link) read() {
	defer l.m.c.flights.running.leave()
	var backoff time.Duration
	for {
		msg, err := l.ps.Receive(l.ctx)
		if l.ctx.Err() != nil {
			return
		}
		if err != nil {
			if isRedisError(err) { // a command failed; the connection is fine
				l.m.shardError(l, err)
				continue
			}
			l.failed(err, nil)
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			if !sleep(l.ctx, backoff) {
				return
			}
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
	if b := l.key.b; b.down.Load() {
		err = b.downError()
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
