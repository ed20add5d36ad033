package hot

import (
	"context"
	"github.com/redshard/redshard/internal/parallel"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
)

// Pipe is the hot-key layer's part in one pipeline (not a transaction)
// with LocalCache: it answers the reads that a single command would have
// answered from the local cache, and keeps the pipeline's order for them.
// It belongs to one processPipeline call (the root's) and is not safe for
// concurrent use; a nil *Pipe answers nothing.
//
// A read of a key answered from the cache must not miss a write made
// earlier in the same pipeline (SET k v2; GET k reads v2), which is sent to
// the shard and evicts the cached reply only when the pipeline is done. So
// a read is answered locally only when no earlier command of the pipeline
// may have written its key; and a read that misses the cache, of a key that
// a later command may write, is read before the pipeline is sent, so that
// it sees the key as it was before, as on one connection.
type Pipe struct {
	h   *Path
	top Topology

	written map[string]struct{} // keys named by the pipeline's writes so far
	anyKey  bool                // a command so far may have written keys it does not name

	misses []pipeMiss     // reads answered locally that missed the cache
	along  sync.WaitGroup // the misses read beside the shard pipelines
}

// pipeMiss is a read of key on shard s to answer by cachedRead.
type pipeMiss struct {
	s        Backend
	key, sub string
	cmd      redis.Cmder
}

// Pipeline returns the hot-key layer's part in a pipeline routed on top,
// or nil when it answers nothing locally: no LocalCache (h may be nil), or
// a membership change being handed off, whose reads must go through the
// handoff as hot MGET's do.
func (h *Path) Pipeline(top Topology) *Pipe {
	if h == nil || h.cache == nil || top.Guarded() {
		return nil
	}
	return &Pipe{h: h, top: top}
}

// Answer is told of every command of the pipeline, in order, before it is
// routed (lookupErr is command.Lookup's error). It reports whether the
// command is answered locally: a supported read of one hot key whose owner
// is up, as Process would answer it alone (see cacheable and replyKind),
// and that no earlier command of the pipeline may have written. A cache
// hit is answered at once; a miss is read by Start.
func (p *Pipe) Answer(info command.Info, cmd redis.Cmder, keys []int, lookupErr error) bool {
	if p == nil {
		return false
	}
	args := cmd.Args()
	if lookupErr != nil {
		p.anyKey = true // on one shard it is sent as it is, and may write anything
		return false
	}
	if info.MayWrite() {
		p.wrote(info, args, keys)
		return false
	}
	if p.anyKey || len(keys) != 1 || (info.Class != command.Keyed && info.Class != command.Split) ||
		!cacheable[info.Name] {
		return false
	}
	kind := replyKind(cmd)
	if kind == 0 {
		return false
	}
	key := command.Arg(args[keys[0]])
	if _, ok := p.written[key]; ok {
		return false
	}
	s := p.top.Shard(p.top.Owner(key))
	if s.Down() {
		return false // the down shard's error, or its stand-in, as for a single read
	}
	// A command answered here is counted here: routing counts only the
	// commands it routes. Keys that are not hot go as a single read's do
	// (Process, unhotRead), but a shard is not probed for tracking here.
	hs, sub := s.HotState(), subKey(kind, info.Name, args, keys[0])
	if !p.h.det.IsHot(key) {
		if !p.h.cachesUnhot(nil, s) {
			return false
		}
		if p.h.unhotHit(s, hs, key, sub, cmd) {
			return true
		}
		if !p.h.admitsUnhot(s, key) {
			return false // routed with the pipeline, and counted there
		}
		p.h.det.ObserveHot(key)
	} else {
		p.h.det.ObserveHot(key)
		if p.h.hit(hs, key, sub, cmd) {
			return true
		}
	}
	p.misses = append(p.misses, pipeMiss{s: s, key: key, sub: sub, cmd: cmd})
	return true
}

// wrote notes a command that may write: the keys it names, or, for one
// that names none or is not a keyed command (FLUSHDB, EVAL with no key,
// SELECT, a command the table does not know), every key.
func (p *Pipe) wrote(info command.Info, args []interface{}, keys []int) {
	switch {
	case info.Name == "ping" || info.Name == "echo":
	case len(keys) == 0 || info.Class != command.Keyed && info.Class != command.Split && info.Class != command.Channel:
		p.anyKey = true
	default:
		if p.written == nil {
			p.written = make(map[string]struct{}, len(keys))
		}
		for _, k := range keys {
			p.written[command.Arg(args[k])] = struct{}{}
		}
	}
}

// Start reads the misses of the pipeline, each as a single read would (one
// shared read per key that fills the cache). Those of keys a command of the
// pipeline may write are read before Start returns, and must be before the
// pipeline is sent; the others run beside it, until Wait.
func (p *Pipe) Start(ctx context.Context) {
	if p == nil || len(p.misses) == 0 {
		return
	}
	// Partition in place: the misses to read first, then the others.
	first := 0
	for i, m := range p.misses {
		if _, ok := p.written[m.key]; ok || p.anyKey {
			p.misses[first], p.misses[i] = p.misses[i], p.misses[first]
			first++
		}
	}
	p.read(ctx, p.misses[:first])
	if along := p.misses[first:]; len(along) > 0 {
		p.along.Go(func() { p.read(ctx, along) })
	}
}

// read answers misses, in parallel.
func (p *Pipe) read(ctx context.Context, misses []pipeMiss) {
	parallel.Run(len(misses), func(i int) {
		m := misses[i]
		_ = p.h.cachedRead(ctx, p.top, m.s, m.key, m.sub, m.cmd)
	})
}

// Wait returns once every miss that Start left running has its reply.
func (p *Pipe) Wait() {
	if p != nil {
		p.along.Wait()
	}
}
