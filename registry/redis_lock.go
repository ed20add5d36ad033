package registry

import (
	"context"
	"fmt"
	"github.com/redis/go-redis/v9"
	"sync"
	"time"
)

// The driver lock is a hash {token, owner, until}: until is its expiry in
// the server's clock (milliseconds), checked by every script, so it holds
// on servers that do not expire keys in real time; PEXPIRE removes a
// forgotten lock as well. KEYS[1] is the lock.

// lockScript takes the lock: KEYS[2] (if any) RedisIndexKey; ARGV token,
// owner, ttl ms. Returns 1, or the holder's owner.
var lockScript = redis.NewScript(clock + `
local cur = redis.call('HMGET', KEYS[1], 'owner', 'until')
if cur[1] and tonumber(cur[2]) > now then return cur[1] end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'owner', ARGV[2], 'until', now + tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if KEYS[2] then redis.call('SADD', KEYS[2], KEYS[1]) end
return 1
`)

// renewScript extends the lock if it is still token's: ARGV token, ttl ms.
// Returns 1 if extended, 0 if lost.
var renewScript = redis.NewScript(clock + `
local cur = redis.call('HMGET', KEYS[1], 'token', 'until')
if cur[1] ~= ARGV[1] or tonumber(cur[2]) <= now then return 0 end
redis.call('HSET', KEYS[1], 'until', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// unlockScript deletes the lock if it is token's: ARGV token. Returns 1 if
// it was held, 2 if it was token's but had expired, 0 if not token's.
var unlockScript = redis.NewScript(clock + `
local cur = redis.call('HMGET', KEYS[1], 'token', 'until')
if cur[1] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if tonumber(cur[2]) <= now then return 2 end
return 1
`)

func (r *redisRegistry) Lock(ctx context.Context, owner string, ttl time.Duration) (DriverLock, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if owner == "" || ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: lock owner %q, ttl %v: want an owner and a ttl of at least 1ms", ErrInvalidArgument, owner, ttl)
	}
	l := &redisLock{
		r: r, token: randomToken(), ttl: ttl,
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	sent := time.Now()
	rdb, err := r.client(ctx)
	var res any
	if err == nil {
		res, err = lockScript.Run(ctx, rdb, r.keys(r.lockKey), l.token, owner, ttl.Milliseconds()).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("registry: lock %s: %w", r.lockKey, err)
	}
	if holder, ok := res.(string); ok {
		return nil, fmt.Errorf("%w: %s is held by %q", ErrLocked, r.lockKey, holder)
	}
	r.mu.Lock()
	r.locks[l] = struct{}{}
	r.mu.Unlock()
	if err := r.start(func() { l.renew(sent) }); err != nil {
		close(l.done)
		_ = l.Unlock(ctx)
		return nil, err
	}
	return l, nil
}

// redisLock is a held Redis driver lock.
type redisLock struct {
	r     *redisRegistry
	token string
	ttl   time.Duration

	lost     chan struct{} // closed by markLost
	lostOnce sync.Once
	stop     chan struct{} // closed by Unlock: the renewer stops
	done     chan struct{} // closed when the renewer has stopped

	unlockOnce sync.Once
	unlockErr  error // set in unlockOnce
}

func (l *redisLock) Lost() <-chan struct{} { return l.lost }

func (l *redisLock) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// renew extends the lock every ttl/3 until Unlock or Close. The lock is
// counted on only until ttl after the last renewal was sent: when that is
// nearer than the next renewal, or the server says the lock is gone, it is
// lost.
func (l *redisLock) renew(lastSent time.Time) {
	defer close(l.done)
	every := l.ttl / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.r.ctx.Done():
			l.markLost()
			return
		case <-tick.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(l.r.ctx, lastSent.Add(l.ttl))
		n, err := l.renewOnce(ctx)
		cancel()
		switch {
		case err == nil && n == 1:
			lastSent = sent
		case err == nil, time.Until(lastSent.Add(l.ttl)) < every:
			l.markLost()
			return
		}
	}
}

// renewOnce sends one renewal, bounded by ctx.
func (l *redisLock) renewOnce(ctx context.Context) (int, error) {
	rdb, err := l.r.client(ctx)
	if err != nil {
		return 0, err
	}
	return renewScript.Run(ctx, rdb, []string{l.r.lockKey}, l.token, l.ttl.Milliseconds()).Int()
}

func (l *redisLock) Unlock(ctx context.Context) error {
	l.unlockOnce.Do(func() {
		close(l.stop)
		<-l.done
		l.markLost()
		l.r.mu.Lock()
		delete(l.r.locks, l)
		l.r.mu.Unlock()
		rdb, err := l.r.client(ctx)
		var n int
		if err == nil {
			n, err = unlockScript.Run(ctx, rdb, []string{l.r.lockKey}, l.token).Int()
		}
		switch {
		case err != nil:
			l.unlockErr = fmt.Errorf("registry: unlock %s: %w", l.r.lockKey, err)
		case n != 1:
			l.unlockErr = fmt.Errorf("%w: %s had expired or been taken", ErrLockLost, l.r.lockKey)
		}
	})
	return l.unlockErr
}
