package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisRegistry is the Redis Registry. Its mutable state is guarded by mu;
// everything else is set once by newRedis.
type redisRegistry struct {
	rdb  redis.UniversalClient
	name string
	opt  Options
	err  error // a construction error every method returns

	configKey, membersKey, memberDocsKey, lockKey string
	indexed                                       bool   // the name starts with "redshard:": scripts add the keys they write to RedisIndexKey
	channel                                       string // watchers subscribe here
	announce                                      string // Publish announces here: channel, except in tests that lose announcements

	ctx    context.Context // done when the registry is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup // watchers and lock renewers

	mu     sync.Mutex // guards closed, locks
	closed bool
	locks  map[*redisLock]struct{}
}

// NewRedis returns a Registry kept on the Redis server rdb reaches, under
// keys that start with name (see the package documentation for the layout),
// with the default Options. rdb stays the caller's: Close does not close
// it. Every call ends by its context's deadline even when rdb was built
// without ContextTimeoutEnabled, if rdb is a *redis.Client (see client);
// a ClusterClient or a Ring must have ContextTimeoutEnabled for that. With a nil rdb or an empty name every method of the registry fails
// with ErrInvalidOptions; NewRedisOptions reports that at once.
func NewRedis(rdb redis.UniversalClient, name string) Registry {
	r, _ := newRedis(rdb, name, nil)
	return r
}

