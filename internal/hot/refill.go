package hot

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/replyval"
	"github.com/redshard/redshard/localcache"
)

// A write-through refill (issue 27 item 3) is how a write through the
// client of a key whose GET reply is cached keeps that reply cached: the
// write goes on one of the shard's reader connections, in one round trip
// with a tracked re-read of the key (in the shard's next batch of tracked
// reads, whose other reads come before or after these, never between),
//
//	[CLIENT TRACKING ON REDIRECT <live> OPTIN]  (only on a connection not yet pointed there)
//	<the write>
//	PUBLISH <the shard's mark channel> <token>
//	CLIENT CACHING YES
//	GET <key>
//	PTTL <key>
//
// and the re-read's reply replaces the cached one before the write returns,
// so that the key's readers keep hitting. What makes that safe is the mark:
// the shard's invalidation connection is subscribed to the mark channel as
// well, and the server appends invalidation messages and published
// messages to that connection's output in the order it executes the
// commands that cause them. So the invalidations that arrive before the
// token come from writes executed before the PUBLISH, hence before the
// GET, whose reply includes them: the refill absorbs them (our own write's
// own invalidations, sent for every reader connection that tracked the
// key, are among them). Those that arrive after the token come from writes
// executed after the PUBLISH, which the GET may have missed: they hide the
// refilled reply as any invalidation does. Every other bump of the key's
// counter since the refill's ticket (a read returned outside the cache, a
// fill, another write through the client, an invalidation from another
// shard) refuses it. See docs/hot-reads.md, "Write-through refills".

// markWait bounds how long a write waits for its mark after its reply,
// as a safety net only: the write waits only for a mark the server has
// published to a subscriber (PUBLISH counted one), which the invalidation
// connection live when the refill was registered delivers, unless it is
// lost first, and every loss ends the pending refills (Shard.drop, fail).
// So the wait ends with the mark or the loss (or the caller's context),
// normally with the reply; a machine too loaded to schedule the receiver
// slows the write down, it does not cost the refill.
const markWait = hotFetchTimeout

// refills is a shard's write-through refills waiting for their marks.
type refills struct {
	waiting atomic.Int32 // len(pending), read without mu on the receiver's fast path
	writing atomic.Int32 // len(byKey), read without mu on a miss's fast path

	mu      sync.Mutex
	seq     uint64             // last token
	pending map[uint64]*refill // by token, until the mark (or a failure)
	byKey   map[string]*refill // the latest refill of each key, until its writer is done
}

// refill is one write-through refill. absorbed is written only under its
// shard's refills.mu while the refill is pending, and read by its writer
// after done is closed.
type refill struct {
	key      string
	stripe   uint64 // the key's localcache.KeyStripe
	absorbed uint64 // invalidations of stripe received before the mark
	marked   bool   // the mark arrived (else the refill was failed)
	done     chan struct{}
	finished chan struct{} // closed when the writer has stored the reply, or given up
}

// MarkChannelPrefix begins the name of every mark channel. The root's
// PUBSUB CHANNELS leaves them out: they are redshard's, not the caller's.
const MarkChannelPrefix = "__redshard__:mark:"

// start registers a refill of key and takes its ticket, under the lock the
// receiver holds to bump and count: an invalidation is counted exactly
// when it bumped the key's counter after the ticket was taken.
func (rs *refills) start(c *localcache.Cache, shard int, key, sub string) (*refill, uint64, localcache.Ticket) {
	r := &refill{key: key, stripe: c.KeyStripe(key), done: make(chan struct{}), finished: make(chan struct{})}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.pending == nil {
		rs.pending = make(map[uint64]*refill)
		rs.byKey = make(map[string]*refill)
	}
	rs.seq++
	rs.pending[rs.seq] = r
	rs.waiting.Add(1)
	if _, ok := rs.byKey[key]; !ok {
		rs.writing.Add(1)
	}
	rs.byKey[key] = r
	return r, rs.seq, c.FillTicket(shard, key, sub)
}

// finish ends the writer's part of token's refill r: it is no longer
// pending, and the readers waiting for it look in the cache again.
func (rs *refills) finish(token uint64, r *refill) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if p, ok := rs.pending[token]; ok {
		rs.end(token, p)
	}
	if rs.byKey[r.key] == r {
		delete(rs.byKey, r.key)
		rs.writing.Add(-1)
	}
	close(r.finished)
}

