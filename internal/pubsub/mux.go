package pubsub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kinds of subscription.
const (
	subChannel = iota // SUBSCRIBE: on the channel's owner
	subPattern        // PSUBSCRIBE: on every shard
	subShard          // SSUBSCRIBE: on the channel's owner, its own connection
	numSubKinds
)

var (
	subNames   = [numSubKinds]string{"subscribe", "psubscribe", "ssubscribe"}
	unsubNames = [numSubKinds]string{"unsubscribe", "punsubscribe", "sunsubscribe"}
)

const (
	// maxUnread is how many bytes of replies and messages a mux keeps for a
	// front that does not read; beyond it the mux closes, as Redis closes a
	// subscriber over its output buffer limit (32 MB by default), and the
	// PubSub reconnects.
	maxUnread = 64 << 20
	// maxHeld is how many messages a subscription keeps while its
	// confirmation has not reached the front yet.
	maxHeld = 1024
)

var (
	errMuxClosed   = fmt.Errorf("redshard: pub/sub connection closed: %w", net.ErrClosed) // go-redis reports it as it does a closed socket
	errSlowReader  = errors.New("redshard: pub/sub connection closed: more than 64 MiB of messages were not read")
	errMuxProtocol = errRESP
)

// addr is the address of a mux, a connection in memory.
type addr string

func (addr) Network() string  { return "redshard" }
func (a addr) String() string { return string(a) }

// mux is the connection a front PubSub reads and writes: a net.Conn that
// speaks RESP2 locally, places each subscription on the shards that must
// carry it (one link per shard and kind of connection), and merges what
// the links receive. Replies go out in the order of the commands, as from
// one server: a subscription's confirmation waits until every shard it
// needs has confirmed it, or one of them failed (then at once if another
// has confirmed it, else late, when that shard is back). Messages go out as they arrive, once the front has
// been told of their subscription. It is safe for concurrent use.
type mux struct {
	hub    *Hub
	ctx    context.Context // done when the mux closes; parent of its links'
	cancel context.CancelFunc

	mu           sync.Mutex // guards everything below, and the links' state
	in           []byte     // bytes written by the front, not yet a whole command
	out          []byte     // bytes for the front to read
	closed       bool
	closeErr     error
	readDeadline time.Time
	ready        chan struct{} // 1-buffered: out grew, the mux closed, or the deadline moved

	subs    [numSubKinds]map[string]*subscription // what the front is subscribed to now
	visible [numSubKinds]map[string]bool          // what the front has been told (the counts)
	replies []muxReply                            // not sent yet, in command order
	links   map[linkKey]*link
	top     Ring // the ring the subscriptions are placed on

	// moved holds the links that gained subscriptions when the ring
	// changed (reroute), each with the sync token whose answer confirms
	// them there, until that answer (synced) or the link's end: what
	// a membership change waits for (Hub.Follow, awaitMoved).
	moved map[*link]uint64

	// resp3: the shards speak RESP3 (go-redis's default), so PING in
	// subscribed mode answers as a plain go-redis client on RESP3 sees it.
	resp3 bool

	// name is the front's CLIENT SETNAME, given to every link's connection
	// ("" until one is asked for); renamed is set by a write that asked.
	name    string
	renamed bool
}

// subscription is one channel or pattern of a mux.
type subscription struct {
	kind    int
	name    string
	targets map[*link]bool   // links it is subscribed on
	waiting map[*link]uint64 // links its confirmation waits for: the sync token covering it there (0: none sent yet)
	late    bool             // its confirmation was skipped and is owed
	held    [][]byte         // messages received before the front was told of it
}

// failing reports whether a link st's confirmation waits for is failing
// (the front was told): then the confirmation does not hold up the
// replies. It is read from the links, not recorded, so that it holds for
// a subscription made on a link that was failing already, and ends when
// the link answers again.
func (st *subscription) failing() bool {
	for l := range st.waiting {
		if l.failing {
			return true
		}
	}
	return false
}

type replyOp uint8

