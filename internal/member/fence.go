package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/redshard/redshard/internal/beacons"
	"github.com/redshard/redshard/registry"
)

// Fencing that holds whatever the scheduler does (docs/membership.md,
// "Fencing at the data"). Three pieces:
//
//  1. The lease is decided on the command path. The root's Client.enter
//     reads the lease clock (Follower.Lease) before every command of a
//     fleet process; a process whose last counted heartbeat was sent more than
//     half a lease ago fences itself then and there, whether or not the
//     heartbeat goroutine has run since it woke up.
//
//  2. A regime is what a process's commands were checked under: trusted
//     (a fresh lease, no fence) or fenced with what the process knew of
//     the beacons. Every change of regime publishes a topology with a new
//     in-flight count (chained to the previous one) and a closed
//     admission, and the admission opens only once every command of the
//     previous regime has ended.
//
//  3. Admission happens at the data. Every command connection of a fleet
//     process is named after its member id and incarnation (connname.Name)
//     before anything else is sent on it, and is refused unless the
//     topology's admission is open and, trusted, the lease is still fresh
//     after the name reached the server or, fenced, the beacon read on
//     that very connection is one the fence already knew. Before each
//     phase it publishes, the driver severs, on every server of both
//     rings, every named connection whose (member, incarnation) pair is
//     not that of a member live with the previous phase acknowledged
//     (package fleet's sever): an identity check, so a dropped process is cut off
//     even when a live one has its id or a look-alike. So a connection
//     that survives a phase the fleet published without its process was
//     admitted after the sever, by a regime that was current then.

// Fence is a fenced topology's state: what the process knew when it
// fenced itself, and what it has read of the servers' beacons since. The
// root keeps it as a field of its topology (nil: trusted); a Fence is
// never changed once published, a change of fence is a new one.
type Fence struct {
	f       *Follower
	known   registry.Version // the version the topology follows
	knownID string           // and its config's ID
	reason  string
	cause   error        // what fenced the process, if an error did (wrapped in refusals); nil: the lease
	cache   *beaconCache // shared by the fences of one fenced stretch
}

// Known is the config version the fenced topology follows.
func (fc *Fence) Known() registry.Version { return fc.known }

// Reason says why the process is fenced.
func (fc *Fence) Reason() string { return fc.reason }

// Follow returns the fence of a topology that follows cfg after fc's
// (the same fenced stretch: its cause and its beacon cache); nil for nil.
func (fc *Fence) Follow(cfg registry.Config) *Fence {
	if fc == nil {
		return nil
	}
	return &Fence{f: fc.f, known: cfg.Version(), knownID: cfg.ID(), reason: fc.reason, cause: fc.cause, cache: fc.cache}
}

// Refuse returns the error a fenced process refuses key with: ErrFenced,
// the reason given by format and args, and what fenced the process.
func (fc *Fence) Refuse(key, format string, args ...any) error {
	if fc.cause != nil {
		return fmt.Errorf("%w: key %q: %s; %w", ErrFenced, key, fmt.Sprintf(format, args...), fc.cause)
	}
	return fmt.Errorf("%w: key %q: %s; %s", ErrFenced, key, fmt.Sprintf(format, args...), fc.reason)
}

// CheckServer refuses key if the beacon of id, the server the command
// would use (server prints it), says that a newer change than the one the
// fence knows moves key, or owns it elsewhere. get reads the beacon
// (beacons.Key) on that server; a read is shared by the commands that
// need it and trusted for beacons.Fresh.
func (fc *Fence) CheckServer(ctx context.Context, key, id string, server fmt.Stringer, get func(context.Context) ([]byte, error)) error {
	b, err := fc.beacon(ctx, id, get)
	if err != nil {
		return fc.Refuse(key, "reading the beacon of shard %s: %v", server, err)
	}
	if v := b.cfg.Version(); v.Less(fc.known) || v == fc.known && b.cfg.ID() == fc.knownID {
		return nil // the beacon knows no newer config than the one this process follows
	}
	for _, r := range b.rings {
		if r.Owner(key) != id {
			return fc.Refuse(key, "shard %s says the fleet is at %s, where the key's owner is another server", server, b.cfg.Version())
		}
	}
	return nil
}

// beacon returns server id's beacon, read again if the last read is
// older than beacons.Fresh. A beacon that changed since the last read
// starts a new fenced regime: commands checked against the old one may
// still be running.
func (fc *Fence) beacon(ctx context.Context, id string, get func(context.Context) ([]byte, error)) (beaconView, error) {
	b := fc.cache.entry(id)
	b.mu.Lock()
	if b.read && time.Since(b.checked) < beacons.Fresh {
		v := beaconView{b.cfg, b.rings}
		b.mu.Unlock()
		return v, nil
	}
	b.mu.Unlock()
	// One read at a time per server, shared by the commands that need it
	// (Host.Share: detached from any one caller's cancellation).
	v, err := fc.f.host.Share(ctx, &fc.cache.reads, id, func(rctx context.Context) (any, error) {
		start := time.Now()
		data, err := get(rctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			return beaconView{}, err
		}
		b.mu.Lock()
		v, changed, err := b.set(start, data, fc.f.host.Parse)
		b.mu.Unlock()
		if changed {
			fc.f.refence()
		}
		return v, err
	})
	if err != nil {
		return beaconView{}, err
	}
	return v.(beaconView), nil
}

