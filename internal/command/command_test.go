package command_test

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redshard/redshard/internal/command"
)

func a(args ...interface{}) []interface{} { return args }

func TestLookup(t *testing.T) {
	tests := []struct {
		args  []interface{}
		name  string
		class command.Class
		keys  []int
		merge command.Merge
		step  int
		flags command.Flags
	}{
		{args: a("get", "k"), name: "get", class: command.Keyed, keys: []int{1}, flags: command.ReadOnly},
		{args: a("GET", "k"), name: "get", class: command.Keyed, keys: []int{1}, flags: command.ReadOnly},
		{args: a("GeT", "k"), name: "get", class: command.Keyed, keys: []int{1}, flags: command.ReadOnly},
		{args: a([]byte("GET"), "k"), name: "get", class: command.Keyed, keys: []int{1}, flags: command.ReadOnly},
		{args: a("set", "k", "v", "ex", 10), name: "set", class: command.Keyed, keys: []int{1}, flags: command.Write},
		{args: a("mget", "a", "b", "c"), name: "mget", class: command.Split, keys: []int{1, 2, 3}, step: 1, flags: command.ReadOnly},
		{args: a("mset", "a", 1, "b", 2), name: "mset", class: command.Split, keys: []int{1, 3}, step: 2, flags: command.Write},
		{args: a("msetex", 2, "a", 1, "b", 2, "px", 100), name: "msetex", class: command.Split, keys: []int{2, 4}, step: 2, flags: command.Write},
		{args: a("msetnx", "a", 1, "b", 2), name: "msetnx", class: command.Keyed, keys: []int{1, 3}, flags: command.Write},
		{args: a("del", "a"), name: "del", class: command.Split, keys: []int{1}, step: 1, flags: command.Write},
		{args: a("unlink", "a", "b"), name: "unlink", class: command.Split, keys: []int{1, 2}, step: 1, flags: command.Write},
		{args: a("exists", "a", "b"), name: "exists", class: command.Split, keys: []int{1, 2}, step: 1, flags: command.ReadOnly},
		{args: a("touch", "a"), name: "touch", class: command.Split, keys: []int{1}, step: 1, flags: command.ReadOnly},
		{args: a("eval", "s", 0), name: "eval", class: command.Keyed},
		{args: a("eval", "s", 2, "a", "b", "x"), name: "eval", class: command.Keyed, keys: []int{3, 4}},
		{args: a("EVALSHA", "sha", int64(1), "a"), name: "evalsha", class: command.Keyed, keys: []int{3}},
		{args: a("fcall_ro", "f", uint8(1), "a"), name: "fcall_ro", class: command.Keyed, keys: []int{3}, flags: command.ReadOnly},
		{args: a("eval", "s", 1.0, "a"), name: "eval", class: command.Keyed, keys: []int{3}}, // go-redis writes 1.0 as "1"
		{args: a("zunionstore", "d", 2, "a", "b", "weights", 1, 2), name: "zunionstore", class: command.Keyed, keys: []int{1, 3, 4}, flags: command.Write},
		{args: a("zinter", 1, "a", "withscores"), name: "zinter", class: command.Keyed, keys: []int{2}, flags: command.ReadOnly},
		{args: a("blmpop", 0, 2, "a", "b", "left"), name: "blmpop", class: command.Keyed, keys: []int{3, 4}, flags: command.Write | command.Blocking},
		{args: a("blpop", "a", "b", 0), name: "blpop", class: command.Keyed, keys: []int{1, 2}, flags: command.Write | command.Blocking},
		{args: a("bitop", "or", "d", "a", "b"), name: "bitop", class: command.Keyed, keys: []int{2, 3, 4}, flags: command.Write},
		{args: a("lmove", "a", "b", "left", "right"), name: "lmove", class: command.Keyed, keys: []int{1, 2}, flags: command.Write},
		{args: a("xread", "count", 1, "block", 0, "streams", "a", "b", "0", "0"), name: "xread", class: command.Keyed, keys: []int{6, 7}, flags: command.ReadOnly | command.Blocking},
		{args: a("xreadgroup", "GROUP", "g", "c", "CLAIM", 100, "STREAMS", "a", ">"), name: "xreadgroup", class: command.Keyed, keys: []int{7}, flags: command.Write | command.Blocking},
		{args: a("object", "encoding", "k"), name: "object|encoding", class: command.Keyed, keys: []int{2}, flags: command.ReadOnly},
		{args: a("OBJECT", "Encoding", "k"), name: "object|encoding", class: command.Keyed, keys: []int{2}, flags: command.ReadOnly},
		{args: a("memory", "usage", "k", "samples", 0), name: "memory|usage", class: command.Keyed, keys: []int{2}, flags: command.ReadOnly},
		{args: a("xinfo", "stream", "s", "full"), name: "xinfo|stream", class: command.Keyed, keys: []int{2}, flags: command.ReadOnly},
		{args: a("himport", "set", "h", "fs", "v1"), name: "himport|set", class: command.Keyed, keys: []int{2}, flags: command.Write},
		{args: a("sort", "k", "store", "d"), name: "sort", class: command.Keyed, keys: []int{1, 3}, flags: command.Write},
		{args: a("sort", "k", "store", "d", "by", "w_{t}_*"), name: "sort", class: command.Keyed, keys: []int{1, 3, 5}, flags: command.Write},
		{args: a("sort", "k", "get", "o_{t}_*", "store", "d1", "limit", 0, 1, "store", "d2"), name: "sort", class: command.Keyed, keys: []int{1, 3, 10}, flags: command.Write},
		{args: a("sort_ro", "k", "store", "d"), name: "sort_ro", class: command.Keyed, keys: []int{1}, flags: command.ReadOnly},
		{args: a("sort", "k", "by", "nosort", "get", "#"), name: "sort", class: command.Keyed, keys: []int{1}, flags: command.Write},
		// Untagged patterns read keys of any shard: OtherKeys, the patterns not reported.
		{args: a("sort", "k", "by", "w_*"), name: "sort", class: command.Keyed, keys: []int{1}, flags: command.Write | command.OtherKeys},
		{args: a("sort", "k", "get", "{}_*", "store", "d"), name: "sort", class: command.Keyed, keys: []int{1, 5}, flags: command.Write | command.OtherKeys},
		{args: a("sort", "k", "get", "{t_*}", "by", "w_{t}_*"), name: "sort", class: command.Keyed, keys: []int{1, 5}, flags: command.Write | command.OtherKeys},
		{args: a("sort_ro", "k", "get", "o_*->f"), name: "sort_ro", class: command.Keyed, keys: []int{1}, flags: command.ReadOnly | command.OtherKeys},
		{args: a("georadius", "g", 1, 2, 3, "km", "store", "d"), name: "georadius", class: command.Keyed, keys: []int{1, 7}, flags: command.Write},
		{args: a("georadiusbymember", "g", "m", 3, "km", "storedist", "d"), name: "georadiusbymember", class: command.Keyed, keys: []int{1, 6}, flags: command.Write},
		{args: a("migrate", "h", 1, "k", 0, 10, "replace"), name: "migrate", class: command.Keyed, keys: []int{3}, flags: command.Write},
		{args: a("migrate", "h", 1, []byte{}, 0, 10, "auth2", "u", "p", "keys", "a", "b"), name: "migrate", class: command.Keyed, keys: []int{10, 11}, flags: command.Write},
		{args: a("json.mget", "a", "b", "$"), name: "json.mget", class: command.Keyed, keys: []int{1, 2}, flags: command.ReadOnly},
		{args: a("JSON.MSET", "a", "$", "1", "b", "$", "2"), name: "json.mset", class: command.Keyed, keys: []int{1, 4}, flags: command.Write},
		{args: a("TS.MADD", "a", 1, 1, "b", 1, 2), name: "ts.madd", class: command.Keyed, keys: []int{1, 4}, flags: command.Write},
		{args: a("CMS.MERGE", "d", 2, "a", "b", "WEIGHTS", 1, 2), name: "cms.merge", class: command.Keyed, keys: []int{1, 3, 4}, flags: command.Write},
		{args: a("TS.NRANGE", 2, "a", "b", "-", "+"), name: "ts.nrange", class: command.Keyed, keys: []int{2, 3}, flags: command.ReadOnly},
		{args: a("publish", "ch", "m"), name: "publish", class: command.Channel, keys: []int{1}},
		{args: a("spublish", "ch", "m"), name: "spublish", class: command.Channel, keys: []int{1}},
		{args: a("ping"), name: "ping", class: command.Fanout, merge: command.MergeSame},
		{args: a("echo", "x"), name: "echo", class: command.Fanout, merge: command.MergeSame},
		{args: a("dbsize"), name: "dbsize", class: command.Fanout, merge: command.MergeSum, flags: command.ReadOnly},
		{args: a("flushdb", "async"), name: "flushdb", class: command.Fanout, merge: command.MergeAllOK, flags: command.Write},
		{args: a("flushall"), name: "flushall", class: command.Fanout, merge: command.MergeAllOK, flags: command.Write},
		{args: a("keys", "*"), name: "keys", class: command.Fanout, merge: command.MergeConcat, flags: command.ReadOnly},
		{args: a("randomkey"), name: "randomkey", class: command.Fanout, merge: command.MergeAny, flags: command.ReadOnly},
		{args: a("script", "load", "return 1"), name: "script|load", class: command.Fanout, merge: command.MergeSame},
		{args: a("SCRIPT", "EXISTS", "a", "b"), name: "script|exists", class: command.Fanout, merge: command.MergeAnd},
		{args: a("script", "flush"), name: "script|flush", class: command.Fanout, merge: command.MergeAllOK},
		{args: a("function", "load", "code"), name: "function|load", class: command.Fanout, merge: command.MergeSame, flags: command.Write},
		{args: a("function", "delete", "lib"), name: "function|delete", class: command.Fanout, merge: command.MergeAllOK, flags: command.Write},
		{args: a("config", "set", "a", "b"), name: "config|set", class: command.Fanout, merge: command.MergeAllOK},
		{args: a("config", "resetstat"), name: "config|resetstat", class: command.Fanout, merge: command.MergeAllOK},
		{args: a("pubsub", "numsub", "a"), name: "pubsub|numsub", class: command.Fanout, merge: command.MergeConcat},
		{args: a("pubsub", "numpat"), name: "pubsub|numpat", class: command.Fanout, merge: command.MergeMax},
		{args: a("TS.QUERYINDEX", "a=b"), name: "ts.queryindex", class: command.Fanout, merge: command.MergeConcat, flags: command.ReadOnly},
		{args: a("scan", 0), name: "scan", class: command.Scan, flags: command.ReadOnly},
		{args: a("info"), name: "info", class: command.NotSharded},
		{args: a("DEBUG", "OBJECT", "k"), name: "debug|object", class: command.Keyed, keys: []int{2}, flags: command.ReadOnly},
		{args: a("debug", "sleep", 0), name: "debug|sleep", class: command.NotSharded},
		{args: a("config", "get", "x"), name: "config|get", class: command.Fanout, merge: command.MergeSame},
		{args: a("client", "list"), name: "client|list", class: command.NotSharded},
		{args: a("CLIENT", "SETINFO", "lib-name", "x"), name: "client|setinfo", class: command.Fanout, merge: command.MergeAllOK},
		{args: a("client", "id"), name: "client|id", class: command.NotSharded},
		{args: a("function", "list"), name: "function|list", class: command.Fanout, merge: command.MergeSame},
		{args: a("function", "kill"), name: "function|kill", class: command.Fanout, merge: command.MergeKill},
		{args: a("time"), name: "time", class: command.NotSharded, flags: command.PerServer},
		{args: a("lastsave"), name: "lastsave", class: command.NotSharded, flags: command.PerServer},
		{args: a("client"), name: "client", class: command.NotSharded},
		{args: a("command"), name: "command", class: command.Fanout, merge: command.MergeSame},
		{args: a("select", 1), name: "select", class: command.NotSharded},
		{args: a("multi"), name: "multi", class: command.NotSharded},
		{args: a("watch", "a", "b"), name: "watch", class: command.NotSharded, keys: []int{1, 2}},
		{args: a("subscribe", "ch"), name: "subscribe", class: command.NotSharded},
		{args: a("wait", 1, 0), name: "wait", class: command.NotSharded, flags: command.Blocking},
		{args: a("object", "help"), name: "object|help", class: command.Fanout, merge: command.MergeSame},
		{args: a("FT.SEARCH", "idx", "*"), name: "ft.search", class: command.NotSharded, flags: command.ReadOnly},
		{args: a("himport", "prepare", "fs", "f1"), name: "himport|prepare", class: command.NotSharded},
		{args: a("nosuchcommand", "k"), name: "nosuchcommand", class: command.Unknown},
		{args: a("NoSuchCommand"), name: "nosuchcommand", class: command.Unknown},
		{args: a("object", "nosuchsub", "k"), name: "object|nosuchsub", class: command.Unknown},
		{args: a(42), name: "42", class: command.Unknown},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.args...), func(t *testing.T) {
			info, keys, err := command.Lookup(tt.args, nil)
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			want := command.Info{Name: tt.name, Class: tt.class, Merge: tt.merge, Step: tt.step, Flags: tt.flags}
			info.Hint = ""
			if info != want {
				t.Errorf("Info %+v; want %+v", info, want)
			}
			if !slices.Equal(keys, tt.keys) {
				t.Errorf("keys %v; want %v", keys, tt.keys)
			}
		})
	}
}

