package hot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redshard/redshard/internal/netconn"
	"github.com/redshard/redshard/internal/rediserr"
)

// InvalidationState is how a shard's cached replies are kept fresh: the
// root's InvalidationState, which numbers its values as these are.
type InvalidationState int32

const (
	// InvalidationUnprobed: no hot key has been read from the shard yet.
	InvalidationUnprobed InvalidationState = iota
	// InvalidationTracking: the server tracks the cached keys.
	InvalidationTracking
	// InvalidationStalenessOnly: the server refused CLIENT TRACKING.
	InvalidationStalenessOnly
	// InvalidationOff: tracking is off (TrackingOff, or SplitCopies).
	InvalidationOff
)

const (
	// invalidateChannel is where RESP2 connections receive the
	// invalidation messages redirected to them.
	invalidateChannel = "__redis__:invalidate"
	// trackingPing is how long the invalidation connection may stay silent
	// before it is PINGed; no reply within another trackingPing and it is
	// taken for dead (a half-open connection is noticed within ~2x this).
	trackingPing = 500 * time.Millisecond
	// trackingBackoff caps the pause between reconnection attempts.
	trackingBackoff = 2 * time.Second
)

// Shard is the hot-key state of one shard backend: its number in the
// local cache and, with tracking, the clients and the goroutine that keep
// its cached replies fresh. It is safe for concurrent use.
//
// Tracking uses two clients of the shard's own: reader sends the tracked
// reads, the concurrent ones batched into one pipeline (each read a pair,
// CLIENT CACHING YES and the read, after CLIENT TRACKING ON REDIRECT <id>
// OPTIN on a connection not yet pointed at the live id; see trackedRead),
// and sub holds the PubSub connection that
// receives the invalidations. Its OnConnect records the connection's ID
// (pending); the ID becomes live, and is used in reads, once that
// connection's SUBSCRIBE is confirmed. Whenever the connection is lost or
// replaced, live goes back to 0 and the shard's cached replies are dropped,
// since invalidations may have been missed; the same happens when one of
// reader's connections closes, as the server forgets what it tracked for it:
// a close by the client is reported by the connection's wrapper, a close by
// the server is found by watchReaders within about trackingPing.
type Shard struct {
	h  *Path
	b  Backend // the owner, whose close closes this
	id int     // the shard's number in the local cache
	// mark is the shard's mark channel: MarkChannelPrefix, this
	// client's instance, ":" and id. It is named once.
	mark string

	state atomic.Int32 // an InvalidationState

	pending atomic.Int64 // CLIENT ID of the newest invalidation connection
	live    atomic.Int64 // the ID reads may redirect to; 0: none

	invalidations atomic.Int64 // keys named by invalidation messages
	lost          atomic.Int64 // times the cached replies were dropped

	load atomic.Int64 // recent hot-key work sent to the shard (Split; see choose)

	mu      sync.Mutex // guards the fields below and serialises the probe
	closed  bool
	reader  *redis.Client
	sub     *redis.Client
	ps      *redis.PubSub      // the current subscription, for close
	done    chan struct{}      // closed when the subscriber goroutine returns
	stop    context.CancelFunc // ends watchReaders
	watched chan struct{}      // closed when watchReaders returns

	idsMu  sync.Mutex       // guards ids and idsSeq
	ids    map[int64]uint64 // CLIENT IDs of the reader's connections, as they connected: when (idsSeq)
	idsSeq uint64           // counts the reader's connections recorded in ids

	idle    chan *trackedConn // reader connections between tracked reads; set once with tracking
	batch   batcher           // the tracked reads waiting for a reader connection
	senders sync.WaitGroup    // the sendLoop goroutines
	misses  missTable         // the direct misses in progress (cache.go, directMiss)
	hooks   atomic.Uint64     // bumped by AddHook: older idle connections lack the hook
	shut    atomic.Bool       // set by Close: idle connections are closed, not kept

	refills refills // write-through refills waiting for their marks (refill.go)
}

