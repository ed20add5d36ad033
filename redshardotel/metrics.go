package redshardotel

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/redshard/redshard"
)

// ScopeName is the instrumentation scope of the meter InstrumentMetrics
// uses.
const ScopeName = "github.com/redshard/redshard/redshardotel"

// Attribute keys redshardotel adds to the semantic conventions' ones.
const (
	// ShardKey names the shard a measurement is about (Shard.Name).
	ShardKey = attribute.Key("redshard.shard")
	// HotKeyKey is a hot key's name; only with WithHotKeyNames(true).
	HotKeyKey = attribute.Key("redshard.key")
	// ResultKey says how a request ended: hit or miss, won or waited, ...
	ResultKey = attribute.Key("result")
)

// ErrNilClient is returned by InstrumentMetrics for a nil client.
var ErrNilClient = errors.New("redshardotel: nil client")

// Instrumentation is the metrics InstrumentMetrics set up for one client.
// Its methods are safe for concurrent use; the zero value instruments
// nothing, and its Unregister does nothing.
type Instrumentation struct {
	reg     metric.Registration
	stopped atomic.Bool // set by Unregister: the hooks stop recording

	once sync.Once
	err  error // of the first Unregister
}

// Unregister stops the instrumentation: the callback that reads the
// client's Stats is unregistered, and the hooks, which a redshard.Client
// cannot remove, stop recording and only pass commands on. Call it when
// the client is closed, or the callback keeps reporting the closed client's
// last state. It is idempotent and returns the first call's error.
func (in *Instrumentation) Unregister() error {
	in.once.Do(func() {
		in.stopped.Store(true)
		if in.reg != nil {
			in.err = in.reg.Unregister()
		}
	})
	return in.err
}

// InstrumentMetrics records the metrics of c listed in the package doc:
// the duration of every command each shard served (a shard hook), the
// duration of every command as the application sent it (a command hook),
// and gauges and counters read from c.Stats and c.LoadStats by one
// callback per collection. It returns an error, and adds nothing, when c is
// nil or an instrument cannot be created. Instrumenting a client twice
// records everything twice.
func InstrumentMetrics(c *redshard.Client, opts ...Option) (*Instrumentation, error) {
	if c == nil {
		return nil, ErrNilClient
	}
	cfg := newConfig(opts)
	meter := cfg.provider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))

	shardDur, err1 := meter.Float64Histogram("db.client.operation.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of the commands each shard served, as seen by the shard's go-redis client."),
		metric.WithExplicitBucketBoundaries(cfg.durationEdge...))
	cmdDur, err2 := meter.Float64Histogram("redshard.client.operation.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of the commands the application sent, routing, local cache and refusals included."),
		metric.WithExplicitBucketBoundaries(cfg.durationEdge...))
	obs, err3 := newObserver(meter, c, cfg)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("redshardotel: creating instruments: %w", err)
	}
	in := &Instrumentation{}
	reg, err := meter.RegisterCallback(obs.observe, obs.instruments...)
	if err != nil {
		return nil, fmt.Errorf("redshardotel: registering the stats callback: %w", err)
	}
	in.reg = reg

	c.AddShardHook(func(s redshard.Shard) redis.Hook {
		return newOpHook(&in.stopped, shardDur, shardAttrs(cfg, s))
	})
	c.AddCommandHook(newOpHook(&in.stopped, cmdDur, commandAttrs(cfg)))
	return in, nil
}

// commandAttrs are the constant attributes of the command hook. The
// user's come last, so they can override db.system.name (for Valkey, say).
func commandAttrs(cfg *config) []attribute.KeyValue {
	return append([]attribute.KeyValue{semconv.DBSystemNameRedis}, cfg.attrs...)
}

// shardAttrs are the constant attributes of a shard hook.
func shardAttrs(cfg *config, s redshard.Shard) []attribute.KeyValue {
	addr := s.Addr
	if addr == "" && s.Options != nil {
		addr = s.Options.Addr
	}
	attrs := append([]attribute.KeyValue{semconv.DBSystemNameRedis, ShardKey.String(s.Name)}, serverAttrs(addr)...)
	return append(attrs, cfg.attrs...)
}

// serverAttrs are server.address and server.port of a shard's address. A
// Sentinel-managed shard without an Addr has neither: its primary can
// change.
func serverAttrs(addr string) []attribute.KeyValue {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil { // a unix socket path, say
		return []attribute.KeyValue{semconv.ServerAddress(addr)}
	}
	attrs := []attribute.KeyValue{semconv.ServerAddress(host)}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	return attrs
}