func TestLookupHints(t *testing.T) {
	for _, args := range [][]interface{}{
		a("info"), a("select", 1), a("multi"), a("watch", "k"), a("subscribe", "c"),
		a("client", "list"), a("client", "no-such-sub"), a("cluster", "info"), a("ft.search", "i", "*"),
	} {
		info, _, err := command.Lookup(args, nil)
		if err != nil || info.Class != command.NotSharded || info.Hint == "" {
			t.Errorf("Lookup(%v) = %+v, %v; want NotSharded with a hint", args, info, err)
		}
	}
	info, _, _ := command.Lookup(a("select", 1), nil)
	if !strings.Contains(info.Hint, "ShardOptions.DB") {
		t.Errorf("SELECT hint %q does not point at ShardOptions.DB", info.Hint)
	}
}

func TestLookupErrors(t *testing.T) {
	tests := []struct {
		args []interface{}
		want string // in the error text
	}{
		{nil, "empty command"},
		{a(), "empty command"},
		{a(nil), "empty command name"},
		{a(""), "empty command name"},
		{a("get"), "GET: wrong number of arguments"},
		{a("lmove", "a"), "LMOVE: wrong number of arguments"},
		{a("mget"), "MGET: wrong number of arguments"},
		{a("del"), "DEL: wrong number of arguments"},
		{a("mset", "a", 1, "b"), "MSET: wrong number of arguments"},
		{a("msetnx", "a"), "MSETNX: wrong number of arguments"},
		{a("json.mset", "a", "$"), "JSON.MSET: wrong number of arguments"},
		{a("blpop", 0), "BLPOP: wrong number of arguments"},
		{a("bitop", "and"), "BITOP: wrong number of arguments"},
		{a("eval", "s"), "EVAL: wrong number of arguments"},
		{a("eval", "s", "x", "k"), "EVAL: numkeys is not a non-negative integer"},
		{a("eval", "s", "", "k"), "numkeys is not"},
		{a("eval", "s", "01", "k"), "numkeys is not"},
		{a("eval", "s", "+1", "k"), "numkeys is not"},
		{a("eval", "s", " 1", "k"), "numkeys is not"},
		{a("eval", "s", "-0", "k"), "numkeys is not"},
		{a("eval", "s", -1, "k"), "numkeys is not"},
		{a("eval", "s", 1.5, "k"), "numkeys is not"},
		{a("eval", "s", nil, "k"), "numkeys is not"},
		{a("eval", "s", "99999999999999999999", "k"), "numkeys is not"},
		{a("eval", "s", uint64(math.MaxUint64), "k"), "numkeys is not"},
		{a("eval", "s", 2, "k"), "EVAL: numkeys is greater than the number of arguments"},
		{a("eval", "s", math.MaxInt64, "k"), "numkeys is greater"},
		{a("fcall", "f", 3, "a", "b"), "FCALL: numkeys is greater"},
		{a("zunionstore", "d", 2, "a"), "ZUNIONSTORE: numkeys is greater"},
		{a("zunionstore", "d"), "ZUNIONSTORE: wrong number of arguments"},
		{a("blmpop", 0), "BLMPOP: wrong number of arguments"},
		{a("msetex", 2, "a", 1, "b"), "MSETEX: numkeys is greater"},
		{a("xread", "count", 1), "XREAD: missing STREAMS"},
		{a("xread", "streams"), "STREAMS needs one ID for each stream"},
		{a("xread", "streams", "a", "b", "0"), "STREAMS needs one ID"},
		{a("xread", "newoption", "streams", "a", "0"), `XREAD: unexpected argument "newoption" before STREAMS`},
		{a("xreadgroup", "group", "g"), "XREADGROUP: missing STREAMS"},
		{a("sort"), "SORT: wrong number of arguments"},
		{a("sort", "k", "by"), "SORT: BY needs a pattern"},
		{a("sort", "k", "store"), "SORT: STORE needs a destination key"},
		{a("sort", "k", "by", "w_*", "get"), "SORT: GET needs a pattern"},
		{a("georadius", "g", 1, 2, 3, "km", "store"), "GEORADIUS: STORE needs a destination key"},
		{a("migrate", "h", 1, "k", 0), "MIGRATE: wrong number of arguments"},
		{a("migrate", "h", 1, "", 0, 10), "MIGRATE: empty key and no KEYS option"},
		{a("migrate", "h", 1, "k", 0, 10, "keys", "a"), "MIGRATE: KEYS needs an empty key argument"},
		{a("migrate", "h", 1, "", 0, 10, "keys"), "MIGRATE: KEYS needs at least one key"},
		{a("object"), "OBJECT: missing subcommand"},
		{a("object", "encoding"), "OBJECT ENCODING: wrong number of arguments"},
		{a("xgroup", "create"), "XGROUP CREATE: wrong number of arguments"},
		{a("memory", "usage"), "MEMORY USAGE: wrong number of arguments"},
		{a("publish"), "PUBLISH: wrong number of arguments"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.args...), func(t *testing.T) {
			prior := []int{7, 8}
			_, keys, err := command.Lookup(tt.args, prior)
			if err == nil {
				t.Fatalf("no error; keys %v", keys)
			}
			if !errors.Is(err, command.ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if !slices.Equal(keys, prior) {
				t.Errorf("keys %v on error; want the caller's %v unextended", keys, prior)
			}
		})
	}
}