// writer returns the refill of key in progress, if any.
func (rs *refills) writer(key string) *refill {
	if rs.writing.Load() == 0 {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.byKey[key]
}

// awaitRefill is a cache miss's last look before it reads from the
// server: when a write-through refill of the key is in progress, the
// reader waits for it (its round trip, then its store) and looks in the
// cache again, so that the readers of a key its client writes share the
// write's round trip instead of each missing and reading, and their fills
// do not refuse the write's. It reports whether the cache then answered
// cmd. Waiting changes nothing of what the cache may answer (every hit is
// checked against the counters). It is bounded by ctx and by the refill:
// its writer finishes once its batch is back (hotFetchTimeout at most) and
// its mark came (markWait at most) or its own context ended, so the wait
// needs no timer of its own.
func (h *Path) awaitRefill(ctx context.Context, hs *Shard, key, sub string, cmd redis.Cmder) bool {
	if sub != getSubKey {
		return false
	}
	r := hs.refills.writer(key)
	if r == nil {
		return false
	}
	if awaitHook != nil {
		awaitHook()
	}
	select {
	case <-r.finished:
	case <-ctx.Done():
		return false
	}
	return h.hit(hs, key, sub, cmd)
}

// invalidate bumps key's counter for an invalidation message and counts
// the bump for every pending refill of key's stripe. With none pending it
// takes no lock: a refill registered meanwhile then misses the count and
// is refused, never wrongly kept.
func (rs *refills) invalidate(c *localcache.Cache, key string) {
	if rs.waiting.Load() == 0 {
		c.InvalidateKey(key)
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	c.InvalidateKey(key)
	stripe := c.KeyStripe(key)
	for _, r := range rs.pending {
		if r.stripe == stripe {
			r.absorbed++
		}
	}
}

// marked is told of a message on the mark channel: token's refill stops
// counting and may store. Its write ran before its PUBLISH, so the key is
// bumped here for the writer (rule 4 of docs/hot-reads.md; the writer
// does not bump again), and the bump is counted for every other pending
// refill of the key's stripe as an invalidation before their marks is:
// their PUBLISH ran after this one, their GET after the write.
func (rs *refills) marked(c *localcache.Cache, token string) {
	n, err := strconv.ParseUint(token, 10, 64)
	if err != nil {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.pending[n]
	if !ok {
		return
	}
	// Bump before end closes done: the writer may return as soon as it is.
	c.InvalidateKey(r.key)
	for _, o := range rs.pending {
		if o != r && o.stripe == r.stripe {
			o.absorbed++
		}
	}
	r.marked = true
	rs.end(n, r)
}

// bumpedAtMark reports whether r's mark came and bumped r's key (marked),
// so that its writer must not bump again. Only once done is closed is the
// answer settled; before, the writer bumps, and a mark arriving after that
// bumps once more, which hides more but never less.
func (r *refill) bumpedAtMark() bool {
	select {
	case <-r.done:
		return r.marked
	default:
		return false
	}
}

// fail ends every pending refill without its mark: the invalidation
// connection was lost, so invalidations may have been missed and marks
// will not come.
func (rs *refills) fail() {
	if rs.waiting.Load() == 0 {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for n, r := range rs.pending {
		rs.end(n, r)
	}
}

func (rs *refills) end(token uint64, r *refill) {
	delete(rs.pending, token)
	rs.waiting.Add(-1)
	if endHook != nil {
		endHook(r)
	}
	close(r.done)
}

// refillWrite sends cmd, a non-blocking write of key on shard s, as a
// write-through refill when the shard tracks and either the cache holds
// key's GET reply from s, or the write (name) leaves a string or nothing
// and key is hot or being refilled by another write (whose own
// invalidation has hidden the cached reply: without a refill of its own,
// this write's bump would refuse the other's and leave the key uncached
// until a read refills it), and reports whether it did. When it did not,
// the caller sends the write its usual way and invalidates the key. When
// it did, the write has run (cmd holds its reply) and the key's counter
// has been bumped after the write ran (at its mark or by refillWrite:
// rule 4 of docs/hot-reads.md), a bump the refill absorbs, so the caller
// must not bump again: that would hide the refill; or ctx ended first, and
// cmd holds its error: if the write was still queued it is withdrawn and
// never runs, as a command given up before it is written; if its batch
// was on its way it may still run, as with any command whose caller gave
// up, and the key was bumped all the same.
func (h *Path) refillWrite(ctx context.Context, s Backend, name, key string, cmd redis.Cmder) bool {
	hs := s.HotState()
	if InvalidationState(hs.state.Load()) != InvalidationTracking || hs.shut.Load() {
		return false
	}
	id := hs.live.Load()
	if id == 0 || !(h.cache.Holds(hs.id, key, getSubKey) || stringWrites[name] && (h.det.IsHot(key) || hs.refills.writer(key) != nil)) {
		return false
	}
	if _, kind := replyval.ValueOf(cmd); kind == 0 {
		return false // its reply could not be copied from the sender's clone
	}
	r, token, t := hs.refills.start(h.cache, hs.id, key, getSubKey)
	defer hs.refills.finish(token, r)
	if hs.live.Load() != id {
		// The invalidation connection was lost since id was read, and its
		// drop may have failed the pending refills before this one was
		// registered: nothing would end its wait but its mark. The write
		// goes its usual way.
		return false
	}
	get := redis.NewStringCmd(ctx, "get", key)
	// The key's TTL is read too (PTTL after the GET), for the refill's
	// lifetime (Path.lifetime): the key is written and read, so it is
	// worth a long one. The refill goes out in the shard's next batch of
	// tracked reads, sharing its round trip with the misses queued with
	// it. The batch is detached from ctx (its sender writes into a clone
	// of cmd); the caller waits for it or for ctx.
	w := cmd.Clone()
	req := &trackedReq{ctx: ctx, id: id, cmd: get, ttlKey: key, write: w, token: token, done: make(chan struct{})}
	hs.enqueue(req)
	select {
	case <-req.done:
	case <-ctx.Done():
		cmd.SetErr(ctx.Err())
		if hs.withdraw(req) {
			return true // never sent: the write did not run, and never will
		}
		// The write is on its way and may run yet: bump the key as after
		// any write, so that no reply cached before it is served once the
		// caller has its error, and give the refill up.
		h.cache.InvalidateKey(key)
		return true
	}
	if req.closed {
		return false // never sent (the shard is closing): the caller sends the write
	}
	replyval.SetValue(cmd, replyval.Value(w))
	cmd.SetErr(w.Err())
	resent := false
	if err := cmd.Err(); err != nil && lostConn(err) && ctx.Err() == nil && s.Client().Options().MaxRetries > 0 {
		// The connection failed under the write: send it again on the
		// shard's client, as go-redis does with a command whose
		// connection failed (the refill is given up), unless the client
		// does not retry (MaxRetries -1, which go-redis stores as 0).
		_ = s.Send(ctx, cmd, false)
		resent = true
	}
	// The write's reply is in. The key's counter is bumped before the
	// write returns (read-your-writes), whatever comes of the refill: by
	// the mark's receiver when the mark came (refills.marked, which the
	// write preceded on the server), else here; and here after a write
	// sent again, which ran after its mark.
	defer func() {
		if resent || !r.bumpedAtMark() {
			h.cache.InvalidateKey(key)
		}
	}()
	if refillHook != nil {
		refillHook(key)
	}
	rep := replyOf(get)
	if req.failed || !req.ok || req.mark.Val() < 1 || !rep.cacheable() {
		return true
	}
	// The PUBLISH reached a subscriber: the mark comes, or the connection
	// is lost and drop ends the wait (see markWait). It has mostly come
	// already (it left the server before the batch's replies): no timer
	// then.
	select {
	case <-r.done:
	default:
		timer := time.NewTimer(markWait)
		defer timer.Stop()
		select {
		case <-r.done:
		case <-timer.C:
			return true
		case <-ctx.Done():
			return true
		}
	}
	if !r.marked || hs.live.Load() != id {
		return true
	}
	life := h.lifetime(req.pttl, req.sent, rep.err)
	if life <= 0 {
		return true // the key is gone, or its TTL is: nothing to keep
	}
	// absorbed + 1: the invalidations and other writers' marks before the
	// mark, and the bump at our own mark.
	size := sizeOf(rep.val)
	if h.cache.Refill(t, r.absorbed+1, rep, size, life) {
		h.stats.refills.Add(1)
		if !h.cache.VisibleAtOnce(key, getSubKey, size) {
			h.cache.Wait()
		}
	}
	return true
}

// stringWrites are the writes that leave their key a string or delete it:
// the key's GET reply is worth refilling after them.
var stringWrites = map[string]bool{
	"set": true, "setex": true, "psetex": true, "setnx": true, "getset": true, "getdel": true, "getex": true,
	"append": true, "setrange": true, "incr": true, "incrby": true, "incrbyfloat": true, "decr": true,
	"decrby": true, "del": true, "unlink": true,
}

// lostConn reports whether err says the connection was lost under a
// command (the errors go-redis sends a command again for), not a timeout.
func lostConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// refillHook, when set (tests), runs after a refill's round trip, before
// it stores (its key may already be bumped by its mark); awaitHook when a
// miss starts waiting for a refill; endHook when a refill stops waiting
// for its mark, before its writer may go on.
var (
	refillHook func(key string)
	awaitHook  func()
	endHook    func(*refill)
)