// trackedConn is a connection of the reader held out of its pool, so that
// the hot path knows what it told the server on it: redirect is the
// invalidation connection its tracking points to (0: not known), and a
// tracked read sends CLIENT TRACKING ON only when that is not the live one.
type trackedConn struct {
	cn       *redis.Conn
	redirect int64
	hooks    uint64 // Shard.hooks when made
}

// idleTracked is how many reader connections a shard keeps between tracked
// reads, at most: more are taken from the reader's pool, and given back
// after their read, under a burst. It is also at most half the pool, so
// that a read waiting for the pool is not starved by connections kept here.
const idleTracked = 64

// NewShard builds the hot-key state of backend b; closed says b is closed
// already, and the state must never open a connection. Only the root's
// backend calls it, once per backend (see Backend.HotState).
func (h *Path) NewShard(b Backend, closed bool) *Shard {
	hs := &Shard{h: h, b: b, id: int(h.nextID.Add(1)), closed: closed}
	hs.mark = MarkChannelPrefix + h.instance + ":" + strconv.Itoa(hs.id)
	hs.batch.signal = make(chan struct{}, 1)
	if h.opt.Mitigation != LocalCache || h.opt.Tracking == TrackingOff {
		hs.state.Store(int32(InvalidationOff))
	}
	// A shard new to the hot path starts at the others' mean load, so that
	// choose does not send it everything until it catches up.
	var sum, n int64
	h.env.EachShard(func(x *Shard) {
		sum += x.load.Load()
		n++
	})
	if n > 0 {
		hs.load.Store(sum / n)
	}
	return hs
}

// tracking returns the shard's tracking state, probing the server the
// first time: CLIENT TRACKING OFF is harmless where tracking exists and an
// error where it does not (Redis before 6, miniredis). A probe that cannot
// reach the server leaves the state InvalidationUnprobed, to be tried again.
func (hs *Shard) tracking(ctx context.Context) InvalidationState {
	if st := InvalidationState(hs.state.Load()); st != InvalidationUnprobed {
		return st
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if st := InvalidationState(hs.state.Load()); st != InvalidationUnprobed || hs.closed {
		return st
	}
	if hs.reader == nil {
		hs.reader = hs.newClient(false)
	}
	err := hs.reader.Do(ctx, "client", "tracking", "off").Err()
	switch {
	case err == nil:
		hs.idle = make(chan *trackedConn, max(1, min(idleTracked, hs.reader.Options().PoolSize/2)))
		hs.sub = hs.newClient(true)
		hs.done = make(chan struct{})
		hs.watched = make(chan struct{})
		wctx, stop := context.WithCancel(hs.h.env.Flights.Context())
		hs.stop = stop
		hs.state.Store(int32(InvalidationTracking))
		go hs.subscribe(hs.h.env.Flights.Context())
		go hs.watchReaders(wctx)
		for range maxTrackedBatches {
			hs.senders.Add(1)
			go hs.sendLoop(wctx)
		}
	case rediserr.Is(err):
		hs.state.Store(int32(InvalidationStalenessOnly))
		_ = hs.reader.Close() // reads go to the shard's own client
		hs.reader = nil
	}
	return InvalidationState(hs.state.Load())
}

// newClient builds one of the shard's tracking clients (see Backend.Dial).
// The reader's connections report their close; the subscriber's report
// their CLIENT ID.
func (hs *Shard) newClient(subscriber bool) *redis.Client {
	if subscriber {
		return hs.b.Dial(true, func(ctx context.Context, cn *redis.Conn) error {
			id, err := cn.ClientID(ctx).Result()
			if err != nil {
				return err
			}
			hs.connected(id)
			return nil
		})
	}
	cl := hs.b.Dial(false, func(ctx context.Context, cn *redis.Conn) error {
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return fmt.Errorf("redshard: CLIENT ID of a hot-key reader connection: %w", err)
		}
		hs.idsMu.Lock()
		if hs.ids == nil {
			hs.ids = make(map[int64]uint64)
		}
		hs.idsSeq++
		hs.ids[id] = hs.idsSeq // a restarted server reuses IDs: this one is newer than any check under way
		hs.idsMu.Unlock()
		return nil
	})
	// The connections' checks are gated by the command client's clock:
	// a held connection is peeked at before each batch otherwise (RESP3),
	// a system call per round trip. One the server closed unseen fails
	// its batch, whose reads are then sent again untracked (fetch,
	// directFill) and whose write is sent again on the command client
	// (refillWrite), and the failure makes every gate check again.
	cl.AddHook(netconn.CloseHook{OnClose: hs.readerClosed, Clock: hs.b.PeekClock()})
	return cl
}

