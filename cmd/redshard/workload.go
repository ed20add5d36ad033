package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// workload describes the operations the load generator sends: single-key
// GETs (or MGETs, --mget) and SETs on a fixed key set.
type workload struct {
	kind           string // uniform, zipf or celebrity
	mget           int    // > 1: a read is an MGET of that many keys
	zipfS          float64
	celebrityShare float64
	keys           int
	readRatio      float64
	valueSize      int
	concurrency    int
	prefix         string
	seed           uint64
}

func (w *workload) register(f *flags, defaultKind string) {
	f.StringVar(&w.kind, "workload", defaultKind, "key popularity: uniform, zipf or celebrity (one key takes --celebrity-share of the operations, the rest are uniform)")
	f.Float64Var(&w.zipfS, "zipf-s", 1.1, "Zipf exponent s (> 0): key of rank k is chosen with probability proportional to 1/k^s (YCSB's is 0.99)")
	f.Float64Var(&w.celebrityShare, "celebrity-share", 0.3, "fraction of the operations on the celebrity key (--workload celebrity)")
	f.IntVar(&w.keys, "keys", 100000, fmt.Sprintf("number of distinct keys, 2 to %d (their names are held in memory)", maxKeys))
	f.Float64Var(&w.readRatio, "read-ratio", 0.95, "fraction of operations that are GETs; the others are SETs")
	f.IntVar(&w.valueSize, "value-size", 100, fmt.Sprintf("bytes per value, 0 to %d (512 MiB, Redis's largest string); with embedded shards --keys x --value-size is at most %d (%d GiB)", maxValueSize, maxEmbeddedData, maxEmbeddedData>>30))
	f.IntVar(&w.concurrency, "concurrency", 64, fmt.Sprintf("concurrent workers, each sending one operation at a time, 1 to %d", maxConcurrency))
	f.StringVar(&w.prefix, "prefix", "bench:", "prefix of every key the workload uses")
	f.Uint64Var(&w.seed, "seed", 1, "seed of the key choices (the same seed gives the same sequence per worker)")
	f.IntVar(&w.mget, "mget", 0, "N >= 2: each read is an MGET of N keys, the first chosen as --workload says (the celebrity, ...), the others uniformly among the rest")
}

// Bounds of the workload flags: beyond them a run exhausts memory (key
// names, values, per-worker latency histograms) before it measures anything.
const (
	maxKeys               = 100_000_000
	maxValueSize          = 512 << 20 // Redis's proto-max-bulk-len default
	maxConcurrency        = 10_000
	maxEmbeddedData int64 = 8 << 30 // the data set embedded shards hold in this process
)

// check validates the workload flags; embedded says the shards run in this
// process, which then holds the whole data set.
func (w *workload) check(embedded bool) error {
	switch {
	case w.kind != "uniform" && w.kind != "zipf" && w.kind != "celebrity":
		return usagef("--workload %q: want uniform, zipf or celebrity", w.kind)
	case !(w.zipfS > 0) || math.IsInf(w.zipfS, 0):
		return usagef("--zipf-s %g: must be a number greater than 0", w.zipfS)
	case !(w.celebrityShare >= 0 && w.celebrityShare <= 1):
		return usagef("--celebrity-share %g: want a fraction in [0, 1]", w.celebrityShare)
	case w.keys < 2 || w.keys > maxKeys:
		return usagef("--keys %d: want 2 to %d", w.keys, maxKeys)
	case !(w.readRatio >= 0 && w.readRatio <= 1):
		return usagef("--read-ratio %g: want a fraction in [0, 1]", w.readRatio)
	case w.valueSize < 0 || w.valueSize > maxValueSize:
		return usagef("--value-size %d: want 0 to %d bytes (512 MiB, Redis's largest string)", w.valueSize, maxValueSize)
	case embedded && int64(w.keys)*int64(w.valueSize) > maxEmbeddedData:
		return usagef("--keys %d x --value-size %d is %d bytes: embedded shards hold the data in this process, at most %d (%d GiB); use fewer or smaller keys, or real servers (--config)",
			w.keys, w.valueSize, int64(w.keys)*int64(w.valueSize), int64(maxEmbeddedData), maxEmbeddedData>>30)
	case w.concurrency < 1 || w.concurrency > maxConcurrency:
		return usagef("--concurrency %d: want 1 to %d workers", w.concurrency, maxConcurrency)
	case w.mget == 1 || w.mget < 0 || w.mget > w.keys:
		return usagef("--mget %d: want 0 (GETs) or from 2 to --keys", w.mget)
	}
	return nil
}