const (
	replyFrame     replyOp = iota // frame, as it is
	replySub                      // sub's confirmation, once it is confirmed
	replyUnsub                    // name's unsubscribe confirmation
	replyUnsubNone                // an unsubscribe-all with nothing subscribed
	replyReset                    // RESET: every subscription dropped
)

type muxReply struct {
	op    replyOp
	frame []byte
	kind  int
	name  string
	sub   *subscription
}

func newMux(h *Hub) *mux {
	m := &mux{hub: h, ready: make(chan struct{}, 1), links: map[linkKey]*link{}, moved: map[*link]uint64{}, top: h.host.Ring(),
		resp3: h.host.RESP3()}
	m.ctx, m.cancel = context.WithCancel(h.host.Context())
	for k := range m.subs {
		m.subs[k] = map[string]*subscription{}
		m.visible[k] = map[string]bool{}
	}
	return m
}

// shutdown marks the mux closed once its context is done; its links stop
// with the context.
func (m *mux) shutdown(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.closeErr == nil {
		m.closeErr = err
	}
	m.out, m.replies = nil, nil
	m.signal()
}

// failLocked closes the mux with err. Caller holds m.mu.
func (m *mux) failLocked(err error) {
	if m.closeErr == nil {
		m.closeErr = err
	}
	m.closed = true
	m.cancel()
	m.signal()
}

