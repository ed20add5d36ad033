// Package replyval carries the reply values of go-redis's typed commands from
// one command to another: the root package merges fan-out and split replies
// with it, and the hot-key layer (internal/hot) caches and copies replies
// with it. A value is taken from one command (ValueOf), copied (CloneValue)
// and stored in another of the same type (SetValue). It has no state and is
// safe for concurrent use.
package replyval

import (
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Reply kinds: the typed commands whose reply values the client carries
// from one command to another (merged fan-out and split replies, cached
// and copied hot-key replies). 0 means unsupported.
const (
	KindString byte = iota + 1
	KindInt
	KindBool
	KindFloat
	KindStatus
	KindStringSlice
	KindSlice
	KindMapStringString
	KindMapStringInt
	KindBoolSlice
	KindFloatSlice
	KindZSlice
	KindCmd
)

// ValueOf returns cmd's reply value and its kind, or kind 0 for a command
// type the client cannot carry.
func ValueOf(cmd redis.Cmder) (any, byte) {
	switch c := cmd.(type) {
	case *redis.StringCmd:
		return c.Val(), KindString
	case *redis.IntCmd:
		return c.Val(), KindInt
	case *redis.BoolCmd:
		return c.Val(), KindBool
	case *redis.FloatCmd:
		return c.Val(), KindFloat
	case *redis.StatusCmd:
		return c.Val(), KindStatus
	case *redis.StringSliceCmd:
		return c.Val(), KindStringSlice
	case *redis.SliceCmd:
		return c.Val(), KindSlice
	case *redis.MapStringStringCmd:
		return c.Val(), KindMapStringString
	case *redis.MapStringIntCmd:
		return c.Val(), KindMapStringInt
	case *redis.BoolSliceCmd:
		return c.Val(), KindBoolSlice
	case *redis.FloatSliceCmd:
		return c.Val(), KindFloatSlice
	case *redis.ZSliceCmd:
		return c.Val(), KindZSlice
	case *redis.Cmd:
		return c.Val(), KindCmd
	}
	return nil, 0
}

// Value is ValueOf without the kind.
func Value(cmd redis.Cmder) any {
	v, _ := ValueOf(cmd)
	return v
}

// SetValue stores v as cmd's reply, clearing its error. v's type must be
// the one ValueOf returns for cmd's type; it reports false, and changes
// nothing, when it is not.
func SetValue(cmd redis.Cmder, v any) bool {
	ok := true
	switch c := cmd.(type) {
	case *redis.StringCmd:
		ok = set(c.SetVal, v)
	case *redis.IntCmd:
		ok = set(c.SetVal, v)
	case *redis.BoolCmd:
		ok = set(c.SetVal, v)
	case *redis.FloatCmd:
		ok = set(c.SetVal, v)
	case *redis.StatusCmd:
		ok = set(c.SetVal, v)
	case *redis.StringSliceCmd:
		ok = set(c.SetVal, v)
	case *redis.SliceCmd:
		ok = set(c.SetVal, v)
	case *redis.MapStringStringCmd:
		ok = set(c.SetVal, v)
	case *redis.MapStringIntCmd:
		ok = set(c.SetVal, v)
	case *redis.BoolSliceCmd:
		ok = set(c.SetVal, v)
	case *redis.FloatSliceCmd:
		ok = set(c.SetVal, v)
	case *redis.ZSliceCmd:
		ok = set(c.SetVal, v)
	case *redis.Cmd:
		c.SetVal(v)
	default:
		ok = false
	}
	if ok {
		cmd.SetErr(nil)
	}
	return ok
}

// set calls setVal with v when v has setVal's type.
func set[T any](setVal func(T), v any) bool {
	t, ok := v.(T)
	if ok {
		setVal(t)
	}
	return ok
}

// CloneValue copies the slices and maps of a reply value, so that a caller
// that modifies its reply does not modify another's.
func CloneValue(v any) any {
	switch v := v.(type) {
	case []interface{}:
		if v == nil {
			return v
		}
		out := make([]interface{}, len(v))
		for i, e := range v {
			out[i] = CloneValue(e)
		}
		return out
	case map[interface{}]interface{}:
		out := make(map[interface{}]interface{}, len(v))
		for k, e := range v {
			out[k] = CloneValue(e)
		}
		return out
	case map[string]interface{}:
		out := make(map[string]interface{}, len(v))
		for k, e := range v {
			out[k] = CloneValue(e)
		}
		return out
	case []string:
		return slices.Clone(v)
	case []bool:
		return slices.Clone(v)
	case []float64:
		return slices.Clone(v)
	case []redis.Z:
		return slices.Clone(v)
	case map[string]string:
		return maps.Clone(v)
	case map[string]int64:
		return maps.Clone(v)
	}
	return v
}
