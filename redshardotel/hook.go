package redshardotel

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Operation names of batches (db.operation.name). The batch size is not an
// attribute: every distinct size would be a series of its own.
const (
	opPipeline = "PIPELINE" // a pipeline
	opMulti    = "MULTI"    // a transaction: MULTI ... EXEC
)

// maxOps bounds the attribute sets a hook keeps, one per operation name
// and error type; past it a measurement builds its own (and allocates).
const maxOps = 1024

// opHook records the duration of each command and pipeline that passes
// through it into one histogram. It is safe for concurrent use: its
// attribute sets are an immutable map, copied on write.
type opHook struct {
	stopped *atomic.Bool // the Instrumentation's: pass commands on, record nothing
	hist    metric.Float64Histogram
	base    []attribute.KeyValue // constant attributes

	ops atomic.Pointer[map[opKey][]metric.RecordOption] // read without locking
	mu  sync.Mutex                                      // serializes writers of ops
}

// clockBase is when the process started measuring.
var clockBase = time.Now()

// monotonic is the monotonic clock's time since clockBase. It reads only
// the monotonic clock, where time.Now reads the wall clock too: on some
// virtual machines each read costs tens of nanoseconds.
func monotonic() time.Duration { return time.Since(clockBase) }

// opKey identifies an attribute set: a lower-case command name as
// redis.Cmder.Name returns it (or a batch name) and an error type.
type opKey struct{ name, errType string }

func newOpHook(stopped *atomic.Bool, hist metric.Float64Histogram, base []attribute.KeyValue) *opHook {
	return &opHook{stopped: stopped, hist: hist, base: base}
}

// DialHook passes dials on: dials are not operations.
func (h *opHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook records a command.
func (h *opHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.stopped.Load() {
			return next(ctx, cmd)
		}
		name := cmd.Name()
		if handshake(name, cmd) {
			return next(ctx, cmd)
		}
		start := monotonic()
		err := next(ctx, cmd)
		h.record(ctx, monotonic()-start, name, ErrorType(err))
		return err
	}
}

// ProcessPipelineHook records a pipeline or a transaction as one
// operation. It failed if it returned an error or if one of its commands
// did (redis.Nil is no failure), as Pipeline.Exec would report it.
func (h *opHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.stopped.Load() {
			return next(ctx, cmds)
		}
		if handshakePipeline(cmds) {
			return next(ctx, cmds)
		}
		start := monotonic()
		err := next(ctx, cmds)
		d := monotonic() - start
		errType := ErrorType(err)
		for i := 0; errType == "" && i < len(cmds); i++ {
			errType = ErrorType(cmds[i].Err())
		}
		h.record(ctx, d, batchName(cmds), errType)
		return err
	}
}

// handshake reports whether cmd, named name, is one go-redis sends through the hooks
// while it sets up a new connection (initConn: HELLO or AUTH, CLIENT
// MAINT_NOTIFICATIONS, CLIENT SETINFO). They are not the application's
// operations, and a server that lacks one (CLIENT MAINT_NOTIFICATIONS
// before Redis 8, miniredis) would show an ERR per new connection.
func handshake(name string, cmd redis.Cmder) bool {
	switch name {
	case "hello", "auth":
		return true
	case "client":
		args := cmd.Args()
		if len(args) < 2 {
			return false
		}
		sub, _ := args[1].(string)
		return strings.EqualFold(sub, "setinfo") || strings.EqualFold(sub, "maint_notifications") ||
			strings.EqualFold(sub, "setname") || strings.EqualFold(sub, "tracking")
	}
	return false
}

// handshakePipeline reports whether cmds is a pipeline go-redis sends while
// it sets up a connection: SELECT, READONLY and CLIENT SETNAME, TRACKING or
// SETINFO only.
func handshakePipeline(cmds []redis.Cmder) bool {
	for _, cmd := range cmds {
		if n := cmd.Name(); n != "select" && n != "readonly" && !handshake(n, cmd) {
			return false
		}
	}
	return len(cmds) > 0
}

// batchName names a pipeline: MULTI when it is a transaction.
func batchName(cmds []redis.Cmder) string {
	if n := len(cmds); n >= 2 && cmds[0].Name() == "multi" && cmds[n-1].Name() == "exec" {
		return opMulti
	}
	return opPipeline
}

func (h *opHook) record(ctx context.Context, d time.Duration, name, errType string) {
	if errType == ErrorTypeUnknownCommand {
		// The name is whatever the caller sent; it must not become a series.
		name = ErrorTypeOther
	}
	h.hist.Record(ctx, d.Seconds(), h.options(opKey{name, errType})...)
}

// options returns the record options of k, building them on first use.
func (h *opHook) options(k opKey) []metric.RecordOption {
	if m := h.ops.Load(); m != nil {
		if o, ok := (*m)[k]; ok {
			return o
		}
	}
	attrs := append(slices.Clip(h.base), semconv.DBOperationName(strings.ToUpper(k.name)))
	if k.errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(k.errType))
	}
	o := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}

	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.ops.Load()
	var m map[opKey][]metric.RecordOption
	if old != nil {
		if len(*old) >= maxOps {
			return o
		}
		m = maps.Clone(*old)
	} else {
		m = make(map[opKey][]metric.RecordOption)
	}
	m[k] = o
	h.ops.Store(&m)
	return o
}