// watchReaders checks, every trackingPing until ctx ends, that the server
// still has every connection of the reader (checkReaders).
func (hs *Shard) watchReaders(ctx context.Context) {
	defer close(hs.watched)
	t := time.NewTicker(trackingPing)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hs.checkReaders(ctx)
	}
}

// checkReaders asks the server, on the backend's heartbeat connection
// (which no shard hook sees), which of the reader's connections it still
// has (CLIENT LIST ID), and drops the
// shard's cached replies if one is gone: the server closed it (CLIENT
// KILL, its idle timeout, client eviction, a fleet's sever) and forgot
// what it tracked, and go-redis would notice only when its pool hands the
// connection out again, which a cache hit never makes it do. A check that
// fails (its own connection killed, say) decides nothing and the next one
// runs a trackingPing later (one that fails other than by the server's
// reply is tried once more first); a server that refuses CLIENT LIST ID
// leaves MaxStaleness as the only bound.
//
// An ID is forgotten only if no connection recorded it again since the
// check began: a server that restarted hands out IDs from 1 again, and a
// new reader connection may take the number of one the check finds gone
// (while its CLIENT LIST reply is on the way); that connection stays
// watched.
func (hs *Shard) checkReaders(ctx context.Context) {
	hs.idsMu.Lock()
	args := make([]interface{}, 3, 3+len(hs.ids))
	args[0], args[1], args[2] = "client", "list", "id"
	seqs := make([]uint64, 0, len(hs.ids)) // seqs[i]: when args[3+i] was recorded
	for id, seq := range hs.ids {
		args = append(args, id)
		seqs = append(seqs, seq)
	}
	hs.idsMu.Unlock()
	if len(args) == 3 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, trackingPing)
	defer cancel()
	cl := hs.b.HeartbeatClient()
	if cl == nil {
		return // the backend is closing
	}
	list, err := cl.Do(cctx, args...).Text()
	if err != nil && !rediserr.Is(err) && cctx.Err() == nil {
		// Its connection was closed with the reader's, most likely (CLIENT
		// KILL TYPE normal closes both): once more, on a new one, so that
		// the reader's close is noticed now rather than a trackingPing later.
		list, err = cl.Do(cctx, args...).Text()
	}
	if err != nil {
		return
	}
	alive := make(map[int64]bool, len(args)-3)
	for _, line := range strings.Split(list, "\n") {
		if f, ok := strings.CutPrefix(line, "id="); ok {
			if sp := strings.IndexByte(f, ' '); sp >= 0 {
				f = f[:sp]
			}
			if id, err := strconv.ParseInt(f, 10, 64); err == nil {
				alive[id] = true
			}
		}
	}
	gone := false
	hs.idsMu.Lock()
	for i, a := range args[3:] {
		if id := a.(int64); !alive[id] {
			if hs.ids[id] == seqs[i] {
				delete(hs.ids, id)
			}
			gone = true // the connection the check asked about is gone, whoever has its ID now
		}
	}
	hs.idsMu.Unlock()
	if gone {
		hs.readerClosed()
	}
}

