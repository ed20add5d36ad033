package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// ledger remembers, for every key of the workload, the last operation on
// it that the server acknowledged: a SET of a value (values only grow, key
// by key) or a DEL. Every key has one writer, so the ledger is exact; a
// write that failed leaves its key uncertain (it may or may not have
// landed) until the next acknowledged one. It is safe for concurrent use.
type ledger struct {
	keys []string
	mu   sync.Mutex // guards state
	st   []keyState
}

type keyState struct {
	seq       int64 // the value of the last acknowledged write or delete (0: none)
	deleted   bool  // the last acknowledged operation was a DEL
	uncertain bool  // the last operation failed
	pending   bool  // an operation is on its way
	written   bool  // the key was ever written (and must be cleaned up)
}

func newLedger(prefix string, n int) *ledger {
	l := &ledger{keys: make([]string, n), st: make([]keyState, n)}
	for i := range l.keys {
		l.keys[i] = prefix + strconv.Itoa(i)
	}
	return l
}

func (l *ledger) get(i int) keyState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st[i]
}

func (l *ledger) set(i int, s keyState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st[i] = s
}

// totals are what a workload did and what its checks found.
type totals struct {
	Ops, Errors atomic.Int64
	// Reads checked against the ledger; Stale ones returned an older value
	// than an acknowledged write, Missed ones nothing at all after one,
	// Resurrected ones a value from before an acknowledged delete.
	ReadsChecked, Stale, Missed, Resurrected atomic.Int64
	// At the end: the keys whose last acknowledged write (or delete) was
	// checked on the servers, and how many of them had lost it.
	FinalChecked, Lost atomic.Int64
	// Refused counts the Errors that were refusals for want of time under
	// the process's lease, the command not sent: a fenced process
	// (redshard.ErrFenced), a hold past its bound
	// (redshard.ErrHandoffInProgress), a key's move that outlived the lease
	// (context.DeadlineExceeded). A loaded machine makes them happen.
	Refused  atomic.Int64
	firstErr atomic.Pointer[error]
}

func (t *totals) fail(err error) {
	t.Errors.Add(1)
	if errors.Is(err, redshard.ErrFenced) || errors.Is(err, redshard.ErrHandoffInProgress) || errors.Is(err, context.DeadlineExceeded) {
		t.Refused.Add(1)
	}
	t.firstErr.CompareAndSwap(nil, &err)
}

// FirstError is the first error an operation returned, or nil.
func (t *totals) FirstError() error {
	if p := t.firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

// worker runs the workload until ctx ends: it writes and deletes the keys
// i with i%workers == id (its own: one writer per key keeps the ledger
// exact) and reads any key, checking each read against the ledger.
func worker(ctx context.Context, c redis.UniversalClient, l *ledger, id, workers int, t *totals) {
	rng := rand.New(rand.NewPCG(uint64(id), 42))
	var seq int64
	own := func() int { return id + workers*rng.IntN((len(l.keys)-id+workers-1)/workers) }
	// change runs one write or delete of key i: its state is recorded as
	// pending (with pending's other fields) while op runs, then as done's
	// on success, or uncertain. It reports false when the run ended.
	change := func(i int, name string, pending func(*keyState), op func() error, done func(keyState) keyState) bool {
		s := l.get(i)
		pending(&s)
		s.pending = true
		l.set(i, s)
		s.pending = false
		err := op()
		if ctx.Err() != nil {
			s.uncertain = true
			l.set(i, s)
			return false
		}
		t.Ops.Add(1)
		if err != nil {
			t.fail(fmt.Errorf("%s %s: %w", name, l.keys[i], err))
			s.uncertain = true
		} else {
			s = done(s)
		}
		l.set(i, s)
		return true
	}
	for ctx.Err() == nil {
		switch r := rng.IntN(10); {
		case r < 3: // write one of its keys
			i := own()
			seq++
			if !change(i, "SET", func(s *keyState) { s.written = true },
				func() error { return c.Set(ctx, l.keys[i], seq, 0).Err() },
				func(keyState) keyState { return keyState{seq: seq, written: true} }) {
				return
			}
		case r < 4: // delete one of its keys
			i := own()
			seq++
			if !change(i, "DEL", func(*keyState) {},
				func() error { return c.Del(ctx, l.keys[i]).Err() },
				func(s keyState) keyState { return keyState{seq: seq, deleted: true, written: s.written} }) {
				return
			}
		default: // read any key
			i := rng.IntN(len(l.keys))
			before := l.get(i) // acknowledged before the read was sent
			v, err := c.Get(ctx, l.keys[i]).Int64()
			if ctx.Err() != nil {
				return
			}
			t.Ops.Add(1)
			if err != nil && !errors.Is(err, redis.Nil) {
				t.fail(fmt.Errorf("GET %s: %w", l.keys[i], err))
				continue
			}
			if before.uncertain || before.seq == 0 {
				continue
			}
			t.ReadsChecked.Add(1)
			found := err == nil
			after := l.get(i)
			concurrent := before.pending || after.pending || after.seq != before.seq
			switch {
			case before.deleted && found && v <= before.seq:
				t.Resurrected.Add(1)
			case !before.deleted && !found && !concurrent: // else a DEL may have come first
				t.Missed.Add(1)
			case !before.deleted && found && v < before.seq:
				t.Stale.Add(1)
			}
		}
	}
}

// verify checks every key's last acknowledged operation on the servers,
// through c.
func verify(ctx context.Context, c redis.UniversalClient, l *ledger, t *totals) error {
	for i, k := range l.keys {
		s := l.get(i)
		if s.uncertain || s.seq == 0 {
			continue
		}
		v, err := c.Get(ctx, k).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("checking %s: %w", k, err)
		}
		t.FinalChecked.Add(1)
		if s.deleted != errors.Is(err, redis.Nil) || (!s.deleted && v != s.seq) {
			t.Lost.Add(1)
		}
	}
	return nil
}

// written lists the keys the workload wrote at least once.
func (l *ledger) written() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, s := range l.st {
		if s.written || s.uncertain {
			out = append(out, l.keys[i])
		}
	}
	return out
}

func (t *totals) String() string {
	return fmt.Sprintf("ops %d, errors %d; reads checked %d (stale %d, missed %d, resurrected %d); acknowledged writes checked at the end %d, lost %d",
		t.Ops.Load(), t.Errors.Load(), t.ReadsChecked.Load(), t.Stale.Load(), t.Missed.Load(), t.Resurrected.Load(),
		t.FinalChecked.Load(), t.Lost.Load())
}

// bad counts the violations: every one of them is a bug.
func (t *totals) bad() int64 {
	return t.Stale.Load() + t.Missed.Load() + t.Resurrected.Load() + t.Lost.Load()
}
