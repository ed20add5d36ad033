package merge

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/rediserr"
	"github.com/redshard/redshard/internal/replyval"
)

// Same reports whether two commands' replies are equal: as printed, or
// once every list in them is put in order (a server lists functions, users
// or commands in its hash tables' order, which differs between servers
// that hold the same things).
func Same(a, b redis.Cmder) bool {
	if a.String() == b.String() {
		return true
	}
	x, okx := value(a)
	y, oky := value(b)
	return okx && oky && canonical(x) == canonical(y)
}

// value returns what cmd's Val method returns.
func value(cmd redis.Cmder) (reflect.Value, bool) {
	m := reflect.ValueOf(cmd).MethodByName("Val")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return reflect.Value{}, false
	}
	return m.Call(nil)[0], true
}

// canonical prints v with the elements of every slice sorted.
func canonical(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return "nil"
		}
		return canonical(v.Elem())
	case reflect.Slice, reflect.Array:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = canonical(v.Index(i))
		}
		slices.Sort(parts)
		return "[" + strings.Join(parts, ",") + "]"
	case reflect.Struct:
		parts := make([]string, v.NumField())
		for i := range parts {
			parts[i] = canonical(v.Field(i))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case reflect.Map:
		parts := make([]string, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			parts = append(parts, canonical(it.Key())+":"+canonical(it.Value()))
		}
		slices.Sort(parts)
		return "map[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("%#v", v)
}

// ServerErr returns the server error every one of cmds got, if they all
// got the same one (COMMAND GETKEYS of an unknown command, a CONFIG SET of
// an unknown parameter), else nil. redis.Nil is no server error.
func ServerErr(cmds []redis.Cmder) error {
	first := cmds[0].Err()
	if !rediserr.Is(first) || first == redis.Nil {
		return nil
	}
	for _, c := range cmds[1:] {
		if err := c.Err(); err == nil || err.Error() != first.Error() {
			return nil
		}
	}
	return first
}

// Sum adds up the integer replies of cmds, or, with largest, keeps the
// largest (0 when every reply is negative). ok is false when a reply is
// not an integer; bad is then that command.
func Sum(cmds []redis.Cmder, largest bool) (n int64, bad redis.Cmder, ok bool) {
	var sum, top int64
	for _, c := range cmds {
		v, ok := replyval.Value(c).(int64)
		if !ok {
			return 0, c, false
		}
		sum, top = sum+v, max(top, v)
	}
	if largest {
		return top, nil, true
	}
	return sum, nil, true
}

// Any returns the reply of one of cmds that succeeded, chosen at random,
// and false when none did.
func Any(cmds []redis.Cmder) (any, bool) {
	var found []redis.Cmder
	for _, c := range cmds {
		if c.Err() == nil {
			found = append(found, c)
		}
	}
	if len(found) == 0 {
		return nil, false
	}
	return replyval.Value(found[rand.IntN(len(found))]), true
}

// Concat joins array replies in order; map replies (PUBSUB NUMSUB) are
// added up per field.
func Concat(cmds []redis.Cmder) (any, error) {
	switch replyval.Value(cmds[0]).(type) {
	case []string:
		var out []string
		for _, c := range cmds {
			out = append(out, replyval.Value(c).([]string)...)
		}
		return out, nil
	case []interface{}:
		var out []interface{}
		for _, c := range cmds {
			out = append(out, replyval.Value(c).([]interface{})...)
		}
		return out, nil
	case map[string]int64:
		out := map[string]int64{}
		for _, c := range cmds {
			for k, v := range replyval.Value(c).(map[string]int64) {
				out[k] += v
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot concatenate replies of type %T", cmds[0])
}

// Distinct drops the repeats of a concatenated list of names ([]string or
// []interface{}), keeping the first of each; other values are returned as
// they are.
func Distinct(v any) any {
	seen := map[interface{}]bool{}
	first := func(x interface{}) bool {
		if seen[x] {
			return false
		}
		seen[x] = true
		return true
	}
	switch names := v.(type) {
	case []string:
		return slices.DeleteFunc(names, func(n string) bool { return !first(n) })
	case []interface{}:
		return slices.DeleteFunc(names, func(n interface{}) bool { return !first(n) })
	}
	return v
}

// Without drops from a list of names ([]string or []interface{}) those
// for which drop is true; other values are returned as they are.
func Without(v any, drop func(string) bool) any {
	switch names := v.(type) {
	case []string:
		return slices.DeleteFunc(names, drop)
	case []interface{}:
		return slices.DeleteFunc(names, func(n interface{}) bool {
			s, ok := n.(string)
			return ok && drop(s)
		})
	}
	return v
}

// And combines 0/1 array replies element-wise (SCRIPT EXISTS: a script
// exists only if every shard has it).
func And(cmds []redis.Cmder) (any, error) {
	switch first := replyval.Value(cmds[0]).(type) {
	case []bool:
		out := append([]bool(nil), first...)
		for _, c := range cmds[1:] {
			v := replyval.Value(c).([]bool)
			for i := range out {
				out[i] = out[i] && i < len(v) && v[i]
			}
		}
		return out, nil
	case []interface{}:
		out := append([]interface{}(nil), first...)
		for _, c := range cmds[1:] {
			v := replyval.Value(c).([]interface{})
			for i := range out {
				if i >= len(v) || v[i] != int64(1) {
					out[i] = int64(0)
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot combine replies of type %T", cmds[0])
}

// SetResult stores a merged reply v in cmd, or, when cmd's type cannot
// hold it, an error.
func SetResult(cmd redis.Cmder, v any) {
	if !replyval.SetValue(cmd, v) {
		cmd.SetErr(fmt.Errorf("redshard: %s: cannot store a merged %T reply in a %T", command.DisplayName(cmd.Name()), v, cmd))
	}
}

// TypeErr is the error of a merge of name's replies that cmd's type
// cannot take part in.
func TypeErr(name string, cmd redis.Cmder) error {
	return fmt.Errorf("redshard: %s: cannot merge replies of type %T", command.DisplayName(name), cmd)
}
