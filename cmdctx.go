package redshard

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// A command's own context in a batch. go-redis gives every command the
// context it was built with (redis.NewStringCmd(ctx, ...), which every
// typed method calls), in the unexported field ctx of the base it embeds,
// and exposes it nowhere. Its AutoPipeliner batches commands on its own
// long-lived context: the batch reaches routing (processPipeline) with a
// context that has no deadline, while each caller waits for its own
// command with its own deadline. A command that routing holds (a fleet's
// Prepare, a move) must stop waiting by its own deadline, so routing reads
// it here. A Cmder that is not go-redis's (or a go-redis that moved the
// field) has none: its wait is bounded by the batch's context alone, as
// before.

// ctxField is where a command type keeps its context: the offset of a
// context.Context field named ctx; ok false when the type has none.
type ctxField struct {
	offset uintptr
	ok     bool
}

var ctxFields sync.Map // reflect.Type of the struct -> ctxField

var contextType = reflect.TypeFor[context.Context]()

// cmdContext returns the context cmd was built with, if go-redis's command
// type keeps one.
func cmdContext(cmd redis.Cmder) (context.Context, bool) {
	v := reflect.ValueOf(cmd)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	st := v.Elem().Type()
	fi, found := ctxFields.Load(st)
	if !found {
		var cf ctxField
		if f, ok := st.FieldByName("ctx"); ok && f.Type == contextType {
			cf.offset, cf.ok = fieldOffset(st, f.Index)
		}
		fi, _ = ctxFields.LoadOrStore(st, cf)
	}
	cf := fi.(ctxField)
	if !cf.ok {
		return nil, false
	}
	// The field is read once, by the goroutine routing the batch, after
	// the command's caller handed it over: no write races it.
	ctx := *(*context.Context)(unsafe.Add(v.UnsafePointer(), cf.offset))
	return ctx, ctx != nil
}

// fieldOffset is the offset in st of the field at index (a promoted
// field's StructField.Offset is within the struct that declares it); ok is
// false when the way to it goes through a pointer, which has no fixed
// offset.
func fieldOffset(st reflect.Type, index []int) (off uintptr, ok bool) {
	for _, i := range index {
		if st.Kind() != reflect.Struct {
			return 0, false
		}
		f := st.Field(i)
		off += f.Offset
		st = f.Type
	}
	return off, true
}

// holdContext returns the context that bounds how long routing may hold
// the commands of a batch on ctx (a pipeline, a transaction, a batch of an
// AutoPipeliner): ctx, ended too by the earliest deadline of the commands'
// own contexts and by the cancellation of any of them. A batch ends as a
// whole, so its commands' callers all wait for it: it may wait for no
// longer than the most pressed of them. stop releases it.
func holdContext(ctx context.Context, cmds []redis.Cmder) (hctx context.Context, stop func()) {
	var deadline time.Time
	var own []context.Context
	for _, cmd := range cmds {
		cc, ok := cmdContext(cmd)
		if !ok || cc == ctx || cc.Done() == nil || slices.Contains(own, cc) {
			continue
		}
		own = append(own, cc)
		if dl, ok := cc.Deadline(); ok && (deadline.IsZero() || dl.Before(deadline)) {
			deadline = dl
		}
	}
	if len(own) == 0 {
		return ctx, func() {}
	}
	var cancel context.CancelFunc
	if !deadline.IsZero() {
		hctx, cancel = context.WithDeadline(ctx, deadline)
	} else {
		hctx, cancel = context.WithCancel(ctx)
	}
	stops := make([]func() bool, 0, len(own))
	for _, cc := range own {
		stops = append(stops, context.AfterFunc(cc, cancel))
	}
	return hctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}