// beaconCache is what a fenced process last read of each server's beacon,
// by server identity. It is safe for concurrent use.
type beaconCache struct {
	mu sync.Mutex
	m  map[string]*beacon // guarded by mu
	// reads shares one GET of a server's beacon among the commands that
	// need it; learn never waits for it, since the GET may be dialling the
	// very connection whose admission calls learn.
	reads singleflight.Group
}

// beacon is one server's entry of a beaconCache.
type beacon struct {
	mu      sync.Mutex // guards the fields below; never held across I/O
	read    bool       // read at least once
	checked time.Time  // when the last successful read started
	cfg     registry.Config
	rings   []Ring // cfg's documents (Doc, and PrevDoc in flight)
}

// beaconView is what a command is checked against: one reading of a beacon.
type beaconView struct {
	cfg   registry.Config
	rings []Ring
}

func (bc *beaconCache) entry(id string) *beacon {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.m == nil {
		bc.m = map[string]*beacon{}
	}
	b := bc.m[id]
	if b == nil {
		b = &beacon{}
		bc.m[id] = b
	}
	return b
}

// learn records data (a beacon's value; nil: none) as read from server id
// by a read that started at start, and reports whether it differs from
// what was read before.
func (bc *beaconCache) learn(id string, start time.Time, data []byte, parse func([]byte) (Ring, error)) (changed bool, err error) {
	b := bc.entry(id)
	b.mu.Lock()
	defer b.mu.Unlock()
	_, changed, err = b.set(start, data, parse)
	return changed, err
}

// set parses data into b, read at start. A reading that started before
// the one b holds is older than it and is ignored. Caller holds b.mu.
func (b *beacon) set(start time.Time, data []byte, parse func([]byte) (Ring, error)) (beaconView, bool, error) {
	if b.read && start.Before(b.checked) {
		return beaconView{b.cfg, b.rings}, false, nil
	}
	var cfg registry.Config
	if len(data) > 0 {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return beaconView{}, false, fmt.Errorf("beacon: %w", err)
		}
	}
	changed := b.read && (cfg.Version() != b.cfg.Version() || cfg.Change != b.cfg.Change)
	if !b.read || changed {
		var rings []Ring
		for _, doc := range []json.RawMessage{cfg.Doc, cfg.PrevDoc} {
			if len(doc) == 0 {
				continue
			}
			r, err := parse(doc)
			if err != nil {
				return beaconView{}, false, fmt.Errorf("beacon: %w", err)
			}
			rings = append(rings, r)
		}
		b.cfg, b.rings = cfg, rings
	}
	b.read, b.checked = true, start
	return beaconView{b.cfg, b.rings}, changed, nil
}

// fencedConnError is how an admission refuses a connection. go-redis
// unwraps an OnConnect error once before it returns it to the command, so
// the error the caller sees is err, which wraps ErrFenced.
type fencedConnError struct{ err error }

func (e *fencedConnError) Error() string { return e.err.Error() }
func (e *fencedConnError) Unwrap() error { return e.err }

func refuseConn(format string, args ...any) error {
	return &fencedConnError{fmt.Errorf("%w: connection refused: "+format, append([]any{ErrFenced}, args...)...)}
}

// Admit is the OnConnect of every command connection of the process to
// the server id. current returns the fence of the topology the connection
// is for and whether its admission is open (Admission.Wait, for the
// newest topology).
func (f *Follower) Admit(ctx context.Context, cn *redis.Conn, id string, current func(context.Context) (*Fence, bool)) error {
	// The name first: once it is on the server, a driver that has dropped
	// this process severs the connection, so every check below is made
	// after the point from which the sever would catch it.
	if err := cn.ClientSetName(ctx, f.connName).Err(); err != nil {
		return err
	}
	fc, ok := current(ctx)
	if !ok {
		return refuseConn("commands checked before the process's last change of fence are still running")
	}
	if fc == nil {
		if f.lease.Fresh() {
			return nil
		}
		f.FenceNow()
		return refuseConn("no heartbeat of this process has reached the registry for %v", f.lease.Valid())
	}
	start := time.Now()
	data, err := cn.Get(ctx, beacons.Key).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	changed, err := fc.cache.learn(id, start, data, f.host.Parse)
	if err != nil {
		return err
	}
	if changed {
		f.refence()
		return refuseConn("the beacon of server %s changed since the fence last read it", id)
	}
	return nil
}
