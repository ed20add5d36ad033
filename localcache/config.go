package localcache

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is returned (wrapped, with the offending field) by New
// when a Config field is out of range. Match it with errors.Is.
var ErrInvalidConfig = errors.New("localcache: invalid config")

// Defaults used by New for Config fields left at their zero value.
const (
	// DefaultMaxBytes is the default byte budget: 64 MiB.
	DefaultMaxBytes = 64 << 20

	// DefaultBufferItems is ristretto's recommended size of its striped
	// buffers of Get events.
	DefaultBufferItems = 64

	// DefaultKeyStripes is the least default number of key generation
	// counters (8 bytes each; as many fill counters, see Fill, take as
	// much again): Config.KeyStripes left zero is MaxBytes/256 rounded up
	// to a power of two, and at least this, so the counters take 1/16 of
	// MaxBytes (4 MiB for the default 64 MiB). InvalidateKey bumps one of
	// them, which also drops the cached replies of the other keys sharing
	// it, and an entry lives up to a minute: with 2^18 of them and 10k
	// invalidations per second, a cached key is dropped needlessly about
	// once every 26 seconds. Measured under Zipf 1.2 over 1M keys
	// (docs/results.md), 2^18 stripes instead of 2^16 served 0.877-0.878
	// of the GETs locally instead of 0.866-0.869.
	DefaultKeyStripes = 1 << 16

	// bytesPerKeyStripe is MaxBytes per key stripe when KeyStripes is left
	// zero (see DefaultKeyStripes).
	bytesPerKeyStripe = 256

	// MaxKeyStripes is the largest accepted Config.KeyStripes.
	MaxKeyStripes = 1 << 24

	// ShardStripes is the number of shard generation counters. Shards i
	// and i+ShardStripes share one, so InvalidateShard is exact for up to
	// ShardStripes shards.
	ShardStripes = 1024

	// EntryOverhead is the estimated memory, in bytes, that one cached
	// reply costs beyond its reply size, key and sub-key: the entry itself
	// and ristretto's bookkeeping for it. It is charged against MaxBytes.
	EntryOverhead = 192

	// entrySizeHint is the typical cached entry size assumed to size
	// ristretto's admission sketch.
	entrySizeHint = 1 << 10
)

// Config configures a Cache. The zero value (or a nil *Config) selects every
// default. New copies the Config; changing it afterwards has no effect.
type Config struct {
	// MaxBytes is the byte budget of the cache: the sum over cached entries
	// of reply size + len(key) + len(cmd) + EntryOverhead stays within it
	// (see the package documentation for ristretto's one exception). Must
	// not be negative. Default DefaultMaxBytes (64 MiB).
	MaxBytes int64

	// NumCounters is the number of ristretto's admission counters (about
	// 3 bytes each); ristretto advises 10 per entry the cache holds when
	// full. Must not be negative. Default 10×MaxBytes/1 KiB (entries of
	// about 1 KiB), at least 4096.
	NumCounters int64

	// BufferItems is the size of ristretto's Get buffers. Must not be
	// negative. Default DefaultBufferItems (64).
	BufferItems int64

	// KeyStripes is the number of key generation counters InvalidateKey
	// uses, and of fill counters Fill uses; it is rounded up to a power of
	// two. More stripes mean fewer
	// replies of other keys dropped by an invalidation. Must be in
	// [0, MaxKeyStripes]. Default MaxBytes/256, at least DefaultKeyStripes
	// (65536): 262144 for the default MaxBytes.
	KeyStripes int

	// Now, if set, is the clock against which entry TTLs are checked at
	// Get; tests inject a fake clock. Entries also expire after their TTL
	// on the real clock (ristretto's own expiry, which reclaims their
	// memory), so a fake clock can only make them expire earlier. Nil
	// means the real clock alone, which saves a clock reading per Get.
	// Default nil.
	Now func() time.Time
}

// withDefaults returns a copy of cfg (nil allowed) with defaults filled in,
// or an error wrapping ErrInvalidConfig.
func (cfg *Config) withDefaults() (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.MaxBytes < 0:
		return c, fmt.Errorf("%w: MaxBytes %d is negative", ErrInvalidConfig, c.MaxBytes)
	case c.NumCounters < 0:
		return c, fmt.Errorf("%w: NumCounters %d is negative", ErrInvalidConfig, c.NumCounters)
	case c.BufferItems < 0:
		return c, fmt.Errorf("%w: BufferItems %d is negative", ErrInvalidConfig, c.BufferItems)
	case c.KeyStripes < 0 || c.KeyStripes > MaxKeyStripes:
		return c, fmt.Errorf("%w: KeyStripes %d outside [0, %d]", ErrInvalidConfig, c.KeyStripes, MaxKeyStripes)
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.NumCounters == 0 {
		c.NumCounters = max(10*(c.MaxBytes/entrySizeHint), 4096)
	}
	if c.BufferItems == 0 {
		c.BufferItems = DefaultBufferItems
	}
	if c.KeyStripes == 0 {
		c.KeyStripes = int(min(max(c.MaxBytes/bytesPerKeyStripe, DefaultKeyStripes), MaxKeyStripes))
	}
	n := 1
	for n < c.KeyStripes {
		n *= 2
	}
	c.KeyStripes = n
	return c, nil
}
