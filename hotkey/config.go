package hotkey

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidConfig is returned (wrapped, with the offending field) by New when
// a Config field is out of range. Match it with errors.Is.
var ErrInvalidConfig = errors.New("hotkey: invalid config")

// Defaults used by New for Config fields left at their zero value.
const (
	// DefaultWindow is the default decay horizon. Ten seconds keeps a
	// key at DefaultMinRate estimated from ~500 observations (about ±5%
	// noise), yet a key that suddenly takes 20% of the traffic is detected
	// in about a quarter of a second (see the package documentation).
	DefaultWindow = 10 * time.Second

	// DefaultMinRate is the default absolute floor, in observations per
	// second. Below 100 ops/s one client adds well under 0.1% to the
	// load of a Redis server (~100k ops/s), so caching such a key
	// locally would buy nothing; the floor also stops a client with very
	// little traffic from calling a key hot only because it has a large
	// share of almost nothing.
	DefaultMinRate = 100.0

	// DefaultMinShare is the default fraction of the detector's traffic a
	// key must exceed. With keys spread over n shards, a key above 1% of
	// the traffic gives its shard at least n/100 times that shard's fair
	// share on its own. It also caps the hot set: at most 1/MinShare keys
	// can turn hot (1/(Hysteresis*MinShare) can stay hot), so the
	// snapshot IsHot reads stays small.
	DefaultMinShare = 0.01

	// DefaultCapacity is the default number of tracked candidates. The
	// count error is at most a 1/Capacity share of the traffic (0.024%),
	// far below DefaultMinShare, and the true top 50 of a Zipf(1.1)
	// stream over a million keys is recovered (see the tests). Memory is
	// about 150 bytes per candidate plus the candidates' key strings.
	DefaultCapacity = 4096

	// DefaultHysteresis is the default fraction of the thresholds below
	// which a hot key stops being hot: a key turns hot above MinRate and
	// MinShare and stays hot until it falls below half of either.
	DefaultHysteresis = 0.5

	// MaxCapacity is the largest accepted Config.Capacity.
	MaxCapacity = 1 << 24
)

// Config configures a Detector. The zero value (or a nil *Config) selects
// every default. New copies the Config; changing it afterwards has no effect.
type Config struct {
	// Window is the decay horizon. Counts decay exponentially with time
	// constant Window/2, so the observations counted have the same mean
	// age as those of a sliding window of length Window: a key's weight
	// halves every 0.35×Window after it stops. Must not be negative.
	// Default DefaultWindow (10s).
	Window time.Duration

	// MinRate is the rate, in observations per second over the window,
	// that a key must reach to turn hot. Must be finite and not negative;
	// zero selects the default. Default DefaultMinRate (100).
	MinRate float64

	// MinShare is the fraction of this detector's total (decayed) traffic
	// that a key must reach to turn hot. Must be in [0, 1]; zero selects
	// the default (use a tiny positive value to make the share test
	// irrelevant). Default DefaultMinShare (0.01).
	MinShare float64

	// Capacity is the number of candidate keys tracked, whatever the
	// number of distinct keys observed. Must be in [0, MaxCapacity]; zero
	// selects the default. Default DefaultCapacity (4096).
	Capacity int

	// Hysteresis is the fraction of MinRate and MinShare below which a hot
	// key stops being hot, so a key whose rate wobbles around a threshold
	// does not flap. Must be in [0, 1]; 1 disables hysteresis; zero
	// selects the default. Default DefaultHysteresis (0.5).
	Hysteresis float64

	// Now is the clock. Nil means time.Now; tests inject a fake clock. It
	// must be safe for concurrent use and is called about once every 16
	// observations per shard and on every hot-set refresh.
	Now func() time.Time
}

// withDefaults returns a copy of cfg (nil allowed) with defaults filled in,
// or an error wrapping ErrInvalidConfig.
func (cfg *Config) withDefaults() (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case c.Window < 0:
		return c, fmt.Errorf("%w: Window %v is negative", ErrInvalidConfig, c.Window)
	case bad(c.MinRate) || c.MinRate < 0:
		return c, fmt.Errorf("%w: MinRate %v must be finite and not negative", ErrInvalidConfig, c.MinRate)
	case bad(c.MinShare) || c.MinShare < 0 || c.MinShare > 1:
		return c, fmt.Errorf("%w: MinShare %v outside [0, 1]", ErrInvalidConfig, c.MinShare)
	case c.Capacity < 0 || c.Capacity > MaxCapacity:
		return c, fmt.Errorf("%w: Capacity %d outside [0, %d]", ErrInvalidConfig, c.Capacity, MaxCapacity)
	case bad(c.Hysteresis) || c.Hysteresis < 0 || c.Hysteresis > 1:
		return c, fmt.Errorf("%w: Hysteresis %v outside [0, 1]", ErrInvalidConfig, c.Hysteresis)
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.MinRate == 0 {
		c.MinRate = DefaultMinRate
	}
	if c.MinShare == 0 {
		c.MinShare = DefaultMinShare
	}
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	if c.Hysteresis == 0 {
		c.Hysteresis = DefaultHysteresis
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}
