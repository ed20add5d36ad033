package redshard

import (
	"context"
	"crypto/tls"
	"errors"
	"reflect"
	"testing"
	"time"

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

func TestSameFailover(t *testing.T) {
	onConnect := func(context.Context, *redis.Conn) error { return nil }
	other := func(context.Context, *redis.Conn) error { return errors.New("other") }
	tlsA, tlsB := &tls.Config{}, &tls.Config{}
	base := func() *redis.FailoverOptions {
		return &redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"s1:26379", "s2:26379"},
			Password: "pw", DB: 2, ReadTimeout: time.Second, TLSConfig: tlsA, OnConnect: onConnect}
	}
	for _, tc := range []struct {
		name   string
		change func(*redis.FailoverOptions)
		same   bool
	}{
		{"a new copy", func(*redis.FailoverOptions) {}, true},
		{"Sentinels in another order", func(f *redis.FailoverOptions) { f.SentinelAddrs = []string{"s2:26379", "s1:26379"} }, true},
		{"another master", func(f *redis.FailoverOptions) { f.MasterName = "n" }, false},
		{"another Sentinel", func(f *redis.FailoverOptions) { f.SentinelAddrs = []string{"s1:26379", "s3:26379"} }, false},
		{"one Sentinel fewer", func(f *redis.FailoverOptions) { f.SentinelAddrs = f.SentinelAddrs[:1] }, false},
		{"another password", func(f *redis.FailoverOptions) { f.Password = "new" }, false},
		{"another Sentinel password", func(f *redis.FailoverOptions) { f.SentinelPassword = "new" }, false},
		{"another DB", func(f *redis.FailoverOptions) { f.DB = 3 }, false},
		{"another timeout", func(f *redis.FailoverOptions) { f.ReadTimeout = 2 * time.Second }, false},
		{"another TLS config", func(f *redis.FailoverOptions) { f.TLSConfig = tlsB }, false},
		{"no TLS", func(f *redis.FailoverOptions) { f.TLSConfig = nil }, false},
		{"another OnConnect", func(f *redis.FailoverOptions) { f.OnConnect = other }, false},
		{"no OnConnect", func(f *redis.FailoverOptions) { f.OnConnect = nil }, false},
		{"replicas only", func(f *redis.FailoverOptions) { f.ReplicaOnly = true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.change(b)
			if got := sameFailover(a, b); got != tc.same {
				t.Errorf("sameFailover = %v, want %v", got, tc.same)
			}
			if got := sameFailover(b, a); got != tc.same {
				t.Errorf("sameFailover (swapped) = %v, want %v", got, tc.same)
			}
		})
	}
	if sameFailover(base(), nil) || sameFailover(nil, base()) || !sameFailover(nil, nil) {
		t.Error("nil: only nil is the same as nil")
	}
}
