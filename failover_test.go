package redshard

import (
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestFailoverTemplateCopiesEverySharedField: every field redis.Options and
// redis.FailoverOptions share (same name, same type) is copied, so a
// follower's Sentinel shards connect as its address shards do, whatever
// go-redis adds. Each field is set to a non-zero value by reflection.
func TestFailoverTemplateCopiesEverySharedField(t *testing.T) {
	var so redis.Options
	sv := reflect.ValueOf(&so).Elem()
	ft := reflect.TypeFor[redis.FailoverOptions]()
	var shared []string
	for i := range sv.NumField() {
		f := sv.Type().Field(i)
		g, ok := ft.FieldByName(f.Name)
		if !ok || g.Type != f.Type || !f.IsExported() {
			continue
		}
		shared = append(shared, f.Name)
		v := sv.Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x-" + f.Name)
		case reflect.Int, reflect.Int64:
			v.SetInt(int64(7 + i))
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Pointer:
			v.Set(reflect.New(f.Type.Elem()))
		case reflect.Func:
			v.Set(reflect.MakeFunc(f.Type, func([]reflect.Value) []reflect.Value { return nil }))
		case reflect.Interface:
			// No value of an arbitrary interface to make: checked by name
			// in the copy below only when set; these are rare enough
			// (StreamingCredentialsProvider, PushNotificationProcessor)
			// to be listed in failoverTemplate by hand.
		default:
			t.Fatalf("field %s: kind %v not handled by the test", f.Name, v.Kind())
		}
	}
	if len(shared) < 30 {
		t.Fatalf("only %d shared fields found: %v", len(shared), shared)
	}
	fo := reflect.ValueOf(failoverTemplate(&so)).Elem()
	for _, name := range shared {
		want, got := sv.FieldByName(name), fo.FieldByName(name)
		var same bool
		switch want.Kind() {
		case reflect.Func:
			same = got.Pointer() == want.Pointer()
		case reflect.Interface:
			same = got.IsNil() && want.IsNil()
		default:
			same = got.Equal(want)
		}
		if !same {
			t.Errorf("FailoverOptions.%s = %v, want %v (failoverTemplate does not copy it)", name, got, want)
		}
	}
}