func (w *workload) String() string {
	var what string
	switch w.kind {
	case "zipf":
		what = fmt.Sprintf("zipf s=%g", w.zipfS)
	case "celebrity":
		what = fmt.Sprintf("celebrity (%g%% on one key)", 100*w.celebrityShare)
	default:
		what = w.kind
	}
	reads := "reads"
	if w.mget > 1 {
		reads = fmt.Sprintf("reads (MGETs of %d keys)", w.mget)
	}
	return fmt.Sprintf("%s over %d keys, %g%% %s, %d-byte values, %d workers",
		what, w.keys, 100*w.readRatio, reads, w.valueSize, w.concurrency)
}

// keyNames returns the workload's keys; index 0 is the most popular one
// (the celebrity, or Zipf rank 1).
func (w *workload) keyNames() []string {
	keys := make([]string, w.keys)
	for i := range keys {
		keys[i] = w.prefix + "key:" + strconv.Itoa(i)
	}
	if w.kind == "celebrity" {
		keys[0] = w.prefix + "celebrity"
	}
	return keys
}

// generator chooses operations for one worker. Not safe for concurrent use.
type generator struct {
	w    *workload
	r    *rand.Rand
	zipf *rand.Zipf   // s > 1
	rank *zipfSampler // s <= 1, which rand.Zipf does not draw
}

func (w *workload) generator(worker int) *generator {
	g := &generator{w: w, r: rand.New(rand.NewPCG(w.seed, uint64(worker)))}
	switch {
	case w.kind != "zipf":
	case w.zipfS > 1:
		// rand.Zipf for the exponents it draws: the sequences of a seed
		// stay those of earlier versions.
		g.zipf = rand.NewZipf(g.r, w.zipfS, 1, uint64(w.keys-1))
	default:
		g.rank = newZipfSampler(g.r, w.zipfS, uint64(w.keys))
	}
	return g
}

// next returns the index of the next key and whether the operation writes.
func (g *generator) next() (key int, write bool) {
	write = g.r.Float64() >= g.w.readRatio
	switch g.w.kind {
	case "zipf":
		if g.rank != nil {
			return int(g.rank.rank() - 1), write
		}
		return int(g.zipf.Uint64()), write
	case "celebrity":
		if g.r.Float64() < g.w.celebrityShare {
			return 0, write
		}
		return 1 + g.r.IntN(g.w.keys-1), write
	}
	return g.r.IntN(g.w.keys), write
}

// mgetKeys fills names with the keys of an MGET whose first key is
// keys[first]: the others are chosen uniformly among keys[1:] (the
// celebrity, or the Zipf rank 1, only ever comes first).
func (g *generator) mgetKeys(names, keys []string, first int) []string {
	names = append(names[:0], keys[first])
	for len(names) < g.w.mget {
		names = append(names, keys[1+g.r.IntN(len(keys)-1)])
	}
	return names
}

