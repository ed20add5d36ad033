package merge_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/merge"
)

var ctx = context.Background()

// serverErr is an error reply of a server.
type serverErr string

func (e serverErr) Error() string { return string(e) }
func (serverErr) RedisError()     {}

func ints(vals ...int64) []redis.Cmder {
	var out []redis.Cmder
	for _, v := range vals {
		c := redis.NewIntCmd(ctx, "dbsize")
		c.SetVal(v)
		out = append(out, c)
	}
	return out
}

func strs(lists ...[]string) []redis.Cmder {
	var out []redis.Cmder
	for _, l := range lists {
		c := redis.NewStringSliceCmd(ctx, "keys", "*")
		c.SetVal(l)
		out = append(out, c)
	}
	return out
}

func raw(lists ...[]interface{}) []redis.Cmder {
	var out []redis.Cmder
	for _, l := range lists {
		c := redis.NewSliceCmd(ctx, "keys", "*")
		c.SetVal(l)
		out = append(out, c)
	}
	return out
}

func withErr(err error) redis.Cmder {
	c := redis.NewStatusCmd(ctx, "config", "set", "x", "y")
	c.SetErr(err)
	return c
}

func TestSame(t *testing.T) {
	lib := func(names ...string) redis.Cmder {
		c := redis.NewFunctionListCmd(ctx, "function", "list")
		var libs []redis.Library
		for _, n := range names {
			libs = append(libs, redis.Library{Name: n, Engine: "LUA", Functions: []redis.Function{{Name: n + "_f"}}})
		}
		c.SetVal(libs)
		return c
	}
	for _, tc := range []struct {
		name string
		a, b redis.Cmder
		want bool
	}{
		{"equal ints", ints(3)[0], ints(3)[0], true},
		{"different ints", ints(3)[0], ints(4)[0], false},
		{"lists in another order", strs([]string{"a", "b"})[0], strs([]string{"b", "a"})[0], true},
		{"lists of other elements", strs([]string{"a", "b"})[0], strs([]string{"a", "c"})[0], false},
		{"libraries in another order", lib("x", "y"), lib("y", "x"), true},
		{"other libraries", lib("x", "y"), lib("x", "z"), false},
		{"one library more", lib("x"), lib("x", "y"), false},
	} {
		if got := merge.Same(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Same = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestServerErr(t *testing.T) {
	unknown := serverErr("ERR Unknown option or number of arguments for CONFIG SET - 'x'")
	for _, tc := range []struct {
		name string
		cmds []redis.Cmder
		want error
	}{
		{"every shard, the same server error", []redis.Cmder{withErr(unknown), withErr(unknown)}, unknown},
		{"one shard answered", []redis.Cmder{withErr(unknown), ints(1)[0]}, nil},
		{"another server error", []redis.Cmder{withErr(unknown), withErr(serverErr("ERR other"))}, nil},
		{"redis.Nil is no server error", []redis.Cmder{withErr(redis.Nil), withErr(redis.Nil)}, nil},
		{"an I/O error is no server error", []redis.Cmder{withErr(errors.New("reset")), withErr(errors.New("reset"))}, nil},
	} {
		if got := merge.ServerErr(tc.cmds); got != tc.want {
			t.Errorf("%s: ServerErr = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSum(t *testing.T) {
	if n, _, ok := merge.Sum(ints(1, 5, 2), false); !ok || n != 8 {
		t.Errorf("Sum(1, 5, 2) = %d, %v; want 8, true", n, ok)
	}
	if n, _, ok := merge.Sum(ints(1, 5, 2), true); !ok || n != 5 {
		t.Errorf("Sum(1, 5, 2, largest) = %d, %v; want 5, true", n, ok)
	}
	mixed := append(ints(1), strs([]string{"a"})...)
	if _, bad, ok := merge.Sum(mixed, false); ok || bad != mixed[1] {
		t.Errorf("Sum of an int and a list: ok %v, bad %v; want false and the list", ok, bad)
	}
}

func TestAny(t *testing.T) {
	if _, ok := merge.Any([]redis.Cmder{withErr(redis.Nil), withErr(redis.Nil)}); ok {
		t.Error("Any of two nil replies: ok, want none")
	}
	cmds := []redis.Cmder{withErr(redis.Nil), ints(7)[0], withErr(redis.Nil)}
	for range 20 {
		if v, ok := merge.Any(cmds); !ok || v != int64(7) {
			t.Fatalf("Any with one reply = %v, %v; want 7, true", v, ok)
		}
	}
}

func TestConcat(t *testing.T) {
	got, err := merge.Concat(strs([]string{"a", "b"}, nil, []string{"c"}))
	if want := []string{"a", "b", "c"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Concat of string lists = %v, %v; want %v", got, err, want)
	}
	got, err = merge.Concat(raw([]interface{}{"a"}, []interface{}{int64(1)}))
	if want := []interface{}{"a", int64(1)}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Concat of raw lists = %v, %v; want %v", got, err, want)
	}
	var subs []redis.Cmder
	for _, m := range []map[string]int64{{"ch": 1, "a": 2}, {"ch": 3}} {
		c := redis.NewMapStringIntCmd(ctx, "pubsub", "numsub", "ch", "a")
		c.SetVal(m)
		subs = append(subs, c)
	}
	got, err = merge.Concat(subs)
	if want := map[string]int64{"ch": 4, "a": 2}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Concat of counts = %v, %v; want %v", got, err, want)
	}
	if _, err := merge.Concat(ints(1, 2)); err == nil {
		t.Error("Concat of integers: no error")
	}
}

func TestDistinctAndWithout(t *testing.T) {
	if got, want := merge.Distinct([]string{"a", "b", "a", "c", "b"}), []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Distinct = %v, want %v", got, want)
	}
	if got, want := merge.Distinct([]interface{}{"a", "a", int64(1)}), []interface{}{"a", int64(1)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Distinct = %v, want %v", got, want)
	}
	internal := func(k string) bool { return strings.HasPrefix(k, "redshard:") }
	if got, want := merge.Without([]string{"a", "redshard:x", "b"}, internal), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Without = %v, want %v", got, want)
	}
	if got, want := merge.Without([]interface{}{"redshard:x", int64(1), "b"}, internal), []interface{}{int64(1), "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Without = %v, want %v", got, want)
	}
	if got := merge.Without(int64(3), internal); got != int64(3) {
		t.Errorf("Without of a number = %v, want it unchanged", got)
	}
}

func TestAnd(t *testing.T) {
	var bools []redis.Cmder
	for _, v := range [][]bool{{true, true, false}, {true, false, true}} {
		c := redis.NewBoolSliceCmd(ctx, "script", "exists", "a", "b", "c")
		c.SetVal(v)
		bools = append(bools, c)
	}
	got, err := merge.And(bools)
	if want := []bool{true, false, false}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("And of bools = %v, %v; want %v", got, err, want)
	}
	got, err = merge.And(raw([]interface{}{int64(1), int64(1)}, []interface{}{int64(1)}))
	if want := []interface{}{int64(1), int64(0)}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("And of raw replies, one shorter = %v, %v; want %v", got, err, want)
	}
	if _, err := merge.And(ints(1)); err == nil {
		t.Error("And of an integer: no error")
	}
}

func TestSetResult(t *testing.T) {
	c := redis.NewIntCmd(ctx, "dbsize")
	merge.SetResult(c, int64(9))
	if v, err := c.Result(); err != nil || v != 9 {
		t.Errorf("SetResult(9) on an IntCmd: %d, %v", v, err)
	}
	s := redis.NewStringSliceCmd(ctx, "script", "load")
	merge.SetResult(s, int64(9))
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "SCRIPT: cannot store a merged int64") {
		t.Errorf("SetResult of an integer on a StringSliceCmd: error %v, want one naming the command and the types", err)
	}
	if err := merge.TypeErr("config|get", s); !strings.Contains(err.Error(), "CONFIG GET") {
		t.Errorf("TypeErr = %v, want it to name CONFIG GET", err)
	}
}