func (m *mux) signal() {
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// Read returns what the mux has for the front, waiting for it until the
// read deadline.
func (m *mux) Read(p []byte) (int, error) {
	for {
		m.mu.Lock()
		if m.closed {
			err := m.closeErr
			m.mu.Unlock()
			return 0, err
		}
		if len(m.out) > 0 {
			n := copy(p, m.out)
			m.out = m.out[n:]
			if len(m.out) == 0 {
				m.out = nil
			}
			m.mu.Unlock()
			return n, nil
		}
		deadline := m.readDeadline
		m.mu.Unlock()
		var expired <-chan time.Time
		var timer *time.Timer
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			timer = time.NewTimer(d)
			expired = timer.C
		}
		select {
		case <-m.ready:
		case <-expired:
			return 0, os.ErrDeadlineExceeded
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

var unsubscribeName = []byte("unsubscribe") // also in punsubscribe, sunsubscribe

// subscribeWait bounds how long Write waits for the shards to confirm the
// subscriptions it asked for, and a membership change (Hub.Follow) for the
// shards that gained subscriptions to confirm them.
const subscribeWait = 2 * time.Second

// Write takes the front's commands and answers them. A write that asks
// for subscriptions returns once the shards have confirmed them (or failed,
// or subscribeWait passed): a PUBLISH sent right after Subscribe returns
// reaches the subscriber, as with one server, where the SUBSCRIBE is on
// the wire before Subscribe returns.
func (m *mux) Write(p []byte) (int, error) {
	// go-redis spells command names in lower case; nothing is allocated.
	if bytes.Contains(p, unsubscribeName) {
		m.drain()
	}
	n, pending, renamed, err := m.write(p)
	if len(pending) > 0 {
		m.awaitSubscribed(pending)
	}
	if renamed {
		m.drain() // the shards have the name once their links answer a sync sent after it
	}
	return n, err
}

// awaitSubscribed waits until none of subs waits for a link that is not
// failing, the mux closes, or subscribeWait passes.
func (m *mux) awaitSubscribed(subs []*subscription) {
	m.waitUntil(func() bool {
		for _, st := range subs {
			if len(st.waiting) > 0 && !st.failing() {
				return false
			}
		}
		return true
	})
}

// waitUntil polls done, under m.mu, until it holds, the mux closes, or
// subscribeWait passes.
func (m *mux) waitUntil(done func() bool) {
	m.waitUntilCtx(context.Background(), time.Now().Add(subscribeWait), done)
}

// waitUntilCtx polls done, under m.mu, until it holds, the mux closes,
// ctx ends or deadline passes; it reports whether done held (or the mux
// closed).
func (m *mux) waitUntilCtx(ctx context.Context, deadline time.Time, done func() bool) bool {
	for {
		m.mu.Lock()
		ok := m.closed || done()
		m.mu.Unlock()
		if ok {
			return true
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitMoved waits until every link that gained subscriptions in a
// reroute has confirmed them, or is failing (its shard's failure was
// reported on the front: messages published there meanwhile are lost),
// or ctx ends, or deadline passes. Links still unconfirmed then are
// reported on the front, which may lose what is published on their shards
// until they confirm.
func (m *mux) awaitMoved(ctx context.Context, deadline time.Time) {
	if m.waitUntilCtx(ctx, deadline, m.movedDone) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.movedDone() {
		return
	}
	var names []string
	for l := range m.moved {
		names = append(names, l.shardName())
	}
	slices.Sort(names)
	names = slices.Compact(names)
	m.replyError(fmt.Sprintf("ERR redshard: the ring changed and shard %s has not confirmed the subscriptions it takes over yet; messages published there before it does may be lost",
		strings.Join(names, ", ")))
	m.flush()
}

// movedDone drops from m.moved the links that need no more waiting for,
// and reports whether none is left. Caller holds m.mu.
func (m *mux) movedDone() bool {
	for l, tok := range m.moved {
		if l.acked >= tok || l.failing || l.ctx.Err() != nil {
			delete(m.moved, l)
		}
	}
	return len(m.moved) == 0
}

// drain waits until every link's shard has answered a sync sent now, so
// that the messages it sent before an unsubscribe reach the front before
// the unsubscribe's confirmation, as on one server (bounded by
// subscribeWait; failing links are not waited for).
func (m *mux) drain() {
	m.mu.Lock()
	want := map[*link]uint64{}
	for _, l := range m.links {
		if l.failing {
			continue
		}
		l.barrier = true
		want[l] = l.sent + 1
		l.signal()
	}
	m.mu.Unlock()
	m.waitUntil(func() bool {
		for l, tok := range want {
			if l.acked >= tok || l.failing || l.ctx.Err() != nil {
				delete(want, l)
			}
		}
		return len(want) == 0
	})
}

func (m *mux) write(p []byte) (int, []*subscription, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, nil, false, m.closeErr
	}
	m.renamed = false
	before := len(m.replies)
	m.in = append(m.in, p...)
	for {
		args, n, err := parseCommand(m.in)
		if err != nil {
			m.failLocked(errMuxProtocol)
			return 0, nil, false, err
		}
		if n == 0 {
			break
		}
		m.in = m.in[n:]
		m.handle(args)
	}
	if len(m.in) == 0 {
		m.in = nil
	}
	var pending []*subscription
	for _, r := range m.replies[min(before, len(m.replies)):] {
		if r.op == replySub && r.sub != nil && len(r.sub.waiting) > 0 {
			pending = append(pending, r.sub)
		}
	}
	m.flush()
	return len(p), pending, m.renamed, nil
}

// Close closes the mux and its links. It is idempotent.
func (m *mux) Close() error {
	m.cancel()
	m.shutdown(errMuxClosed)
	return nil
}

func (m *mux) LocalAddr() net.Addr  { return addr("redshard-pubsub") }
func (m *mux) RemoteAddr() net.Addr { return addr("redshard-pubsub") }

func (m *mux) SetDeadline(t time.Time) error { return m.SetReadDeadline(t) }

func (m *mux) SetReadDeadline(t time.Time) error {
	m.mu.Lock()
	m.readDeadline = t
	m.signal()
	m.mu.Unlock()
	return nil
}

// SetWriteDeadline does nothing: a write never blocks.
func (m *mux) SetWriteDeadline(time.Time) error { return nil }

// handle answers one command of the front. Caller holds m.mu.
func (m *mux) handle(args []string) {
	if len(args) == 0 {
		m.replyError("ERR empty command")
		return
	}
	name := strings.ToLower(args[0])
	switch name {
	case "subscribe", "psubscribe", "ssubscribe":
		if len(args) < 2 {
			m.replyError("ERR wrong number of arguments for '" + name + "' command")
			return
		}
		m.subscribe(slices.Index(subNames[:], name), args[1:])
	case "unsubscribe", "punsubscribe", "sunsubscribe":
		m.unsubscribe(slices.Index(unsubNames[:], name), args[1:])
	case "ping":
		switch {
		case len(args) > 2:
			m.replyError("ERR wrong number of arguments for 'ping' command")
		case m.subscribed() && !m.resp3:
			payload := ""
			if len(args) == 2 {
				payload = args[1]
			}
			m.replyFrame(appendBulk(appendBulk(appendArray(nil, 2), "pong"), payload))
		case len(args) == 2:
			m.replyFrame(appendBulk(nil, args[1]))
		default:
			m.replyFrame(appendStatus(nil, "PONG"))
		}
	case "hello":
		m.hello(args[1:])
	case "reset":
		for kind := range m.subs {
			m.dropAll(kind)
		}
		m.replies = append(m.replies, muxReply{op: replyReset})
	case "quit":
		m.replyFrame(appendStatus(nil, "OK"))
	default:
		if m.subscribed() && !m.resp3 {
			m.replyError("ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
			return
		}
		if name == "client" && len(args) == 3 && strings.EqualFold(args[1], "setname") {
			m.setName(args[2])
			return
		}
		m.replyError("ERR redshard: '" + name + "' is not supported on a Pub/Sub connection")
	}
}

// setName records the front's CLIENT SETNAME and has every link give it
// to its connection, as a server names the subscriber's one connection.
func (m *mux) setName(name string) {
	if strings.ContainsFunc(name, func(r rune) bool { return r < '!' || r > '~' }) { // as Redis checks
		m.replyError("ERR Client names cannot contain spaces, newlines or special characters.")
		return
	}
	m.name, m.renamed = name, true
	for _, l := range m.links {
		l.rename = true
		l.signal()
	}
	m.replyFrame(appendStatus(nil, "OK"))
}

func (m *mux) replyFrame(frame []byte) {
	m.replies = append(m.replies, muxReply{op: replyFrame, frame: frame})
}

func (m *mux) replyError(msg string) { m.replyFrame(appendError(nil, msg)) }

// hello answers the HELLO of the front's connection setup: RESP2 only.
func (m *mux) hello(args []string) {
	if len(args) > 0 && args[0] != "2" {
		m.replyError("NOPROTO redshard's pub/sub connection speaks RESP2")
		return
	}
	b := appendArray(nil, 14)
	for _, kv := range [][2]string{{"server", "redshard"}, {"version", "7.0.0"}} {
		b = appendBulk(appendBulk(b, kv[0]), kv[1])
	}
	b = appendInt(appendBulk(b, "proto"), 2)
	b = appendInt(appendBulk(b, "id"), 0)
	for _, kv := range [][2]string{{"mode", "standalone"}, {"role", "master"}} {
		b = appendBulk(appendBulk(b, kv[0]), kv[1])
	}
	b = appendArray(appendBulk(b, "modules"), 0)
	m.replyFrame(b)
}

// subscribed reports whether the front is in subscribed mode, as a server
// sees it: some subscription was asked for and not dropped.
func (m *mux) subscribed() bool {
	for _, s := range m.subs {
		if len(s) > 0 {
			return true
		}
	}
	return false
}

// count is the subscription count a confirmation of kind reports: channels
// and patterns together, shard channels apart, as Redis counts.
func (m *mux) count(kind int) int {
	if kind == subShard {
		return len(m.visible[subShard])
	}
	return len(m.visible[subChannel]) + len(m.visible[subPattern])
}

func (m *mux) subscribe(kind int, names []string) {
	for _, name := range names {
		st := m.subs[kind][name]
		if st == nil {
			st = &subscription{kind: kind, name: name, targets: map[*link]bool{}, waiting: map[*link]uint64{}}
			m.subs[kind][name] = st
			for _, key := range m.targetKeys(kind, name) {
				m.addTarget(st, m.link(key), true)
			}
		}
		m.replies = append(m.replies, muxReply{op: replySub, kind: kind, name: name, sub: st})
	}
}

func (m *mux) unsubscribe(kind int, names []string) {
	if len(names) == 0 {
		if len(m.subs[kind]) == 0 {
			m.replies = append(m.replies, muxReply{op: replyUnsubNone, kind: kind})
			return
		}
		for name := range m.subs[kind] {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	for _, name := range names {
		m.drop(kind, name)
		m.replies = append(m.replies, muxReply{op: replyUnsub, kind: kind, name: name})
	}
}

// drop ends the subscription kind/name, if any, on every link.
func (m *mux) drop(kind int, name string) {
	st := m.subs[kind][name]
	if st == nil {
		return
	}
	delete(m.subs[kind], name)
	for l := range st.targets {
		m.dropTarget(st, l)
	}
}

func (m *mux) dropAll(kind int) {
	for name := range m.subs[kind] {
		m.drop(kind, name)
	}
}

// targetKeys returns the links that must carry subscription kind/name on
// the mux's ring: the channel's owners (a pattern: every shard), which
// during a change include those of the other ring, where processes that
// have not switched yet still publish (Ring.Owners, Ring.All).
func (m *mux) targetKeys(kind int, name string) []linkKey {
	var shards []Shard
	if kind == subPattern {
		shards = m.top.All()
	} else {
		shards = m.top.Owners(name)
	}
	out := make([]linkKey, 0, len(shards))
	for _, s := range shards {
		if k := (linkKey{s: s, sharded: kind == subShard}); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// addTarget subscribes st on l; wait makes st's confirmation wait for l's.
func (m *mux) addTarget(st *subscription, l *link, wait bool) {
	st.targets[l] = true
	if wait {
		st.waiting[l] = 0
	}
	l.want[st.kind][st.name] = true
	l.ops = append(l.ops, linkOp{sub: true, kind: st.kind, name: st.name})
	l.signal()
}

// dropTarget unsubscribes st on l, closing l when nothing is left on it.
func (m *mux) dropTarget(st *subscription, l *link) {
	delete(st.targets, l)
	m.unwait(st, l)
	delete(l.want[st.kind], st.name)
	if l.empty() {
		delete(m.links, l.key)
		delete(m.moved, l)
		l.cancel() // its connection, and what it was subscribed to, go with it
		return
	}
	l.ops = append(l.ops, linkOp{sub: false, kind: st.kind, name: st.name})
	l.signal()
}

// unwait stops st waiting for l; a confirmation owed is queued once st
// waits for nothing.
func (m *mux) unwait(st *subscription, l *link) {
	if _, ok := st.waiting[l]; !ok {
		return
	}
	delete(st.waiting, l)
	// Owed once it waits for nothing, or (a shard of several failed) once
	// another has confirmed it.
	if st.late && len(st.waiting) < len(st.targets) && m.subs[st.kind][st.name] == st {
		st.late = false
		m.replies = append(m.replies, muxReply{op: replySub, kind: st.kind, name: st.name, sub: st})
	}
}

// flush moves the replies that are ready, in order, to the front's bytes.
// Caller holds m.mu.
func (m *mux) flush() {
	if m.closed {
		return
	}
	n := 0
loop:
	for ; n < len(m.replies); n++ {
		r := &m.replies[n]
		switch r.op {
		case replyFrame:
			m.out = append(m.out, r.frame...)
		case replySub:
			st := r.sub
			// A shard it waits for failed (the front was told): confirmed
			// now if it is on some shard already (a pattern, a channel
			// with two owners during a change), so that the messages of
			// the shards that are up are not held, and dropped past
			// maxHeld, meanwhile; else once that shard is back.
			if m.subs[r.kind][r.name] == st && len(st.waiting) > 0 {
				if !st.failing() {
					break loop
				}
				if len(st.waiting) == len(st.targets) {
					st.late = true // the shard's error went out; the confirmation follows when it is back
					continue
				}
			}
			m.visible[r.kind][r.name] = true
			m.out = appendConfirm(m.out, subNames[r.kind], r.name, true, m.count(r.kind))
			if m.subs[r.kind][r.name] == st {
				for _, f := range st.held {
					m.out = append(m.out, f...)
				}
				st.held = nil
			}
		case replyUnsub:
			delete(m.visible[r.kind], r.name)
			m.out = appendConfirm(m.out, unsubNames[r.kind], r.name, true, m.count(r.kind))
		case replyUnsubNone:
			m.out = appendConfirm(m.out, unsubNames[r.kind], "", false, m.count(r.kind))
		case replyReset:
			for k := range m.visible {
				clear(m.visible[k])
			}
			m.out = appendStatus(m.out, "RESET")
		}
	}
	if n > 0 {
		clear(m.replies[:n])
		m.replies = m.replies[n:]
		if len(m.replies) == 0 {
			m.replies = nil
		}
		m.signal()
	}
	if len(m.out) > maxUnread {
		m.failLocked(errSlowReader)
	}
}

func appendConfirm(b []byte, kind, name string, hasName bool, count int) []byte {
	b = appendBulk(appendArray(b, 3), kind)
	if hasName {
		b = appendBulk(b, name)
	} else {
		b = appendNil(b)
	}
	return appendInt(b, count)
}

func appendMessage(b []byte, kind int, msg *redis.Message) []byte {
	switch kind {
	case subPattern:
		b = appendBulk(appendBulk(appendBulk(appendArray(b, 4), "pmessage"), msg.Pattern), msg.Channel)
	case subShard:
		b = appendBulk(appendBulk(appendArray(b, 3), "smessage"), msg.Channel)
	default:
		b = appendBulk(appendBulk(appendArray(b, 3), "message"), msg.Channel)
	}
	if msg.PayloadSlice != nil && kind != subPattern {
		b = appendArray(b, len(msg.PayloadSlice))
		for _, s := range msg.PayloadSlice {
			b = appendBulk(b, s)
		}
		return b
	}
	return appendBulk(b, msg.Payload)
}

// deliver passes a message a link received to the front, if the front is
// still subscribed to it through that link.
func (m *mux) deliver(l *link, msg *redis.Message) {
	kind, name := subChannel, msg.Channel
	switch {
	case l.key.sharded:
		kind = subShard
	case msg.Pattern != "":
		kind, name = subPattern, msg.Pattern
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.subs[kind][name]
	if m.closed || st == nil || !st.targets[l] {
		return
	}
	if !m.visible[kind][name] {
		if len(st.held) < maxHeld {
			st.held = append(st.held, appendMessage(nil, kind, msg))
		}
		return
	}
	m.out = appendMessage(m.out, kind, msg)
	m.signal()
	if len(m.out) > maxUnread {
		m.failLocked(errSlowReader)
	}
}

// reroute places every subscription on the host's current ring: links
// of shards that now carry it subscribe, links that no longer do
// unsubscribe. The ring is read under m.mu, so that of two reroutes
// racing (the hub's poll, Hub.Follow, a new mux) the last one places the
// subscriptions on the newest ring, never back on an older one.
func (m *mux) reroute() { m.rerouteTo(nil) }

// rerouteTo is reroute onto top, or, if top is nil, onto the host's
// current ring.
func (m *mux) rerouteTo(top Ring) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if top == nil {
		top = m.hub.host.Ring()
	}
	if m.closed || top == m.top {
		return
	}
	m.top = top
	for kind := range m.subs {
		for name, st := range m.subs[kind] {
			want := m.targetKeys(kind, name)
			for _, key := range want {
				if l := m.link(key); !st.targets[l] {
					m.addTarget(st, l, len(st.waiting) > 0)
					m.moved[l] = l.sent + 1 // the next token issued follows the subscription
				}
			}
			for l := range st.targets {
				if !slices.Contains(want, l.key) {
					m.dropTarget(st, l)
				}
			}
		}
	}
	m.flush()
}

// synced records that link l's server has handled everything sent before
// sync token tok: the subscriptions it covers are confirmed there.
func (m *mux) synced(l *link, tok uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	l.failing = false
	l.acked = max(l.acked, tok)
	if t, ok := m.moved[l]; ok && t <= tok {
		delete(m.moved, l)
	}
	for kind := range l.want {
		for name := range l.want[kind] {
			st := m.subs[kind][name]
			if st == nil {
				continue
			}
			if t, ok := st.waiting[l]; ok && t != 0 && t <= tok {
				m.unwait(st, l)
			}
		}
	}
	m.flush()
}
