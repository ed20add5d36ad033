package health

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxOutageKeys bounds an Outage: keys written to stand-ins beyond it are
// not recorded (their TTL there, capped by the caller, still ends them).
const MaxOutageKeys = 1 << 20

// cleanTimeout bounds one round of an outage's cleanup.
const cleanTimeout = 30 * time.Second

// Outage records the keys written to stand-ins while a server is down. Its
// zero value is ready; it is safe for concurrent use. The server's down
// flag is the caller's (each method takes it): Record reads it and MarkUp
// clears it under the same lock.
type Outage struct {
	mu sync.Mutex
	on map[string]*redis.Client // guarded by mu: key -> the stand-in's command client it was written to
}

// Record remembers that key is written to standIn (its command client)
// while the server is down. It reports false, recording nothing, once the
// server is up again (down is false): the write must then go to the
// server, since the cleanup that ran before it came up did not see key.
func (o *Outage) Record(down *atomic.Bool, key string, standIn *redis.Client) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !down.Load() {
		return false
	}
	if o.on == nil {
		o.on = map[string]*redis.Client{}
	}
	if len(o.on) < MaxOutageKeys {
		o.on[key] = standIn
	}
	return true
}

// MarkUp clears down once every key recorded is deleted, on the returning
// server (through home, a client that dials while the server is still
// marked down; nil if it is closed) and on its stand-in. The cleanup runs
// until a round finds nothing new, at most 8 rounds; the last check and
// the mark are made under the lock every Record takes, so no stand-in
// write can slip in between. It returns how many keys it deleted, with an
// error if it gave up (the keys of a failed round are kept for the next
// try); name is the server's, for that error.
func (o *Outage) MarkUp(down *atomic.Bool, home func() *redis.Client, name string) (cleaned int, err error) {
	for range 8 {
		n, err := o.clean(home)
		cleaned += n
		if err != nil {
			return cleaned, err
		}
		o.mu.Lock()
		if len(o.on) == 0 {
			down.Store(false)
			o.mu.Unlock()
			return cleaned, nil
		}
		o.mu.Unlock()
	}
	return cleaned, fmt.Errorf("redshard: writes to stand-ins keep coming while shard %s returns", name)
}

// clean deletes, on home and on the stand-ins, every key recorded so far,
// and returns how many.
func (o *Outage) clean(home func() *redis.Client) (int, error) {
	o.mu.Lock()
	keys := o.on
	o.on = nil
	o.mu.Unlock()
	if len(keys) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanTimeout)
	defer cancel()
	all := make([]string, 0, len(keys))
	byStandIn := map[*redis.Client][]string{}
	for k, s := range keys {
		all = append(all, k)
		byStandIn[s] = append(byStandIn[s], k)
	}
	err := redis.ErrClosed
	if cl := home(); cl != nil {
		err = del(ctx, cl, all)
	}
	for cl, ks := range byStandIn {
		if err != nil {
			break
		}
		err = del(ctx, cl, ks)
	}
	if err != nil {
		o.putBack(keys)
		return 0, err
	}
	return len(keys), nil
}

// del deletes keys on cl, 500 at a time.
func del(ctx context.Context, cl *redis.Client, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := cl.Del(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// putBack records keys again, for the next attempt.
func (o *Outage) putBack(keys map[string]*redis.Client) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.on == nil {
		o.on = map[string]*redis.Client{}
	}
	for k, s := range keys {
		o.on[k] = s
	}
}