// AddHook adds the shard hook newHook makes to the client that sends
// tracked reads, if it exists yet; one made later gets it from
// Backend.Dial.
func (hs *Shard) AddHook(newHook func() redis.Hook) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.reader != nil {
		hs.reader.AddHook(newHook())
		hs.hooks.Add(1) // a redis.Conn copies its client's hooks when made
	}
}

// maxTrackedBatches bounds the batches of tracked reads a shard has in
// flight at once, each on a reader connection of its own: it is the number
// of the shard's sender goroutines (sendLoop). Reads alone go one batch at
// a time: the misses that arrive during a round trip wait for it and then
// share the next one, so a busier shard gets larger batches rather than
// more of them. A write-through refill does not wait: it may open the
// second batch at once, taking the reads queued so far with it, because
// the readers of its key wait for it (awaitRefill). Measured under Zipf
// 1.2 and on the celebrity workload in docs/results.md, "Refills in the
// tracked batches".
const maxTrackedBatches = 2

// trackedReq is one miss's tracked read in a shard's batcher: the read,
// the invalidation connection it is redirected to, and what came of it.
// Its batch's sender sets ok and failed, fills (a direct miss), and then closes
// done; nothing else writes it after it is queued.
type trackedReq struct {
	ctx context.Context // the asking caller's: its values go with the batch (hooks), not its cancellation
	id  int64
	cmd redis.Cmder

	on, caching *redis.Cmd // the batch's commands for this read (on: nil if none was needed)

	// ttlKey, if not "", is the read's key: PTTL ttlKey follows the read
	// in the batch (untracked: CACHING YES covers the read alone), and
	// pttl holds its reply; sent is when the batch was handed to the
	// connection, the earliest the server can have measured that TTL.
	ttlKey string
	pttl   *redis.Cmd
	sent   time.Time

	// write, if not nil, makes r a write-through refill (refillWrite):
	// the write and PUBLISH <the shard's mark channel> <token> (mark holds
	// its reply) go right before r's CACHING YES and read.
	write redis.Cmder
	token uint64
	mark  *redis.IntCmd

	ok     bool // the server accepted the tracking
	stale  bool // id was not the live invalidation connection when the batch was sent: sent untracked
	failed bool // the batch failed other than by a server's reply: nothing is known of the read
	closed bool // never sent: the shard or the client closed first (cmd holds redis.ErrClosed)

	// fill, if set, makes r a direct miss (see Path.directMiss): the
	// sender runs Path.directFill with it once the batch is back, before
	// done closes, a fill which must not depend on a caller that may have
	// given up.
	fill *missFill
	rep  *reply // directFill's outcome, for the callers
	key  string // the miss's name in the shard's missTable ("" for none)

	done chan struct{}
}

// batcher queues a shard's tracked reads for its senders (see
// trackedRead). Its fields are guarded by mu.
type batcher struct {
	mu       sync.Mutex
	queue    []*trackedReq
	writes   int           // the refills in queue
	inflight int           // batches sent and not yet finished
	closed   bool          // the senders are gone: nothing is queued any more
	signal   chan struct{} // one slot: something was queued
}

// trackedRead sends cmd, a read of key, on the reader as a tracked read
// redirected to id, followed by PTTL key, and waits for it. r.ok reports
// whether the server accepted the tracking; nothing is known of the read
// (r.delivered reports false) when its batch failed other than by a server's reply (a
// connection closed or broken mid-batch, a context ended, the shard
// closed): cmd then holds that error and nothing is known of what the
// server did. ctx's values go with the batch; the batch is bounded by
// hotFetchTimeout, not by ctx (the caller is a flight, see Path.fetch).
func (hs *Shard) trackedRead(ctx context.Context, id int64, key string, cmd redis.Cmder) *trackedReq {
	r := &trackedReq{ctx: ctx, id: id, cmd: cmd, ttlKey: key, done: make(chan struct{})}
	hs.enqueue(r)
	<-r.done
	return r
}

// delivered reports whether r's batch reached the server and came back
// (whatever the server replied).
func (r *trackedReq) delivered() bool { return !r.failed && !r.closed }

