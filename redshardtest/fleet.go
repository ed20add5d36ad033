package redshardtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
)

// RegistryName is the name of a Fleet's registry on its RegistryServer
// (registry.NewRedis's name; a URL for redshard's command is
// "redis://" + RegistryServer.Addr() + "/" + RegistryName).
const RegistryName = "redshard:registry:test"

// DefaultPollInterval is FleetOptions.Registry's default PollInterval:
// short, since a miniredis poll costs nothing.
const DefaultPollInterval = 100 * time.Millisecond

// FleetOptions configures StartFleet and NewFleet. The zero FleetOptions
// (or nil) uses the defaults.
type FleetOptions struct {
	// Weights starts one shard server per weight, shard-0, shard-1, ...
	// Which of them are in the ring is up to the documents applied (see
	// Doc). Default three of weight 1.
	Weights []float64
	// Registry configures every registry handle of the fleet. Default
	// PollInterval DefaultPollInterval and registry's default MemberTTL
	// (10s): a member lease a loaded machine does not run out. A test of
	// a dropped member sets a shorter one and waits it out.
	Registry *registry.Options
	// Client is the template of the options of every process's client
	// (Join) and of the driver's (Apply): Shards, Registry and
	// Fleet.MemberID are set by the Fleet. Default nil: redshard's
	// defaults.
	Client *redshard.Options
}

// Fleet is a fleet on miniredis, for unit tests of membership changes:
// shard Servers, a Redis registry on a server of its own, processes that
// follow it (Join), and Apply to change the ring through it. Its exported
// fields are set by StartFleet or NewFleet and are not to be changed. Its
// methods are safe for concurrent use.
type Fleet struct {
	// Shards are the shard servers' shards: shard-0, shard-1, ..., with
	// the weights asked for; none is in the ring until a document that
	// names it is applied (Apply(ctx, Doc(f.Shards[:2]...), ...)).
	Shards []redshard.Shard
	// Servers[i] serves Shards[i].
	Servers []*Server
	// RegistryServer holds the registry, named RegistryName.
	RegistryServer *Server
	// Registry is the operator's handle on the registry, which Apply
	// uses.
	Registry registry.Registry

	opt     FleetOptions // with the defaults
	regOpt  registry.Options
	regAddr string // RegistryServer's, which a closed miniredis does not tell

	mu      sync.Mutex
	closers []func() error // guarded by mu: what to close, in order of creation
	closed  bool           // guarded by mu
}

