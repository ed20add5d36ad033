package hot

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/flight"
)

// stubBackend is a shard with no I/O: Send answers every command OK at
// once. It is for measuring what the hot path itself costs a command.
type stubBackend struct {
	h  *Path
	hs *Shard
}

func (b *stubBackend) Client() *redis.Client { return nil }
func (b *stubBackend) Send(_ context.Context, cmd redis.Cmder, _ bool) error {
	if c, ok := cmd.(*redis.StatusCmd); ok {
		c.SetVal("OK")
	}
	return nil
}
func (b *stubBackend) Down() bool                     { return false }
func (b *stubBackend) HotState() *Shard               { return b.hs }
func (b *stubBackend) HeartbeatClient() *redis.Client { return nil }
func (b *stubBackend) AutoPipelined() bool            { return false }
func (b *stubBackend) PeekClock() *atomic.Uint32      { return nil }
func (b *stubBackend) Dial(bool, func(context.Context, *redis.Conn) error) *redis.Client {
	panic("stubBackend dials nothing")
}

type stubTopology struct{ b *stubBackend }

func (t stubTopology) Epoch() uint64                             { return 1 }
func (t stubTopology) Guarded() bool                             { return false }
func (t stubTopology) Shard(int) Backend                         { return t.b }
func (t stubTopology) Owner(string) int                          { return 0 }
func (t stubTopology) Replicas(_ string, buf []int, n int) []int { return append(buf, 0) }

// newStubPath returns a LocalCache layer over one stub shard whose
// invalidation state is st (and, with tracking, a live invalidation
// connection, so that a write reaches the refill's cache check).
func newStubPath(b *testing.B, st InvalidationState) (*Path, *stubBackend) {
	flights := flight.New()
	h, err := New(Env{Flights: flights, EachShard: func(func(*Shard)) {}},
		&Config{Mitigation: LocalCache, MaxStaleness: time.Hour, CacheBytes: 1 << 20, Tracking: TrackingOn})
	if err != nil {
		b.Fatal(err)
	}
	sb := &stubBackend{h: h}
	sb.hs = h.NewShard(sb, true)
	sb.hs.state.Store(int32(st))
	if st == InvalidationTracking {
		sb.hs.live.Store(1)
	}
	b.Cleanup(func() {
		flights.Close()
		h.Close()
	})
	return h, sb
}

// BenchmarkWriteRefillCheck is what a LocalCache client's write of a key
// that is neither cached nor hot costs on the client, I/O left out (the
// shard answers at once): Process of SET k v, which counts the key,
// decides whether to refill it (refillWrite: the shard's state, whether
// the cache holds k's GET reply, whether k is hot), sends it and bumps k.
// tracking=off: the shard does not track, so the refill check stops at its
// first test: the write path as it was before write-through refills.
// tracking=on: the whole check, as on every write on a tracking shard.
// check-only: refillWrite alone, on a tracking shard.
func BenchmarkWriteRefillCheck(b *testing.B) {
	const nkeys = 1024
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		st   InvalidationState
	}{{"tracking=off", InvalidationOff}, {"tracking=on", InvalidationTracking}} {
		b.Run(c.name, func(b *testing.B) {
			h, sb := newStubPath(b, c.st)
			top := stubTopology{sb}
			cmds := make([]*redis.StatusCmd, nkeys)
			infos := make([]command.Info, nkeys)
			idx := make([][]int, nkeys)
			for i, k := range keys {
				cmds[i] = redis.NewStatusCmd(ctx, "set", k, "v")
				info, ki, err := command.Lookup(cmds[i].Args(), nil)
				if err != nil {
					b.Fatal(err)
				}
				infos[i], idx[i] = info, ki
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				j := i % nkeys
				if err := h.Process(ctx, top, infos[j], cmds[j], idx[j], 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("check-only", func(b *testing.B) {
		h, sb := newStubPath(b, InvalidationTracking)
		cmd := redis.NewStatusCmd(ctx, "set", "k", "v")
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if h.refillWrite(ctx, sb, "set", keys[i%nkeys], cmd) {
				b.Fatal("a key neither cached nor hot was refilled")
			}
		}
	})
}

// BenchmarkRefillStore is the writer's part of a refill's store once its
// reply and mark are in: FillAbsorbing alone (store), and followed by the
// cache's Wait as refillWrite does (store+wait), which holds the write
// until ristretto's goroutine has applied the entry. replace: the key's
// GET reply was cached (the usual refill: ristretto replaces it at once);
// new: it was not (a hot key whose reply was hidden). parallel: 8
// writers per CPU at once, each on its own key.
func BenchmarkRefillStore(b *testing.B) {
	for _, par := range []bool{false, true} {
		for _, replace := range []bool{true, false} {
			for _, wait := range []bool{false, true} {
				name := "new"
				if replace {
					name = "replace"
				}
				if wait {
					name += "/store+wait"
				} else {
					name += "/store"
				}
				if par {
					name = "parallel/" + name
				}
				b.Run(name, func(b *testing.B) {
					h, sb := newStubPath(b, InvalidationTracking)
					hs := sb.hs
					rep := &reply{val: "a value of some thirty bytes.."}
					store := func(key string) {
						t := h.cache.FillTicket(hs.id, key, getSubKey)
						h.cache.InvalidateKey(key) // the writer's own bump, absorbed
						if h.cache.FillAbsorbing(t, 1, rep, sizeOf(rep.val), time.Hour) && wait {
							h.cache.Wait()
						}
					}
					// replace: each key's reply is cached before the run;
					// new: keys never cached (a fresh one per store).
					var pre []string
					if replace {
						for i := range 64 {
							k := "k" + strconv.Itoa(i)
							pre = append(pre, k)
							store(k)
						}
						h.cache.Wait()
					}
					b.ReportAllocs()
					b.ResetTimer()
					if par {
						b.SetParallelism(8)
						var n atomic.Int64
						b.RunParallel(func(pb *testing.PB) {
							me := int(n.Add(1))
							for i := 0; pb.Next(); i++ {
								if replace {
									store(pre[me%len(pre)])
								} else {
									store("n" + strconv.Itoa(me) + ":" + strconv.Itoa(i))
								}
							}
						})
						return
					}
					for i := range b.N {
						if replace {
							store(pre[i%len(pre)])
						} else {
							store("n:" + strconv.Itoa(i))
						}
					}
				})
			}
		}
	}
}