// Lookup appends to the caller's slice and keeps what was there.
func TestLookupAppends(t *testing.T) {
	buf := make([]int, 1, 8)
	buf[0] = 99
	_, keys, err := command.Lookup(a("mget", "a", "b"), buf)
	if err != nil || !slices.Equal(keys, []int{99, 1, 2}) {
		t.Fatalf("keys %v, %v; want [99 1 2]", keys, err)
	}
	if &keys[0] != &buf[0] {
		t.Error("Lookup reallocated a slice that had room")
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	mget := a("mget")
	for i := range 10 {
		mget = append(mget, fmt.Sprint("key", i))
	}
	for _, args := range [][]interface{}{
		a("get", "k"),
		a("GET", "k"),
		a([]byte("get"), []byte("k")),
		a("set", "k", "v", "ex", 10),
		a("hget", "h", "f"),
		a("incr", "k"),
		a("del", "a", "b"),
		mget,
		a("mset", "a", 1, "b", 2),
		a("eval", "return 1", 2, "a", "b", "x"),
		a("evalsha", "sha", "1", "a"),
		a("xreadgroup", "group", "g", "c", "count", 10, "block", 100, "streams", "s1", "s2", ">", ">"),
		a("object", "encoding", "k"),
		a("ping"),
		a("publish", "ch", "m"),
	} {
		var buf [16]int
		allocs := testing.AllocsPerRun(100, func() {
			_, _, _ = command.Lookup(args, buf[:0])
		})
		if allocs != 0 {
			t.Errorf("Lookup(%v) allocates %v times", args, allocs)
		}
	}
}

type marshaler struct{ b []byte }

func (m marshaler) MarshalBinary() ([]byte, error) { return m.b, nil }

type badMarshaler struct{}

func (badMarshaler) MarshalBinary() ([]byte, error) { return nil, errors.New("no") }

type myString string

func TestArg(t *testing.T) {
	s, i, i8, i16, i32, i64 := "sp", 7, int8(-8), int16(16), int32(-32), int64(64)
	u, u8, u16, u32, u64, up := uint(1), uint8(8), uint16(16), uint32(32), uint64(64), uintptr(9)
	f32, f64, yes := float32(0.1), 2.5, true
	ts := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	d := 1500 * time.Millisecond
	tests := []struct {
		v    interface{}
		want string
	}{
		{nil, ""},
		{"s", "s"},
		{&s, "sp"},
		{(*string)(nil), ""},
		{[]byte("b"), "b"},
		{[]byte(nil), ""},
		{-1, "-1"},
		{&i, "7"},
		{(*int)(nil), "0"},
		{i8, "-8"}, {&i8, "-8"}, {(*int8)(nil), "0"},
		{i16, "16"}, {&i16, "16"},
		{i32, "-32"}, {&i32, "-32"},
		{int64(math.MinInt64), "-9223372036854775808"}, {&i64, "64"},
		{u, "1"}, {&u, "1"}, {(*uint)(nil), "0"},
		{u8, "8"}, {&u8, "8"},
		{u16, "16"}, {&u16, "16"},
		{u32, "32"}, {&u32, "32"},
		{uint64(math.MaxUint64), "18446744073709551615"}, {&u64, "64"},
		{up, "9"}, {&up, "9"},
		{f32, "0.10000000149011612"}, {&f32, "0.10000000149011612"}, {(*float32)(nil), "0"},
		{f64, "2.5"}, {&f64, "2.5"}, {(*float64)(nil), "0"},
		{1e21, "1000000000000000000000"},
		{1.0, "1"},
		{math.Inf(1), "+Inf"},
		{true, "1"}, {false, "0"}, {&yes, "1"}, {(*bool)(nil), "0"},
		{ts, "2024-01-02T03:04:05.000000006Z"},
		{&ts, "2024-01-02T03:04:05.000000006Z"},
		{(*time.Time)(nil), "0001-01-01T00:00:00Z"},
		{d, "1500000000"}, {&d, "1500000000"}, {(*time.Duration)(nil), "0"},
		{marshaler{[]byte("m")}, "m"},
		{badMarshaler{}, ""},
		{net.IPv4(1, 2, 3, 4).To4(), "\x01\x02\x03\x04"},
		{myString("x"), ""}, // go-redis refuses named string types
		{struct{}{}, ""},
	}
	for _, tt := range tests {
		if got := command.Arg(tt.v); got != tt.want {
			t.Errorf("Arg(%T %v) = %q; want %q", tt.v, tt.v, got, tt.want)
		}
	}
}

func TestStrings(t *testing.T) {
	if s := command.Keyed.String(); s != "Keyed" {
		t.Errorf("Keyed.String() = %q", s)
	}
	if s := command.Class(200).String(); s != "Class(200)" {
		t.Errorf("Class(200).String() = %q", s)
	}
	if s := command.MergeSum.String(); s != "MergeSum" {
		t.Errorf("MergeSum.String() = %q", s)
	}
	if s := (command.Write | command.Blocking).String(); s != "Write|Blocking" {
		t.Errorf("flags = %q", s)
	}
	if s := command.Flags(0).String(); s != "0" {
		t.Errorf("no flags = %q", s)
	}
}

func ExampleLookup() {
	var buf [8]int
	args := []interface{}{"zunionstore", "out", 2, "a", "b", "weights", 1, 2}
	info, keys, err := command.Lookup(args, buf[:0])
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Name, info.Class, info.Flags)
	var names []string
	for _, k := range keys {
		names = append(names, command.Arg(args[k]))
	}
	fmt.Println(strings.Join(names, " "))
	// Output:
	// zunionstore Keyed Write
	// out a b
}