// NewRedisOptions is NewRedis with Options (nil: the defaults). It fails
// with ErrInvalidOptions for a nil rdb, an empty name or invalid options.
func NewRedisOptions(rdb redis.UniversalClient, name string, opt *Options) (Registry, error) {
	r, err := newRedis(rdb, name, opt)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func newRedis(rdb redis.UniversalClient, name string, opt *Options) (*redisRegistry, error) {
	o, err := opt.WithDefaults()
	switch {
	case err != nil:
	case rdb == nil:
		err = fmt.Errorf("%w: nil Redis client", ErrInvalidOptions)
	case name == "":
		err = fmt.Errorf("%w: empty registry name", ErrInvalidOptions)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &redisRegistry{
		rdb: rdb, name: name, opt: o, err: err,
		configKey:     name + ":config",
		membersKey:    name + ":members",
		memberDocsKey: name + ":member",
		lockKey:       name + ":lock",
		channel:       name + ":announce",
		announce:      name + ":announce",
		ctx:           ctx, cancel: cancel,
		locks: map[*redisLock]struct{}{},
	}
	r.indexed = strings.HasPrefix(name, internalPrefix)
	return r, err
}

// internalPrefix starts the names of the keys a redshard client keeps to
// itself (redshard.InternalKeyPrefix; this package imports nothing of
// redshard).
const internalPrefix = "redshard:"

// RedisIndexKey names a set, on a Redis registry's server, of the keys of
// the registries kept there whose names start with "redshard:": each
// script that writes one of those keys adds it. A redshard client's
// DBSIZE leaves out the live keys it lists (and the set itself), so a
// registry that shares a data server is not counted as data; KEYS, SCAN
// and RANDOMKEY leave out every "redshard:" key anyway. The set has no
// expiry; an entry whose key is gone is dropped by the next DBSIZE. A
// registry named otherwise (a Redis Cluster's "{redshard:...}", whose keys
// must share a slot) adds nothing.
const RedisIndexKey = internalPrefix + "index:registry"

// keys returns the KEYS of a script that writes ks: ks, and RedisIndexKey
// last when the registry is indexed.
func (r *redisRegistry) keys(ks ...string) []string {
	if r.indexed {
		return append(ks, RedisIndexKey)
	}
	return ks
}

// client returns the client a call under ctx goes through, so that its
// socket reads and writes end by ctx's deadline whatever the options of
// the client the registry was given. go-redis bounds a socket by the
// context's deadline only when a client has ContextTimeoutEnabled;
// otherwise a call on a connection that stopped answering (packets
// dropped) lasts the client's ReadTimeout (3s by default, for ever with
// -1), and a heartbeat could not fail before its member's lease ran out.
// For a *redis.Client without it, the call goes through WithTimeout's
// clone with the time left as its read and write timeout: a few
// allocations per call (a copy of the options and of the client), sharing
// the client's pools and hooks. The time left, not the client's own
// shorter ReadTimeout: a retry after a timeout starts only if ctx is not
// done (go-redis's backoff watches it), and with the time left as the
// timeout the first attempt already uses all of it, so retries cannot add
// up past the deadline. Other clients (ClusterClient, Ring) are used as
// they are: build them with ContextTimeoutEnabled.
//
// An expired ctx returns its error rather than a client: a timeout of 0
// would mean none.
func (r *redisRegistry) client(ctx context.Context) (redis.UniversalClient, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, ok := r.rdb.(*redis.Client)
	if !ok {
		return r.rdb, nil
	}
	deadline, ok := ctx.Deadline()
	o := cl.Options()
	if !ok || o.ContextTimeoutEnabled {
		return r.rdb, nil
	}
	d := time.Until(deadline)
	if d <= 0 {
		return nil, context.DeadlineExceeded
	}
	return cl.WithTimeout(d), nil
}

// check returns the error every method fails with, if any.
func (r *redisRegistry) check() error {
	if r.err != nil {
		return r.err
	}
	if r.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

// clock is the prologue of the scripts that read the server's clock: now
// is the server's time in milliseconds. Expiry uses the server's clock
// only, so processes' clocks may disagree. (replicate_commands lets a
// script write after TIME on Redis before 5; later it is a no-op.)
const clock = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// publishScript is Publish's compare-and-set and announcement, atomic on
// the server. KEYS[1] config hash, KEYS[2] (if any) RedisIndexKey. ARGV: prev epoch, prev phase, next
// epoch, next phase, next config (JSON), channel. Returns "OK", or the
// stored {epoch, phase} on a conflict.
var publishScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'epoch', 'phase')
local e, p = cur[1] or '0', cur[2] or ''
if e ~= ARGV[1] or p ~= ARGV[2] then return {e, p} end
redis.call('HSET', KEYS[1], 'epoch', ARGV[3], 'phase', ARGV[4], 'config', ARGV[5])
if KEYS[2] then redis.call('SADD', KEYS[2], KEYS[1]) end
redis.call('PUBLISH', ARGV[6], ARGV[5])
return 'OK'
`)

// prune drops expired members; it follows clock. KEYS[1] members zset,
// KEYS[2] member documents hash.
const prune = `
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #gone do redis.call('HDEL', KEYS[2], gone[i]) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
`

// heartbeatScript: KEYS[3] (if any) RedisIndexKey; ARGV id, member JSON,
// ttl ms, incarnation. It is a compare-and-set on the incarnation: after
// prune only live entries are left, and one that holds another (non-empty)
// incarnation is kept, the script returning {stored incarnation}.
var heartbeatScript = redis.NewScript(clock + prune + `
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
  local ok, doc = pcall(cjson.decode, cur)
  local inc = ok and type(doc) == 'table' and doc['incarnation'] or nil
  if type(inc) == 'string' and inc ~= '' and inc ~= ARGV[4] then return {inc} end
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if KEYS[3] then redis.call('SADD', KEYS[3], KEYS[1], KEYS[2]) end
return 1
`)

// membersScript returns the documents of the live members.
var membersScript = redis.NewScript(clock + prune + `
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local docs = {}
for i = 1, #ids do
  local d = redis.call('HGET', KEYS[2], ids[i])
  if d then docs[#docs + 1] = d end
end
return docs
`)

// leaveScript: ARGV id, incarnation. It is a compare-and-delete on the
// incarnation: an entry that holds another one (none counting as "") is
// kept, and the script returns 0.
var leaveScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
  local ok, doc = pcall(cjson.decode, cur)
  local inc = ok and type(doc) == 'table' and doc['incarnation'] or ''
  if type(inc) ~= 'string' then inc = '' end
  if inc ~= ARGV[2] then return 0 end
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
`)

func (r *redisRegistry) Get(ctx context.Context) (Config, error) {
	if err := r.check(); err != nil {
		return Config{}, err
	}
	rdb, err := r.client(ctx)
	if err != nil {
		return Config{}, fmt.Errorf("registry: get %s: %w", r.configKey, err)
	}
	data, err := rdb.HGet(ctx, r.configKey, "config").Bytes()
	if err == redis.Nil {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("registry: get %s: %w", r.configKey, err)
	}
	return DecodeConfig(data)
}

func (r *redisRegistry) Publish(ctx context.Context, prev, next Config) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := CheckTransition(prev, next); err != nil {
		return err
	}
	data, err := next.Encode()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidTransition, err)
	}
	rdb, err := r.client(ctx)
	var res any
	if err == nil {
		res, err = publishScript.Run(ctx, rdb, r.keys(r.configKey),
			prev.Epoch, string(prev.Phase), next.Epoch, string(next.Phase), data, r.announce).Result()
	}
	if err != nil {
		return fmt.Errorf("registry: publish %s to %s: %w", next.Version(), r.configKey, err)
	}
	if cur, ok := res.([]any); ok && len(cur) == 2 {
		return fmt.Errorf("%w: publish %s from %s: stored is epoch %v %v", ErrConflict, next.Version(), prev.Version(), cur[0], cur[1])
	}
	return nil
}