// StartFleet starts a Fleet's servers and opens its operator's registry
// handle; nothing is published yet. The caller closes the Fleet (Close);
// NewFleet is the same for a test.
func StartFleet(opt *FleetOptions) (*Fleet, error) {
	f := &Fleet{}
	if opt != nil {
		f.opt = *opt
	}
	if f.opt.Weights == nil {
		f.opt.Weights = []float64{1, 1, 1}
	}
	if f.opt.Registry != nil {
		f.regOpt = *f.opt.Registry
	}
	if f.regOpt.PollInterval == 0 {
		f.regOpt.PollInterval = DefaultPollInterval
	}
	if err := f.regOpt.Validate(); err != nil {
		return nil, fmt.Errorf("redshardtest: StartFleet: %w", err)
	}
	servers, shards, err := startShards(f.opt.Weights)
	f.Servers, f.Shards = servers, shards
	for _, s := range servers {
		f.closers = append(f.closers, closer(s))
	}
	if err == nil {
		f.RegistryServer, err = StartServer()
	}
	if err == nil {
		f.closers = append(f.closers, closer(f.RegistryServer))
		f.regAddr = f.RegistryServer.Addr()
		f.Registry, err = f.OpenRegistry()
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// NewFleet is StartFleet for a test: the Fleet is closed when t's test
// ends (t.Cleanup), and a failure to start it fails t (Fatalf).
func NewFleet(t TB, opt *FleetOptions) *Fleet {
	t.Helper()
	f, err := StartFleet(opt)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// OpenRegistry returns a handle on the fleet's registry of its own, on a
// connection of its own, as another process of the fleet has. The Fleet
// closes it (Close); once the Fleet is closed, OpenRegistry fails.
func (f *Fleet) OpenRegistry() (registry.Registry, error) {
	rdb := redis.NewClient(&redis.Options{Addr: f.regAddr})
	reg, err := registry.NewRedisOptions(rdb, RegistryName, &f.regOpt)
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redshardtest: opening the registry: %w", err)
	}
	if err := f.own(rdb.Close, reg.Close); err != nil {
		return nil, err
	}
	return reg, nil
}

// Join starts a process of the fleet: a Client with FleetOptions.Client's
// options that follows the registry through a handle of its own, as
// memberID. Something must have been applied first (NewClient refuses an
// empty registry). The Fleet closes the Client (Close); closing it before
// is the process leaving the fleet.
func (f *Fleet) Join(memberID string) (*redshard.Client, error) {
	reg, err := f.OpenRegistry()
	if err != nil {
		return nil, err
	}
	o := f.clientOptions()
	o.Registry = reg
	fo := redshard.FleetOptions{}
	if o.Fleet != nil {
		fo = *o.Fleet
	}
	fo.MemberID = memberID
	o.Fleet = &fo
	c, err := redshard.NewClient(&o)
	if err != nil {
		return nil, fmt.Errorf("redshardtest: process %s: %w", memberID, err)
	}
	if err := f.own(c.Close); err != nil {
		return nil, err
	}
	return c, nil
}

// Apply changes the fleet's ring to doc through the operator's handle,
// phase by phase, as fleet.Apply does (and moves the data), while the
// joined processes follow. When opt.Client is nil it is FleetOptions.Client.
func (f *Fleet) Apply(ctx context.Context, doc json.RawMessage, opt fleet.ApplyOptions) (fleet.ApplyReport, error) {
	if opt.Client == nil {
		o := f.clientOptions()
		opt.Client = &o
	}
	return apply(ctx, f.Registry, doc, opt)
}

// apply is the one place the package names the fleet driver's entry point.
func apply(ctx context.Context, reg registry.Registry, doc json.RawMessage, opt fleet.ApplyOptions) (fleet.ApplyReport, error) {
	return fleet.Apply(ctx, reg, doc, opt)
}

// clientOptions returns a copy of FleetOptions.Client, or empty options.
func (f *Fleet) clientOptions() redshard.Options {
	if f.opt.Client == nil {
		return redshard.Options{}
	}
	return *f.opt.Client
}

// own adds closers, run by Close after those added before them; if the
// Fleet is closed already, it runs them now and fails.
func (f *Fleet) own(fns ...func() error) error {
	f.mu.Lock()
	if !f.closed {
		f.closers = append(f.closers, fns...)
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	for _, fn := range slices.Backward(fns) {
		_ = fn()
	}
	return errors.New("redshardtest: the fleet is closed")
}

// Close closes the processes' clients, the registry handles and the
// servers, newest first. Later calls do nothing and return nil.
func (f *Fleet) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	fns := f.closers
	f.closers = nil
	f.mu.Unlock()
	var errs []error
	for _, fn := range slices.Backward(fns) {
		errs = append(errs, fn())
	}
	return errors.Join(errs...)
}

func closer(s *Server) func() error {
	return func() error { s.Close(); return nil }
}

// Doc returns the config document of a ring of shards, as Apply and
// redshard.LoadConfig read it: each shard's name, address and weight (a
// zero weight is left out: the default, 1). Shard.Options and
// Shard.Failover are not written. A weight that JSON cannot hold (NaN,
// infinite) is written as Go prints it, for Apply to refuse.
func Doc(shards ...redshard.Shard) json.RawMessage {
	b := []byte(`{"shards":[`)
	for i, s := range shards {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, s.Name)
		b = append(b, `,"addr":`...)
		b = appendString(b, s.Addr)
		if s.Weight != 0 {
			b = append(b, `,"weight":`...)
			b = strconv.AppendFloat(b, s.Weight, 'g', -1, 64)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
