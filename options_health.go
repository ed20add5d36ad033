package redshard

import "time"

// HealthOptions configures the per-shard heartbeat. The zero value is
// usable; a nil Options.Health means the defaults below. Values too small
// to mean anything (an Interval or Timeout under 10ms) are errors.
type HealthOptions struct {
	// Disable turns the heartbeat off: shards are never marked down and a
	// dead shard's commands fail however go-redis fails them (dial errors,
	// timeouts).
	Disable bool

	// Interval between heartbeats (a PING on a dedicated connection per
	// shard). At least 10ms. Default 500ms. Pub/Sub probes with it and
	// Timeout (at least 500ms and 1s there): a shard's subscriber
	// connection that has received nothing for Interval sends a PING, and
	// is replaced (the subscriber told) if nothing arrives within Timeout;
	// with Disable, 3s and 3s.
	Interval time.Duration

	// Timeout of one heartbeat: a shard that does not answer within it has
	// failed the heartbeat (a frozen host is detected by this, not by a
	// pool timeout). At least 10ms. Default Interval.
	Timeout time.Duration

	// FailureThreshold is the number of consecutive failed heartbeats that
	// mark a shard down. Default 2.
	FailureThreshold int

	// RecoveryThreshold is the number of consecutive good heartbeats that
	// mark a down shard up again. Default 2.
	RecoveryThreshold int

	// Failover, for cache workloads, sends a down shard's commands to the
	// next distinct shard on the ring that is up (a "gutter" as in
	// Facebook's memcache) instead of failing them. Keys written there get
	// their TTL capped to GutterTTL, and when the shard comes back the
	// client deletes, before routing to it again, every key it wrote
	// elsewhere during the outage, on both shards: the returning shard's
	// old values are never served. Off by default: data that must not be
	// lost or served stale should fail fast instead.
	Failover bool

	// GutterTTL caps the TTL of keys written to a stand-in shard. At least
	// 1ms. Default 30s.
	GutterTTL time.Duration

	// OnShardStateChange, if set, is called (from the monitor's goroutine,
	// one call at a time) when a shard is marked down or up.
	OnShardStateChange func(ShardStateChange)
}

// ShardStateChange reports a shard marked down or up by the health monitor.
type ShardStateChange struct {
	Shard string
	Addr  string
	Down  bool
	Err   error // the last heartbeat error when Down
	At    time.Time
}

// Bounds of HealthOptions. Values outside them cannot mean anything
// useful and are rejected rather than clamped.
const (
	defaultHealthInterval = 500 * time.Millisecond
	// minHealthInterval and minHealthTimeout: a heartbeat faster than a
	// loaded machine's scheduling marks healthy shards down.
	minHealthInterval = 10 * time.Millisecond
	minHealthTimeout  = 10 * time.Millisecond
	defaultThreshold  = 2
	maxThreshold      = 1000
	defaultGutterTTL  = 30 * time.Second
)

// resolve validates o and returns a copy with the defaults filled in. A nil
// o gives the defaults.
func (o *HealthOptions) resolve() (HealthOptions, error) {
	var h HealthOptions
	if o != nil {
		h = *o
	}
	k := ErrInvalidHealthOptions
	switch {
	case h.Interval < 0:
		return h, invalid(k, "Health.Interval", "%v is negative", h.Interval)
	case h.Interval > 0 && h.Interval < minHealthInterval:
		return h, invalid(k, "Health.Interval", "%v is below the minimum of %v", h.Interval, minHealthInterval)
	case h.Timeout < 0:
		return h, invalid(k, "Health.Timeout", "%v is negative", h.Timeout)
	case h.Timeout > 0 && h.Timeout < minHealthTimeout:
		return h, invalid(k, "Health.Timeout", "%v is below the minimum of %v", h.Timeout, minHealthTimeout)
	case h.FailureThreshold < 0 || h.FailureThreshold > maxThreshold:
		return h, invalid(k, "Health.FailureThreshold", "%d is outside [0, %d]", h.FailureThreshold, maxThreshold)
	case h.RecoveryThreshold < 0 || h.RecoveryThreshold > maxThreshold:
		return h, invalid(k, "Health.RecoveryThreshold", "%d is outside [0, %d]", h.RecoveryThreshold, maxThreshold)
	case h.GutterTTL < 0:
		return h, invalid(k, "Health.GutterTTL", "%v is negative", h.GutterTTL)
	case h.GutterTTL > 0 && h.GutterTTL < time.Millisecond:
		return h, invalid(k, "Health.GutterTTL", "%v is below 1ms (TTLs are set in milliseconds)", h.GutterTTL)
	case h.Disable && h.Failover:
		return h, invalid(k, "Health.Failover", "failover needs the heartbeat, which Disable turns off")
	}
	if h.Interval == 0 {
		h.Interval = defaultHealthInterval
	}
	if h.Timeout == 0 {
		h.Timeout = h.Interval
	}
	if h.FailureThreshold == 0 {
		h.FailureThreshold = defaultThreshold
	}
	if h.RecoveryThreshold == 0 {
		h.RecoveryThreshold = defaultThreshold
	}
	if h.GutterTTL == 0 {
		h.GutterTTL = defaultGutterTTL
	}
	return h, nil
}
