package redshard

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/flight"
	"github.com/redshard/redshard/internal/hot"
)

// SplitCopyPrefix starts the name of every split copy of a hot key:
// SplitCopyPrefix + a random tag of the client that made it + ":" + key.
// Copies live on other shards than the key's owner and expire on their own;
// Rebalance leaves them where they are. Do not use keys with this prefix
// for data.
const SplitCopyPrefix = "redshard:copy:"

// The hot-key layer (internal/hot) has its own copies of the public enums
// and constants above; these fail to compile if one differs.
var (
	_ = [1]struct{}{}[LocalCache-Mitigation(hot.LocalCache)]
	_ = [1]struct{}{}[SplitCopies-Mitigation(hot.SplitCopies)]
	_ = [1]struct{}{}[TrackingAuto-Tracking(hot.TrackingAuto)]
	_ = [1]struct{}{}[TrackingOff-Tracking(hot.TrackingOff)]
	_ = [1]struct{}{}[TrackingOn-Tracking(hot.TrackingOn)]
	_ = [1]struct{}{}[InvalidationUnprobed-InvalidationState(hot.InvalidationUnprobed)]
	_ = [1]struct{}{}[InvalidationTracking-InvalidationState(hot.InvalidationTracking)]
	_ = [1]struct{}{}[InvalidationStalenessOnly-InvalidationState(hot.InvalidationStalenessOnly)]
	_ = [1]struct{}{}[InvalidationOff-InvalidationState(hot.InvalidationOff)]
	_ = map[bool]int{false: 0, SplitCopyPrefix == hot.SplitCopyPrefix: 1}
)

// hotRouter routes a command of the hot-key layer on top, as the
// dispatcher routes a command that is not a plain keyed one (routeOther).
type hotRouter func(ctx context.Context, top *topology, cmd redis.Cmder, info command.Info, keys []int) error

// newHotPath builds the hot-key layer from resolved options: the root's
// side of its seam (hot.Env, and the hotTopology and hotBackend views).
// current returns the client's current topology; route is the
// dispatcher's.
func newHotPath(opt *hotConfig, flights *flight.Runner, current func() *topology, route hotRouter) (*hot.Path, error) {
	env := hot.Env{
		Flights: flights,
		EachShard: func(fn func(*hot.Shard)) {
			for _, s := range current().sources() {
				if x := s.hot.Load(); x != nil {
					fn(x)
				}
			}
		},
		IndexInternal:  indexInternal,
		DeleteInternal: deleteInternal,
		Route: func(ctx context.Context, t hot.Topology, rest redis.Cmder) error {
			// On top, which the caller counts in flight: entering again
			// could route it on a newer ring whose first move waits for
			// this very command.
			top := (*topology)(t.(*hotTopology))
			info, keys, err := command.Lookup(rest.Args(), nil)
			if err == nil {
				err = route(ctx, top, rest, info, keys)
			}
			return err
		},
	}
	h, err := hot.New(env, &hot.Config{
		Mitigation:      hot.Mitigation(opt.Mitigation),
		MaxStaleness:    opt.MaxStaleness,
		TrackedLifetime: opt.trackedLifetime,
		Detector:        opt.Detector,
		CacheBytes:      opt.CacheBytes,
		Copies:          opt.Copies,
		Tracking:        hot.Tracking(opt.Tracking),
	})
	if ce := (*hot.ConfigError)(nil); errors.As(err, &ce) {
		return nil, invalid(ErrInvalidHotKeyOptions, "HotKeys."+ce.Field, "%v", ce.Err)
	}
	return h, err
}

// hotTopology is a topology as the hot-key layer sees it (hot.Topology).
// A conversion, (*hotTopology)(top), costs nothing.
type hotTopology topology

func (t *hotTopology) Epoch() uint64        { return t.epoch }
func (t *hotTopology) Guarded() bool        { return t.guarded }
func (t *hotTopology) Owner(key string) int { return t.ring.LookupIndex(key) }

func (t *hotTopology) Replicas(key string, buf []int, n int) []int {
	return t.ring.ReplicaIndexes(key, buf, n)
}

// Shard returns the backend of shard i: one value per server, whichever
// topology it is in.
func (t *hotTopology) Shard(i int) hot.Backend { return (*hotBackend)(t.shards[i].backend) }

// hotBackend is a backend as the hot-key layer sees it (hot.Backend).
type hotBackend backend

func (b *hotBackend) Client() *redis.Client { return b.client }
func (b *hotBackend) Down() bool            { return b.down.Load() }
func (b *hotBackend) HotState() *hot.Shard  { return (*backend)(b).hotState() }

func (b *hotBackend) Send(ctx context.Context, cmd redis.Cmder, blocking bool) error {
	return (*backend)(b).send(ctx, cmd, blocking)
}

func (b *hotBackend) HeartbeatClient() *redis.Client { return (*backend)(b).heartbeatClient() }
func (b *hotBackend) AutoPipelined() bool            { return b.ap != nil }
func (b *hotBackend) PeekClock() *atomic.Uint32      { return b.peekClock }

// Dial makes the tracked reads' client (connReader) or the invalidation
// subscriber's (connTracking) of the shard. The reader's connections are
// failFast's, as the command client's are: markDown severs them, so that
// a batch of tracked reads in flight to a frozen server ends with the
// shard's ErrShardDown instead of waiting for the server or the batch's
// bound. The subscriber probes its own connection, as a Pub/Sub link does.
func (b *hotBackend) Dial(subscriber bool, onConnect func(context.Context, *redis.Conn) error) *redis.Client {
	if subscriber {
		return b.env.dial(b.shard, connTracking, onConnect)
	}
	// The heartbeat starts with the first dial of any client that carries
	// data: a client whose reads are all tracked may never dial the
	// command client.
	cl := b.env.dial(b.shard, connReader, onConnect, b.env.monitor.Hook())
	cl.AddHook(failFast{(*backend)(b)})
	return cl
}

// hotState returns the backend's hot-key state, creating it on first use.
// It must only be called while the hot-key layer is on (c.hot != nil).
func (b *backend) hotState() *hot.Shard {
	if hs := b.hot.Load(); hs != nil {
		return hs
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if hs := b.hot.Load(); hs != nil {
		return hs
	}
	// A closed backend's state never opens a connection.
	hs := b.env.hot.NewShard((*hotBackend)(b), b.closed)
	b.hot.Store(hs)
	return hs
}