func (r *redisRegistry) Heartbeat(ctx context.Context, m Member) error {
	if err := r.check(); err != nil {
		return err
	}
	data, err := EncodeMember(m)
	if err != nil {
		return err
	}
	rdb, err := r.client(ctx)
	var res any
	if err == nil {
		res, err = heartbeatScript.Run(ctx, rdb, r.keys(r.membersKey, r.memberDocsKey),
			m.ID, data, r.opt.MemberTTL.Milliseconds(), m.Incarnation).Result()
	}
	if err != nil {
		return fmt.Errorf("registry: heartbeat of %s: %w", m.ID, err)
	}
	if cur, ok := res.([]any); ok && len(cur) == 1 {
		return InUse(m, fmt.Sprint(cur[0]))
	}
	return nil
}

func (r *redisRegistry) Leave(ctx context.Context, m Member) error {
	if err := r.check(); err != nil {
		return err
	}
	rdb, err := r.client(ctx)
	if err == nil {
		err = leaveScript.Run(ctx, rdb, []string{r.membersKey, r.memberDocsKey}, m.ID, m.Incarnation).Err()
	}
	if err != nil {
		return fmt.Errorf("registry: leave of %s: %w", m.ID, err)
	}
	return nil
}

func (r *redisRegistry) Members(ctx context.Context) ([]Member, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	rdb, err := r.client(ctx)
	var docs []string
	if err == nil {
		docs, err = membersScript.Run(ctx, rdb, []string{r.membersKey, r.memberDocsKey}).StringSlice()
	}
	if err != nil {
		return nil, fmt.Errorf("registry: members of %s: %w", r.name, err)
	}
	ms := make([]Member, 0, len(docs))
	for _, d := range docs {
		m, err := DecodeMember([]byte(d))
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
	return ms, nil
}

// Close implements Registry.
func (r *redisRegistry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	locks := make([]*redisLock, 0, len(r.locks))
	for l := range r.locks {
		locks = append(locks, l)
	}
	r.mu.Unlock()

	r.cancel()
	r.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, l := range locks {
		_ = l.Unlock(ctx) // best effort: otherwise the lock expires
	}
	return nil
}

// start runs f in a goroutine owned by the registry, unless it is closed.
func (r *redisRegistry) start(f func()) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
	return nil
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// MemberTTL returns Options.MemberTTL.
func (r *redisRegistry) MemberTTL() time.Duration { return r.opt.MemberTTL }
