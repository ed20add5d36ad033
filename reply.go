package redshard

import (
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Reply kinds: the typed commands whose reply values the client carries
// from one command to another (merged fan-out and split replies, cached
// and copied hot-key replies). 0 means unsupported.
const (
	kindString byte = iota + 1
	kindInt
	kindBool
	kindFloat
	kindStatus
	kindStringSlice
	kindSlice
	kindMapStringString
	kindMapStringInt
	kindBoolSlice
	kindFloatSlice
	kindZSlice
	kindCmd
)

// valueOf returns cmd's reply value and its kind, or kind 0 for a command
// type the client cannot carry.
func valueOf(cmd redis.Cmder) (any, byte) {
	switch c := cmd.(type) {
	case *redis.StringCmd:
		return c.Val(), kindString
	case *redis.IntCmd:
		return c.Val(), kindInt
	case *redis.BoolCmd:
		return c.Val(), kindBool
	case *redis.FloatCmd:
		return c.Val(), kindFloat
	case *redis.StatusCmd:
		return c.Val(), kindStatus
	case *redis.StringSliceCmd:
		return c.Val(), kindStringSlice
	case *redis.SliceCmd:
		return c.Val(), kindSlice
	case *redis.MapStringStringCmd:
		return c.Val(), kindMapStringString
	case *redis.MapStringIntCmd:
		return c.Val(), kindMapStringInt
	case *redis.BoolSliceCmd:
		return c.Val(), kindBoolSlice
	case *redis.FloatSliceCmd:
		return c.Val(), kindFloatSlice
	case *redis.ZSliceCmd:
		return c.Val(), kindZSlice
	case *redis.Cmd:
		return c.Val(), kindCmd
	}
	return nil, 0
}

// value is valueOf without the kind.
func value(cmd redis.Cmder) any {
	v, _ := valueOf(cmd)
	return v
}

// setValue stores v as cmd's reply, clearing its error. v's type must be
// the one valueOf returns for cmd's type; it reports false, and changes
// nothing, when it is not.
func setValue(cmd redis.Cmder, v any) bool {
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

// cloneValue copies the slices and maps of a reply value, so that a caller
// that modifies its reply does not modify another's.
func cloneValue(v any) any {
	switch v := v.(type) {
	case []interface{}:
		if v == nil {
			return v
		}
		out := make([]interface{}, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	case map[interface{}]interface{}:
		out := make(map[interface{}]interface{}, len(v))
		for k, e := range v {
			out[k] = cloneValue(e)
		}
		return out
	case map[string]interface{}:
		out := make(map[string]interface{}, len(v))
		for k, e := range v {
			out[k] = cloneValue(e)
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
