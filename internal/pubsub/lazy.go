package pubsub

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lazy is a client's Pub/Sub state: the Hub, made on first use. Its zero
// value is ready, so a client holds one as a field and makes the Hub (and
// its goroutine) only when a PubSub is asked for. It is safe for
// concurrent use.
type Lazy struct {
	once sync.Once
	hub  atomic.Pointer[Hub] // set by once; read by Follow without it
}

// Front returns the front client of the Hub (Hub.Front), making the Hub
// of newHost() on the first call. After the client's Close it is closed,
// so its PubSubs report redis.ErrClosed.
func (l *Lazy) Front(newHost func() Host) *redis.Client {
	l.once.Do(func() { l.hub.Store(NewHub(newHost())) })
	return l.hub.Load().Front()
}

// Follow is Hub.Follow of the Hub, if one was made; else it does nothing
// (no PubSub, no subscription to move).
func (l *Lazy) Follow(ctx context.Context) {
	if h := l.hub.Load(); h != nil {
		h.Follow(ctx)
	}
}

// FollowRing is Hub.FollowRing of the Hub, if one was made; else it does
// nothing.
func (l *Lazy) FollowRing(ctx context.Context, r Ring) {
	if h := l.hub.Load(); h != nil {
		h.FollowRing(ctx, r)
	}
}

// The probe of a link when the client's heartbeat is off: a PING after 3s
// without traffic, as go-redis's own PubSub health check, answered within
// 3s, go-redis's default ReadTimeout.
const (
	defaultProbeInterval = 3 * time.Second
	defaultProbeTimeout  = 3 * time.Second
	minProbeInterval     = 500 * time.Millisecond
	minProbeTimeout      = time.Second
)

// ProbeTimes returns the probe times (Host.ProbeTimes) of a client whose
// heartbeat (if on) has the given interval and timeout: those, at least
// 500ms and 1s, or 3s and 3s when the heartbeat is off.
func ProbeTimes(heartbeat bool, interval, timeout time.Duration) (time.Duration, time.Duration) {
	if !heartbeat {
		return defaultProbeInterval, defaultProbeTimeout
	}
	// Floors: a silence shorter than 1.5 s is more often a loaded machine
	// than a dead connection, and a false failure costs a resubscription
	// (messages published meanwhile are lost).
	return max(interval, minProbeInterval), max(timeout, minProbeTimeout)
}
