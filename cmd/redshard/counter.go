package main

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// opTrace counts the commands one worker's current operation hands to
// shard clients. A worker carries it in its context; the counting hook
// finds it there, including in the detached flights redshard runs for a
// caller (they keep the caller's context values).
type opTrace struct{ n atomic.Int64 }

type traceKey struct{}

func withTrace(ctx context.Context, t *opTrace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// shardCounter counts the commands handed to one shard's client: traced
// ones, sent for a workload operation, and untraced ones: connection setup
// (HELLO, AUTH, CLIENT SETINFO, ..., which go-redis sends on a new
// connection with the context of the command that needed it), heartbeats,
// preloading, anything a library sends on its own account.
//
// untraced GETs and SETs, the workload's commands, are counted apart
// (batched): an AutoPipeliner sends them on its own context, and the
// report counts them as the load they are.
type shardCounter struct {
	name                      string
	traced, untraced, batched atomic.Int64
	watched, watchedMGet      atomic.Int64 // GETs, MGETs naming the watched key
}

// counters holds a shardCounter per shard name. It is safe for concurrent
// use.
type counters struct {
	watch  string     // a key whose reads are counted apart ("": none); set before hooks are made
	mu     sync.Mutex // guards byName
	byName map[string]*shardCounter
}

func newCounters() *counters { return &counters{byName: map[string]*shardCounter{}} }

// hook returns a redis.Hook that counts every command (each command of a
// pipeline) handed to the client of the shard called name.
func (c *counters) hook(name string) redis.Hook {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.byName[name]
	if sc == nil {
		sc = &shardCounter{name: name}
		c.byName[name] = sc
	}
	return countingHook{sc, c.watch}
}

// shardCount is a snapshot of one shardCounter.
type shardCount struct {
	name                      string
	traced, untraced, batched int64
	watched, watchedMGet      int64
}

// snapshot returns the counts of every shard seen so far, sorted by name.
func (c *counters) snapshot() []shardCount {
	c.mu.Lock()
	out := make([]shardCount, 0, len(c.byName))
	for _, sc := range c.byName {
		out = append(out, shardCount{sc.name, sc.traced.Load(), sc.untraced.Load(), sc.batched.Load(), sc.watched.Load(), sc.watchedMGet.Load()})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b shardCount) int { return cmp.Compare(a.name, b.name) })
	return out
}

// reset sets every count to zero.
func (c *counters) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sc := range c.byName {
		sc.traced.Store(0)
		sc.untraced.Store(0)
		sc.batched.Store(0)
		sc.watched.Store(0)
		sc.watchedMGet.Store(0)
	}
}

type countingHook struct {
	c     *shardCounter
	watch string
}

func (h countingHook) count(ctx context.Context, cmds ...redis.Cmder) {
	var n, setup, work int64
	for _, c := range cmds {
		switch {
		case connectionSetup(c):
			setup++
		case c.Name() == "get" || c.Name() == "set" || c.Name() == "mget":
			work++
			n++
			if h.watch != "" && c.Name() != "set" && namesKey(c, h.watch) {
				if c.Name() == "mget" {
					h.c.watchedMGet.Add(1)
				} else {
					h.c.watched.Add(1)
				}
			}
		default:
			n++
		}
	}
	t, ok := ctx.Value(traceKey{}).(*opTrace)
	if !ok {
		h.c.untraced.Add(n - work + setup)
		h.c.batched.Add(work)
		return
	}
	h.c.untraced.Add(setup)
	if n > 0 {
		t.n.Add(n)
		h.c.traced.Add(n)
	}
}

// namesKey reports whether one of cmd's arguments after its name is key.
func namesKey(cmd redis.Cmder, key string) bool {
	for _, a := range cmd.Args()[1:] {
		if s, ok := a.(string); ok && s == key {
			return true
		}
	}
	return false
}

// connectionSetup reports whether cmd configures a connection rather than
// serving an operation (CLIENT TRACKING and CACHING before a tracked read
// included): such commands are counted as untraced.
func connectionSetup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "auth", "client", "select", "readonly":
		return true
	}
	return false
}

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(ctx, cmd)
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(ctx, cmds...)
		return next(ctx, cmds)
	}
}

// timeline samples the traced commands of every shard each step.
type timeline struct {
	step   time.Duration
	series map[string][]int64 // shard name -> commands per step
	steps  int
}

// sampler records a timeline of c until stop is closed, then returns it
// through done. The partial step before stop is left out.
func sampler(c *counters, step time.Duration, stop <-chan struct{}) <-chan *timeline {
	done := make(chan *timeline, 1)
	go func() {
		tl := &timeline{step: step, series: map[string][]int64{}}
		last := map[string]int64{}
		sample := func() {
			for _, s := range c.snapshot() {
				ser := tl.series[s.name]
				for len(ser) < tl.steps {
					ser = append(ser, 0) // a shard added since the start
				}
				tl.series[s.name] = append(ser, s.traced-last[s.name])
				last[s.name] = s.traced
			}
			tl.steps++
		}
		t := time.NewTicker(step)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				sample()
			case <-stop:
				done <- tl
				return
			}
		}
	}()
	return done
}