// enqueue hands r to the shard's senders, or, once they are gone, ends it
// at once as closed (a direct miss's fill still runs).
//
// Each read is two commands on the wire, CLIENT CACHING YES and the read,
// and a third, PTTL of its key, when r.ttlKey is set (a key read again or
// hot: its cached reply's lifetime is then bounded by the key's TTL rather
// than by MaxStaleness, see Path.lifetime), on a connection whose
// tracking already points to r.id; on one that does not (new, or made
// before the invalidation connection was replaced) CLIENT TRACKING ON
// REDIRECT <id> OPTIN goes first. The reads queued at one moment share
// one round trip: a sender of the shard takes everything queued and sends
// it as one pipeline on one reader connection; what is queued meanwhile
// goes as the next batch, once that one is back, or at once with a refill
// (see maxTrackedBatches). Pairs do not interleave: each CACHING YES comes right before
// its own read, and the PTTL comes right after it, so it is not tracked.
// A write-through refill (refillWrite) is queued the same way, its write
// and mark right before its pair.
func (hs *Shard) enqueue(r *trackedReq) {
	b := &hs.batch
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		hs.finish(context.Background(), []*trackedReq{r}, true)
		return
	}
	b.queue = append(b.queue, r)
	if r.write != nil {
		b.writes++
	}
	b.mu.Unlock()
	select {
	case b.signal <- struct{}{}:
	default: // a signal is pending already
	}
}

// withdraw takes r out of the queue if no sender has taken it yet, and
// reports whether it did: r is then never sent, and its done never closes.
func (hs *Shard) withdraw(r *trackedReq) bool {
	b := &hs.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.queue {
		if q == r {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			if r.write != nil {
				b.writes--
			}
			return true
		}
	}
	return false
}

// sendLoop is one of the shard's senders: until ctx ends (Shard.Close,
// or the client's Close through the flights' context), it sends what is
// queued as one batch, and again while anything is. When it ends, it ends
// what is still queued as closed, and nothing is queued any more.
func (hs *Shard) sendLoop(ctx context.Context) {
	defer hs.senders.Done()
	b := &hs.batch
	for {
		select {
		case <-ctx.Done():
			b.mu.Lock()
			b.closed = true
			batch := b.queue
			b.queue = nil
			b.mu.Unlock()
			hs.finish(ctx, batch, true)
			return
		case <-b.signal:
		}
		for ctx.Err() == nil {
			b.mu.Lock()
			// Reads wait for the batch in flight (the sender that ends it
			// looks at the queue again); a refill does not.
			if len(b.queue) == 0 || b.inflight > 0 && b.writes == 0 {
				b.mu.Unlock()
				break
			}
			batch := b.queue
			b.queue, b.writes = nil, 0
			b.inflight++
			b.mu.Unlock()
			// The batch is detached from its callers' contexts, as a flight
			// is: bounded by hotFetchTimeout, ended by Close.
			bctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), hotFetchTimeout)
			stop := context.AfterFunc(ctx, cancel)
			hs.sendBatch(bctx, batch)
			hs.finish(bctx, batch, false)
			stop()
			cancel()
			b.mu.Lock()
			b.inflight--
			b.mu.Unlock()
		}
	}
}

// finish runs the completions of batch's reads (closed: none was sent),
// makes what they filled visible, and wakes their callers.
func (hs *Shard) finish(ctx context.Context, batch []*trackedReq, closed bool) {
	filled := false
	for _, r := range batch {
		if closed {
			r.closed = true
			r.cmd.SetErr(redis.ErrClosed)
		}
		if r.fill != nil && hs.h.directFill(ctx, hs, r) {
			filled = true
		}
	}
	if filled {
		// Make the entries visible before their misses end, so a caller
		// that misses from now on finds them rather than reading again.
		hs.h.cache.Wait()
	}
	for _, r := range batch {
		if r.key != "" {
			hs.misses.remove(r.key, r)
		}
		close(r.done)
	}
}