// preload writes every key once through c, so the workload's reads hit.
func preload(ctx context.Context, c redis.Cmdable, keys []string, value string) error {
	const batch = 1000
	var (
		mu     sync.Mutex
		first  error
		wg     sync.WaitGroup
		next   atomic.Int64
		panics workerPanics
	)
	for range 8 {
		wg.Go(func() {
			defer panics.catch()
			for {
				lo := int(next.Add(batch)) - batch
				if lo >= len(keys) || ctx.Err() != nil {
					return
				}
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for _, k := range keys[lo:min(lo+batch, len(keys))] {
						p.Set(ctx, k, value, 0)
					}
					return nil
				})
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	panics.repanic()
	if first != nil {
		return fmt.Errorf("preloading %d keys: %w", len(keys), first)
	}
	return ctx.Err()
}

// tally is what the workers of a run counted. Each worker fills its own;
// they are merged at the end.
type tally struct {
	ops, reads, writes, hits, misses int64
	// Accounting against the shard hooks: an operation that handed no
	// command to a shard client was served locally (no error) or refused
	// (an error); one that handed several counts the extra ones.
	local, refused, extra int64
	errs                  map[string]int64
	hist                  histogram
}

func (t *tally) merge(o *tally) {
	t.ops += o.ops
	t.reads += o.reads
	t.writes += o.writes
	t.hits += o.hits
	t.misses += o.misses
	t.local += o.local
	t.refused += o.refused
	t.extra += o.extra
	if t.errs == nil {
		t.errs = map[string]int64{}
	}
	for k, v := range o.errs {
		t.errs[k] += v
	}
	t.hist.merge(&o.hist)
}

func (t *tally) errors() int64 {
	var n int64
	for _, v := range t.errs {
		n += v
	}
	return n
}

// loadRun is a running workload.
type loadRun struct {
	wg      sync.WaitGroup
	tallies []*tally
	traces  []*opTrace
	panics  workerPanics
}

// workerPanics keeps the first panic of a group of goroutines, so that the
// goroutine waiting for them can re-raise it where run recovers it (a panic
// left in a worker would kill the process with the exit status of a usage
// error). It is safe for concurrent use.
type workerPanics struct {
	mu    sync.Mutex // guards first
	first any
}

// catch, deferred by a worker, records its panic.
func (p *workerPanics) catch() {
	if r := recover(); r != nil {
		p.mu.Lock()
		if p.first == nil {
			p.first = fmt.Sprintf("%v\n\nin a worker goroutine:\n%s", r, debug.Stack())
		}
		p.mu.Unlock()
	}
}

// repanic re-raises the recorded panic, if any, once the workers stopped.
func (p *workerPanics) repanic() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first != nil {
		panic(p.first)
	}
}

// load starts the workload's workers against c; they run until stop is
// closed or ctx is done. ops, if not nil, counts operations as they
// complete.
// kv is what the workload's operations need of a client; redis.Cmdable
// has it.
type kv interface {
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value interface{}, expiration time.Duration) *redis.StatusCmd
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

func load(ctx context.Context, c kv, w *workload, keys []string, value string, stop <-chan struct{}, ops *atomic.Int64) *loadRun {
	run := &loadRun{tallies: make([]*tally, w.concurrency), traces: make([]*opTrace, w.concurrency)}
	wg := &run.wg
	for i := range w.concurrency {
		t := &tally{errs: map[string]int64{}}
		tr := &opTrace{}
		run.tallies[i], run.traces[i] = t, tr
		g := w.generator(i)
		wctx := withTrace(ctx, tr)
		var names []string // an MGET's keys
		wg.Go(func() {
			defer run.panics.catch()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				k, write := g.next()
				start := time.Now()
				var err error
				switch {
				case write:
					err = c.Set(wctx, keys[k], value, 0).Err()
				case w.mget > 1:
					names = g.mgetKeys(names, keys, k)
					err = c.MGet(wctx, names...).Err() // nil values are no error
				default:
					err = c.Get(wctx, keys[k]).Err()
				}
				t.hist.record(time.Since(start))
				n := tr.n.Swap(0)
				t.ops++
				if write {
					t.writes++
				} else {
					t.reads++
					switch {
					case err == nil:
						t.hits++
					case errors.Is(err, redis.Nil):
						t.misses++
						err = nil
					}
				}
				switch {
				case n == 0 && err == nil:
					t.local++
				case n == 0:
					t.refused++
				case n > 1:
					t.extra += n - 1
				}
				if err != nil {
					t.errs[errorKind(err)]++
				}
				if ops != nil {
					ops.Add(1)
				}
			}
		})
	}
	return run
}

// wait waits for the workers to stop; a worker's panic goes on in the
// caller.
func (r *loadRun) wait() {
	r.wg.Wait()
	r.panics.repanic()
}

// total returns the workers' merged tally, once they have stopped. Commands
// charged to a worker's trace after its last operation returned (by a
// flight that outlived it) count as extra; call total after closing the
// client, which waits for such flights.
func (r *loadRun) total() *tally {
	total := &tally{errs: map[string]int64{}}
	for i, t := range r.tallies {
		total.merge(t)
		total.extra += r.traces[i].n.Swap(0)
	}
	return total
}

// errorKind names the kind of a failed operation for the error table.
func errorKind(err error) string {
	var ne net.Error
	var re redis.Error
	switch {
	case errors.Is(err, redshard.ErrShardDown):
		return "shard down (ErrShardDown)"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, redis.ErrPoolTimeout):
		return "pool timeout"
	case errors.Is(err, redis.ErrClosed):
		return "client closed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection lost"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &re):
		// A server error: its first word (ERR, WRONGTYPE, LOADING, ...).
		word, _, _ := strings.Cut(re.Error(), " ")
		return "server " + word
	}
	msg := err.Error()
	if len(msg) > 60 {
		msg = msg[:60] + "..."
	}
	return "other: " + msg
}
