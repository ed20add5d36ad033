package redshardotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Option configures InstrumentMetrics. Options are applied in order; a
// nil Option is ignored.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set; newConfig fills the defaults.
type config struct {
	provider     metric.MeterProvider
	attrs        []attribute.KeyValue
	hotKeyNames  bool
	durationEdge []float64
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	if c.provider == nil {
		c.provider = otel.GetMeterProvider()
	}
	if c.durationEdge == nil {
		c.durationEdge = durationBuckets
	}
	return c
}

// WithMeterProvider sets the meter provider the instruments are created
// with. Default (or nil) otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.provider = mp })
}

// WithAttributes adds attrs to every measurement (a service or pool name,
// say). Keep them constant: they are copied into every series. They
// override redshardotel's own constant attributes of the same key
// (db.system.name="valkey", say), not the per-operation ones
// (db.operation.name, error.type). Default none.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) { c.attrs = append(c.attrs, attrs...) })
}

// WithHotKeyNames, when on, also reports the rate of each hot key under its
// name (redshard.hotkeys.rate, attribute redshard.key). Key names can be
// sensitive (user ids, emails) and are unbounded, so they are never
// exported unless asked for; the count of hot keys always is. Default off.
func WithHotKeyNames(on bool) Option {
	return optionFunc(func(c *config) { c.hotKeyNames = on })
}

// WithDurationBuckets replaces the explicit bucket boundaries, in seconds,
// of both duration histograms. A View on the meter provider overrides them
// too. Default DurationBuckets().
func WithDurationBuckets(boundaries ...float64) Option {
	return optionFunc(func(c *config) { c.durationEdge = append([]float64(nil), boundaries...) })
}

// durationBuckets spans 1µs to 10s: reads answered from the local cache take
// well under a microsecond to a few, a loopback Redis tens of
// microseconds, a remote one milliseconds, and a command stuck behind a
// timeout seconds. The SDK's default buckets start at 5ms and would put
// every cached read and every fast shard in the first one.
var durationBuckets = []float64{
	1e-6, 2.5e-6, 5e-6,
	1e-5, 2.5e-5, 5e-5,
	1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3,
	1e-2, 2.5e-2, 5e-2,
	0.1, 0.25, 0.5,
	1, 2.5, 5, 10,
}

// DurationBuckets returns the default bucket boundaries, in seconds, of the
// duration histograms (a copy: 1µs, 2.5µs, 5µs, 10µs, ... 5s, 10s).
func DurationBuckets() []float64 {
	return append([]float64(nil), durationBuckets...)
}