// sendBatch sends batch's tracked reads as one pipeline on one reader
// connection and records each one's outcome.
func (hs *Shard) sendBatch(ctx context.Context, batch []*trackedReq) {
	tc := hs.takeConn()
	sent := time.Now()
	// A read queued with an invalidation connection that is no longer the
	// live one (its caller read live before the connection was replaced)
	// goes untracked: redirected to that connection, which the server may
	// still have (half-open), it would point the reader connection, and
	// the keys later reads track on it, where no one listens. Its reply is
	// not stored anyway: the replacement dropped what was cached before it.
	live := hs.live.Load()
	_, _ = tc.cn.Pipelined(ctx, func(p redis.Pipeliner) error {
		redirect := tc.redirect
		var on *redis.Cmd
		for _, r := range batch {
			r.stale = r.id != live
			if !r.stale {
				if r.id != redirect {
					on = p.Do(ctx, "client", "tracking", "on", "redirect", r.id, "optin")
					redirect = r.id
				}
				r.on = on
			}
			if r.write != nil {
				_ = p.Process(ctx, r.write)
				r.mark = p.Publish(ctx, hs.mark, r.token)
			}
			if r.stale {
				_ = p.Process(ctx, r.cmd)
				continue
			}
			// CACHING YES must come right before the read.
			r.caching = p.Do(ctx, "client", "caching", "yes")
			_ = p.Process(ctx, r.cmd)
			if r.ttlKey != "" {
				r.pttl = p.Do(ctx, "pttl", r.ttlKey)
				r.sent = sent
			}
		}
		return nil
	})
	// A failure that is not the server's reply (a network error, a context
	// ended mid-read) leaves the connection in doubt: it is closed, not
	// reused, and the reads it touched are reported unsent.
	bad := false
	for _, r := range batch {
		if r.on != nil {
			// The connection's tracking points to the last redirect it accepted.
			tc.redirect = 0
			if r.on.Err() == nil {
				tc.redirect = r.id
			}
		}
		errs := []error{nil, r.cmd.Err(), nil, nil, nil}
		if r.stale {
			r.ok = false
		} else {
			r.ok = (r.on == nil || r.on.Err() == nil) && r.caching.Err() == nil
			errs[0] = r.caching.Err()
		}
		if r.pttl != nil {
			errs[2] = r.pttl.Err()
		}
		if r.write != nil {
			errs[3], errs[4] = r.write.Err(), r.mark.Err()
		}
		for _, err := range errs {
			if err != nil && err != redis.Nil && !rediserr.Is(err) {
				r.failed = true
			}
		}
		bad = bad || r.failed
		r.on, r.caching = nil, nil
	}
	hs.putConn(tc, bad)
}

// takeConn returns an idle reader connection, or a new one.
func (hs *Shard) takeConn() *trackedConn {
	for {
		select {
		case tc := <-hs.idle:
			if tc.hooks == hs.hooks.Load() {
				return tc
			}
			_ = tc.cn.Close()
		default:
			// The generation first: a hook added while the Conn is made
			// must not be taken for one it copied.
			g := hs.hooks.Load()
			return &trackedConn{cn: hs.reader.Conn(), hooks: g}
		}
	}
}

// putConn keeps tc for the next tracked read, or closes it (back to the
// reader's pool, or, if bad, out of it).
func (hs *Shard) putConn(tc *trackedConn, bad bool) {
	if !bad && !hs.shut.Load() && tc.hooks == hs.hooks.Load() {
		select {
		case hs.idle <- tc:
			return
		default:
		}
	}
	_ = tc.cn.Close()
}

// connected is the subscriber's OnConnect: id is the new connection's
// CLIENT ID. A new connection means the previous one is gone, with the
// invalidations it may not have delivered.
func (hs *Shard) connected(id int64) {
	if hs.live.Swap(0) != 0 {
		hs.drop()
	}
	hs.pending.Store(id)
}

