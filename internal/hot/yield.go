package hot

import (
	"math/rand/v2"
	"sync/atomic"
)

// yieldGate decides whether, on an auto-pipelined shard, the misses of
// keys that are not hot are read through the local cache (admitsUnhot),
// by the layer's own measure of what caching them yields.
//
// There the choice has a price either way. Through the cache, a miss is a
// tracked read, batched with the shard's other misses but outside the
// AutoPipeliner's batches, whose reply is filled into the cache and
// tracked by the server: it costs more client CPU than the plain GET it
// replaces in an AutoPipeliner's batch (about twice as much, going by the
// runs in docs/results.md). A hit costs almost nothing. So caching those
// keys pays when most of their reads hit. Under Zipf 1.2 about four in
// five do once the cache is warm. On the celebrity workload, whose other
// reads go to a uniform tail of a million keys read again too seldom to
// be hit, almost none do, and caching them doubled the client's CPU per
// operation for nothing served locally.
//
// So the reads of such keys on auto-pipelined shards, all of which look
// in the cache first (unhotHit), are counted in windows of yieldWindow,
// hits and misses. At the end of a window, misses are admitted in the
// next one when at least half of the window's reads were hits; when fewer
// were, one miss in yieldSample, picked at random, is, and the others are
// sent as they are, in the AutoPipeliner's batches. The sampled misses
// keep the cache learning what is read again (a key read often is cached
// after a few dozen misses at most) so that, when a workload turns skewed,
// its reads start to hit and a window turns admission back on. Starting
// on, a client caches as rueidis does until its first window says
// otherwise.
//
// The gate decides only which misses fill the cache; what a read may
// return is unchanged: a miss not admitted is a read the cache did not
// answer (see Served). Without AutoPipeline a miss through the cache is
// the cheaper one (batched, where a plain read would take a round trip of
// its own), and every miss Admit admits is read through it.
type yieldGate struct {
	window atomic.Uint64 // this window's reads<<32 | its hits
	off    atomic.Bool   // the last window's hits were under half its reads
	size   uint64        // reads per window; 0 is yieldWindow (a test's may be smaller)
}

const (
	yieldWindow = 4096 // counted reads per window
	yieldSample = 64   // while off, one miss in yieldSample is admitted
)

// admits reports whether a miss is admitted.
func (g *yieldGate) admits() bool {
	return !g.off.Load() || rand.Uint32()%yieldSample == 0
}

// count records one read: a hit or a miss.
// The read that completes a window decides the next one; reads counted
// meanwhile, before it takes the window, fall in the window it takes.
func (g *yieldGate) count(hit bool) {
	d := uint64(1) << 32
	if hit {
		d |= 1
	}
	size := g.size
	if size == 0 {
		size = yieldWindow
	}
	if g.window.Add(d)>>32 != size {
		return
	}
	w := g.window.Swap(0)
	reads, hits := w>>32, w&(1<<32-1)
	g.off.Store(2*hits < reads)
}
