package redshard

import "time"

// Default LoadOptions values.
const (
	DefaultLoadLease        = 5 * time.Second
	DefaultLoadPollInterval = 10 * time.Millisecond
)

// LoadOptions turns on fleet-wide stampede control for GetOrLoad: of all the
// processes that miss a key at the same moment, one takes a lease on the
// key's shard and loads, and the others wait for its value. With
// Options.Load nil, GetOrLoad only coalesces the misses of one process, so a
// fleet of N processes loads a missing key up to N times.
type LoadOptions struct {
	// Lease is how long a loader holds the lease, and the deadline of each
	// load call. A loader that dies frees the key after Lease. At least 1ms
	// (the lease is SET with PX). Default DefaultLoadLease (5s).
	Lease time.Duration

	// Wait is how long a process that lost the lease waits for the value to
	// appear before it calls load itself; so if the lease holder dies, each
	// waiting process loads once after Wait. Default Lease.
	Wait time.Duration

	// PollInterval is how often a waiting process reads the key again. A
	// shorter interval returns sooner after the value appears but sends more
	// GETs to the key's shard: 1/PollInterval per second for each waiting
	// process (not per waiting goroutine: they share one poller). At least
	// 1ms. Default DefaultLoadPollInterval (10ms).
	PollInterval time.Duration
}

// Bounds of LoadOptions.
const (
	minLoadLease        = time.Millisecond // the lease is SET with PX
	minLoadPollInterval = time.Millisecond
)

// resolve validates o and returns it with defaults filled in. A nil o gives
// the defaults, which still bound GetOrLoad's load calls.
func (o *LoadOptions) resolve() (LoadOptions, error) {
	var r LoadOptions
	if o != nil {
		r = *o
	}
	k := ErrInvalidLoadOptions
	switch {
	case r.Lease < 0:
		return r, invalid(k, "Load.Lease", "%v is negative", r.Lease)
	case r.Lease > 0 && r.Lease < minLoadLease:
		return r, invalid(k, "Load.Lease", "%v is below %v (the lease is set in milliseconds)", r.Lease, minLoadLease)
	case r.Wait < 0:
		return r, invalid(k, "Load.Wait", "%v is negative", r.Wait)
	case r.PollInterval < 0:
		return r, invalid(k, "Load.PollInterval", "%v is negative", r.PollInterval)
	case r.PollInterval > 0 && r.PollInterval < minLoadPollInterval:
		return r, invalid(k, "Load.PollInterval", "%v is below %v", r.PollInterval, minLoadPollInterval)
	}
	if r.Lease == 0 {
		r.Lease = DefaultLoadLease
	}
	if r.Wait == 0 {
		r.Wait = r.Lease
	}
	if r.PollInterval == 0 {
		r.PollInterval = DefaultLoadPollInterval
	}
	return r, nil
}