// disconnected is called when the invalidation connection is lost or
// replaced: reads stop caching (live = 0) before the cached replies go.
// While live was already 0 nothing was cached, so a failed reconnection
// attempt drops nothing.
func (hs *Shard) disconnected() {
	if hs.live.Swap(0) != 0 {
		hs.drop()
	}
}

// drop makes every reply cached from the shard unreachable.
func (hs *Shard) drop() {
	hs.refills.fail()
	hs.h.cache.InvalidateShard(hs.id)
	hs.lost.Add(1)
	hs.h.stats.trackingLost.Add(1)
}

// readerClosed is called when one of the reader's connections closes: the
// server stops tracking what was read through it.
func (hs *Shard) readerClosed() {
	if InvalidationState(hs.state.Load()) == InvalidationTracking {
		hs.drop()
	}
}

// subscribe runs the invalidation connection until ctx ends: subscribe,
// receive, and on any trouble drop the shard's cached replies, close the
// subscription and start again with a fresh connection (and a fresh ID).
func (hs *Shard) subscribe(ctx context.Context) {
	defer close(hs.done)
	var pause time.Duration
	for ctx.Err() == nil {
		ps := hs.sub.Subscribe(ctx, invalidateChannel, hs.mark)
		hs.mu.Lock()
		if hs.closed {
			hs.mu.Unlock()
			_ = ps.Close()
			return
		}
		hs.ps = ps
		hs.mu.Unlock()

		wasLive := hs.receive(ctx, ps)
		hs.disconnected()
		_ = ps.Close()
		if wasLive {
			pause = 0
			continue
		}
		pause = min(max(2*pause, 50*time.Millisecond), trackingBackoff)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// receive reads the subscription until it fails, goes silent through a
// PING, or ctx ends, and reports whether it ever became live. A nil
// payload (FLUSHALL, FLUSHDB) comes back as an error and ends it too:
// everything must go then anyway.
func (hs *Shard) receive(ctx context.Context, ps *redis.PubSub) (wasLive bool) {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, trackingPing)
		if err != nil {
			var ne net.Error
			if !pinged && errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
				if ps.Ping(ctx) != nil {
					return wasLive
				}
				pinged = true
				continue
			}
			return wasLive
		}
		pinged = false // anything received shows the connection is alive
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == invalidateChannel {
				hs.live.Store(hs.pending.Load())
				wasLive = true
			}
		case *redis.Message:
			if m.Channel != invalidateChannel {
				if m.Channel == hs.mark {
					hs.refills.marked(hs.h.cache, m.Payload)
				}
				continue
			}
			for _, k := range m.PayloadSlice {
				hs.invalidated(k)
			}
			if m.PayloadSlice == nil && m.Payload != "" {
				hs.invalidated(m.Payload)
			}
		}
	}
}

// invalidated handles one key named by an invalidation message.
func (hs *Shard) invalidated(key string) {
	hs.refills.invalidate(hs.h.cache, key)
	hs.invalidations.Add(1)
	hs.h.stats.invalidations.Add(1)
}

// Close stops the subscriber goroutine and closes the shard's tracking
// clients. Its owner, the backend, calls it once.
func (hs *Shard) Close() {
	hs.shut.Store(true)
	hs.mu.Lock()
	hs.closed = true
	ps, done, reader, sub, idle := hs.ps, hs.done, hs.reader, hs.sub, hs.idle
	stop, watched := hs.stop, hs.watched
	hs.mu.Unlock()
	if stop != nil {
		stop()
		<-watched
		hs.senders.Wait() // what they had queued is ended as closed
	}
	if ps != nil {
		_ = ps.Close() // ends a receive in progress at once
	}
	if done != nil {
		<-done
	}
	for drained := false; !drained; {
		select {
		case tc := <-idle:
			_ = tc.cn.Close()
		default:
			drained = true
		}
	}
	if reader != nil {
		_ = reader.Close()
	}
	if sub != nil {
		_ = sub.Close()
	}
}
