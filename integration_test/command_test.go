package integration_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/redistest"
)

// a builds an argument list.
func a(args ...interface{}) []interface{} { return args }

// getkeysCases are invocations whose key positions, as found by
// command.Lookup, must equal what the server's COMMAND GETKEYS says. Key
// names are distinct so that order is checked too. Arguments mix strings,
// []byte and numbers as go-redis callers pass them.
var getkeysCases = [][]interface{}{
	// Strings.
	a("get", "k"),
	a("GET", "k"),
	a("get", 42),
	a("get", []byte("bk")),
	a("set", "k", "v"),
	a("set", "k", "v", "ex", 10, "nx", "get"),
	a("setex", "k", 10, "v"),
	a("psetex", "k", 100, "v"),
	a("setnx", "k", "v"),
	a("getset", "k", "v"),
	a("getdel", "k"),
	a("getex", "k", "persist"),
	a("getrange", "k", 0, 1),
	a("setrange", "k", 0, "v"),
	a("append", "k", "v"),
	a("strlen", "k"),
	a("substr", "k", 0, 1),
	a("incr", "k"),
	a("incrby", "k", 2),
	a("incrbyfloat", "k", 1.5),
	a("decr", "k"),
	a("decrby", "k", 2),
	a("mget", "k1", "k2", "k3"),
	a("mset", "k1", 1, "k2", 2),
	a("msetnx", "k1", 1, "k2", 2, "k3", 3),
	a("lcs", "k1", "k2"),
	a("lcs", "k1", "k2", "len"),

	// Bitmaps.
	a("setbit", "k", 1, 1),
	a("getbit", "k", 1),
	a("bitcount", "k"),
	a("bitcount", "k", 0, 1, "bit"),
	a("bitpos", "k", 1),
	a("bitop", "and", "dest", "k1", "k2", "k3"),
	a("bitop", "not", "dest", "k1"),
	a("bitfield", "k", "get", "u8", 0),
	a("bitfield", "k", "set", "u8", 0, 1, "incrby", "u8", 0, 1),
	a("bitfield_ro", "k", "get", "u8", 0),

	// Hashes.
	a("hset", "h", "f", "v"),
	a("hset", "h", "f1", "v1", "f2", "v2"),
	a("hsetnx", "h", "f", "v"),
	a("hget", "h", "f"),
	a("hmget", "h", "f1", "f2"),
	a("hmset", "h", "f", "v"),
	a("hdel", "h", "f1", "f2"),
	a("hexists", "h", "f"),
	a("hgetall", "h"),
	a("hkeys", "h"),
	a("hvals", "h"),
	a("hlen", "h"),
	a("hstrlen", "h", "f"),
	a("hincrby", "h", "f", 1),
	a("hincrbyfloat", "h", "f", 0.5),
	a("hrandfield", "h", 2, "withvalues"),
	a("hscan", "h", 0, "match", "f*"),

	// Lists.
	a("lpush", "l", "a", "b"),
	a("rpush", "l", "a"),
	a("lpushx", "l", "a"),
	a("rpushx", "l", "a"),
	a("lpop", "l"),
	a("lpop", "l", 2),
	a("rpop", "l"),
	a("llen", "l"),
	a("lrange", "l", 0, -1),
	a("lindex", "l", 0),
	a("lset", "l", 0, "v"),
	a("linsert", "l", "before", "a", "b"),
	a("lrem", "l", 0, "a"),
	a("ltrim", "l", 0, 1),
	a("lpos", "l", "a", "rank", 1),
	a("lmove", "src", "dst", "left", "right"),
	a("blmove", "src", "dst", "left", "right", 0),
	a("rpoplpush", "src", "dst"),
	a("brpoplpush", "src", "dst", 0),
	a("blpop", "l1", "l2", "l3", 0),
	a("brpop", "l1", "l2", 1.5),
	a("lmpop", 2, "l1", "l2", "left"),
	a("lmpop", 1, "l1", "right", "count", 2),
	a("blmpop", 0, 2, "l1", "l2", "left", "count", 1),

	// Sets.
	a("sadd", "s", "a"),
	a("srem", "s", "a", "b"),
	a("smembers", "s"),
	a("sismember", "s", "a"),
	a("smismember", "s", "a", "b"),
	a("scard", "s"),
	a("spop", "s"),
	a("srandmember", "s", 2),
	a("smove", "s1", "s2", "m"),
	a("sdiff", "s1", "s2", "s3"),
	a("sdiffstore", "dest", "s1", "s2"),
	a("sinter", "s1", "s2"),
	a("sinterstore", "dest", "s1", "s2", "s3"),
	a("sintercard", 2, "s1", "s2", "limit", 1),
	a("sunion", "s1", "s2"),
	a("sunionstore", "dest", "s1"),
	a("sscan", "s", 0, "count", 10),

	// Sorted sets.
	a("zadd", "z", 1, "a"),
	a("zadd", "z", "nx", 1, "a", 2, "b"),
	a("zincrby", "z", 1, "a"),
	a("zrem", "z", "a"),
	a("zcard", "z"),
	a("zcount", "z", 0, 1),
	a("zscore", "z", "a"),
	a("zmscore", "z", "a", "b"),
	a("zrank", "z", "a"),
	a("zrevrank", "z", "a"),
	a("zrange", "z", 0, -1, "withscores"),
	a("zrange", "z", "(1", 5, "byscore", "limit", 0, 1),
	a("zrangebyscore", "z", 0, 1),
	a("zrevrangebyscore", "z", 1, 0),
	a("zrangebylex", "z", "-", "+"),
	a("zrevrangebylex", "z", "+", "-"),
	a("zlexcount", "z", "-", "+"),
	a("zremrangebyrank", "z", 0, 1),
	a("zremrangebyscore", "z", 0, 1),
	a("zremrangebylex", "z", "-", "+"),
	a("zrevrange", "z", 0, 1),
	a("zpopmin", "z", 2),
	a("zpopmax", "z"),
	a("bzpopmin", "z1", "z2", 0),
	a("bzpopmax", "z1", "z2", "z3", 0.5),
	a("zrandmember", "z", 1),
	a("zrangestore", "dest", "z", 0, -1),
	a("zunion", 2, "z1", "z2", "weights", 1, 2),
	a("zinter", 2, "z1", "z2", "withscores"),
	a("zdiff", 2, "z1", "z2"),
	a("zunionstore", "dest", 2, "z1", "z2", "aggregate", "max"),
	a("zinterstore", "dest", 3, "z1", "z2", "z3"),
	a("zdiffstore", "dest", 2, "z1", "z2"),
	a("zintercard", 2, "z1", "z2", "limit", 0),
	a("zmpop", 2, "z1", "z2", "min"),
	a("bzmpop", 1, 2, "z1", "z2", "max", "count", 2),
	a("zscan", "z", 0),

	// Streams.
	a("xadd", "st", "*", "f", "v"),
	a("xadd", "st", "maxlen", "~", 10, "*", "f", "v"),
	a("xlen", "st"),
	a("xrange", "st", "-", "+"),
	a("xrevrange", "st", "+", "-", "count", 1),
	a("xdel", "st", "1-1"),
	a("xtrim", "st", "maxlen", 10),
	a("xread", "streams", "st1", "st2", "0", "0"),
	a("xread", "count", 10, "block", 0, "streams", "st1", "0"),
	a("XREAD", "COUNT", 10, "STREAMS", "st1", "st2", "st3", "0", "0", "0"),
	a("xreadgroup", "group", "g", "c", "streams", "st1", ">"),
	a("xreadgroup", "group", "g", "c", "count", 1, "block", 10, "noack", "streams", "st1", "st2", ">", ">"),
	a("xreadgroup", "group", "streams", "c", "streams", "streams", "0"),
	a("xack", "st", "g", "1-1"),
	a("xpending", "st", "g"),
	a("xclaim", "st", "g", "c", 10, "1-1"),
	a("xautoclaim", "st", "g", "c", 10, "0"),
	a("xsetid", "st", "1-1"),
	a("xgroup", "create", "st", "g", "$", "mkstream"),
	a("xgroup", "createconsumer", "st", "g", "c"),
	a("xgroup", "delconsumer", "st", "g", "c"),
	a("xgroup", "destroy", "st", "g"),
	a("xgroup", "setid", "st", "g", "$"),
	a("xinfo", "stream", "st"),
	a("xinfo", "stream", "st", "full"),
	a("xinfo", "groups", "st"),
	a("xinfo", "consumers", "st", "g"),

	// Geo.
	a("geoadd", "geo", 13.361389, 38.115556, "palermo"),
	a("geodist", "geo", "a", "b"),
	a("geohash", "geo", "a"),
	a("geopos", "geo", "a"),
	a("georadius", "geo", 15, 37, 200, "km"),
	a("georadius", "geo", 15, 37, 200, "km", "store", "dest"),
	a("georadius", "geo", 15, 37, 200, "km", "withdist", "storedist", "dest2"),
	a("georadius", "geo", 15, 37, 200, "km", "store", "dest1", "storedist", "dest2"),
	a("georadius_ro", "geo", 15, 37, 200, "km"),
	a("georadiusbymember", "geo", "palermo", 100, "km", "store", "dest"),
	a("georadiusbymember_ro", "geo", "palermo", 100, "km"),
	a("geosearch", "geo", "fromlonlat", 15, 37, "byradius", 200, "km"),
	a("geosearchstore", "dest", "geo", "frommember", "palermo", "bybox", 100, 100, "km"),

	// HyperLogLog.
	a("pfadd", "hll", "a", "b"),
	a("pfcount", "hll1", "hll2"),
	a("pfmerge", "dest", "hll1", "hll2"),
	a("pfdebug", "getreg", "hll"),

	// Keyspace.
	a("del", "k1", "k2", "k3"),
	a("unlink", "k1", "k2"),
	a("exists", "k1", "k2"),
	a("touch", "k1"),
	a("type", "k"),
	a("ttl", "k"),
	a("pttl", "k"),
	a("expire", "k", 10, "nx"),
	a("pexpire", "k", 100),
	a("expireat", "k", 1700000000),
	a("pexpireat", "k", 1700000000000),
	a("expiretime", "k"),
	a("pexpiretime", "k"),
	a("persist", "k"),
	a("rename", "src", "dst"),
	a("renamenx", "src", "dst"),
	a("copy", "src", "dst"),
	a("copy", "src", "dst", "db", 1, "replace"),
	a("move", "k", 1),
	a("dump", "k"),
	a("restore", "k", 0, "payload", "replace"),
	a("object", "encoding", "k"),
	a("OBJECT", "FREQ", "k"),
	a("object", "idletime", "k"),
	a("object", "refcount", "k"),
	a("memory", "usage", "k"),
	a("memory", "usage", "k", "samples", 5),
	a("sort", "k"),
	a("sort", "k", "limit", 0, 10, "alpha", "desc", "store", "dest"),
	a("sort", "k", "store", "dest1", "store", "dest2"),
	a("sort", "k", "by", "nosort", "get", "#"),
	a("sort_ro", "k", "alpha"),
	a("migrate", "host", 6000, "k", 0, 100),
	a("migrate", "host", 6000, "", 0, 100, "keys", "k1", "k2"),
	a("migrate", "host", 6000, "", 0, 100, "copy", "replace", "auth", "pw", "keys", "k1", "k2"),
	a("migrate", "host", 6000, "", 0, 100, "auth2", "user", "keys", "keys", "k1"),

	// Scripting.
	a("eval", "return 1", 0),
	a("eval", "return 1", 2, "k1", "k2", "arg1", "arg2"),
	a("eval", "return 1", "2", []byte("k1"), "k2"),
	a("evalsha", "0123456789012345678901234567890123456789", 1, "k1"),
	a("eval_ro", "return 1", 1, "k1", "arg"),
	a("evalsha_ro", "0123456789012345678901234567890123456789", 3, "k1", "k2", "k3"),
	a("fcall", "fn", 2, "k1", "k2", "arg"),
	a("fcall_ro", "fn", 0, "arg"),

	// Keyless.
	a("ping"),
	a("echo", "x"),
	a("dbsize"),
	a("keys", "*"),
	a("randomkey"),
	a("scan", 0, "match", "k*"),
	a("flushdb", "async"),
	a("info", "server"),
	a("time"),
	a("script", "load", "return 1"),
	a("function", "flush"),
	a("config", "get", "maxmemory"),
	a("client", "list"),
	a("pubsub", "channels"),
	a("wait", 1, 0),

	// Keys of NotSharded commands are reported too.
	a("watch", "k1", "k2"),
}

// TestLookupMatchesGetKeys checks command.Lookup's key positions against
// the server's COMMAND GETKEYS.
func TestLookupMatchesGetKeys(t *testing.T) {
	ctx := context.Background()
	rdb := protocol2Client(t, redistest.Start(t))

	for _, args := range getkeysCases {
		t.Run(caseName(args), func(t *testing.T) {
			want, err := getKeys(ctx, rdb, args)
			if err != nil {
				t.Fatalf("COMMAND GETKEYS: %v", err)
			}
			var buf [8]int
			info, keys, err := command.Lookup(args, buf[:0])
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if info.Class == command.Unknown {
				t.Fatalf("Lookup: class Unknown")
			}
			got := keyNames(args, keys)
			if len(want) == 0 && info.Class == command.Keyed && len(keys) > 0 {
				t.Fatalf("server says no keys; Lookup says Keyed with keys %q", got)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Lookup keys %q (class %v); COMMAND GETKEYS %q", got, info.Class, want)
			}
		})
	}
	if n := len(getkeysCases); n < 150 {
		t.Errorf("only %d GETKEYS cases; keep at least 150", n)
	}
	t.Logf("%d invocations checked against COMMAND GETKEYS", len(getkeysCases))
}

// TestLookupDeviations covers where Lookup deliberately differs from
// COMMAND GETKEYS (see the command package doc).
func TestLookupDeviations(t *testing.T) {
	ctx := context.Background()
	rdb := protocol2Client(t, redistest.Start(t))

	cases := []struct {
		name    string
		args    []interface{}
		class   command.Class
		extra   []string // keys Lookup reports beyond GETKEYS, merged in argument order
		anyKeys bool     // Lookup sets OtherKeys
	}{
		{
			// PUBLISH names no key for the server; the client routes it by
			// channel, so Lookup reports the channel's position.
			name: "publish", args: a("publish", "ch", "msg"), class: command.Channel, extra: []string{"ch"},
		},
		{
			// SPUBLISH's channel is not a key for GETKEYS (7.0.x marks it
			// not_key); it is routed by channel like PUBLISH.
			name: "spublish", args: a("spublish", "ch", "msg"), class: command.Channel, extra: []string{"ch"},
		},
		{
			// Shard channels of SSUBSCRIBE are reported, for the client's
			// SSubscribe to check they share a shard.
			name: "ssubscribe", args: a("ssubscribe", "ch1", "ch2"), class: command.NotSharded, extra: []string{"ch1", "ch2"},
		},
		{
			// Redis stores into the last STORE/STOREDIST; GETKEYS reports the
			// first of each kind; Lookup reports all of them.
			name: "georadius two stores", args: a("georadius", "geo", 15, 37, 200, "km", "store", "d1", "store", "d2"),
			class: command.Keyed, extra: []string{"d2"},
		},
		{
			// A tagged BY pattern reads keys on the tag's shard; it is
			// reported so the client checks it is the sorted key's shard.
			name: "sort tagged by", args: a("sort", "list{u1}", "by", "w_{u1}_*", "store", "dest{u1}"),
			class: command.Keyed, extra: []string{"w_{u1}_*"},
		},
		{
			name: "sort_ro tagged get", args: a("sort_ro", "list{u1}", "get", "#", "get", "h_{u1}_*->f"),
			class: command.Keyed, extra: []string{"h_{u1}_*->f"},
		},
		{
			// An untagged pattern reads keys of any shard: flagged, so the
			// client runs it only on a one-shard ring.
			name: "sort untagged by", args: a("sort", "list", "by", "weight_*"), class: command.Keyed, anyKeys: true,
		},
		{
			name: "sort untagged get", args: a("sort", "list", "get", "#", "get", "obj_*->name"), class: command.Keyed, anyKeys: true,
		},
		{
			name: "sort tag after star", args: a("sort", "list", "by", "w_*_{u1}"), class: command.Keyed, anyKeys: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := getKeys(ctx, rdb, c.args)
			if err != nil {
				t.Fatalf("COMMAND GETKEYS: %v", err)
			}
			info, keys, err := command.Lookup(c.args, nil)
			if info.Class != c.class {
				t.Fatalf("class %v; want %v", info.Class, c.class)
			}
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if got := info.Flags&command.OtherKeys != 0; got != c.anyKeys {
				t.Fatalf("OtherKeys %v; want %v", got, c.anyKeys)
			}
			got := keyNames(c.args, keys)
			// Lookup's keys are in argument order: take away the extras and
			// what remains must be exactly the server's keys.
			var rest []string
			for _, k := range got {
				if i := slices.Index(c.extra, k); i >= 0 && !slices.Contains(want, k) {
					continue
				}
				rest = append(rest, k)
			}
			if !slices.Equal(rest, want) || len(got) != len(want)+len(c.extra) {
				t.Fatalf("Lookup keys %q; want GETKEYS %q plus %q", got, want, c.extra)
			}
		})
	}
}

// minimalArgs gives argument lists for commands whose filler arguments
// (see TestEveryServerCommandIsClassified) would not parse.
var minimalArgs = map[string][]interface{}{
	"xread":      a("xread", "streams", "k", "0"),
	"xreadgroup": a("xreadgroup", "group", "g", "c", "streams", "k", ">"),
	"migrate":    a("migrate", "host", 1, "k", 0, 100),
}

// flagExceptions are commands whose Flags differ from the server's command
// flags on purpose.
var flagExceptions = map[string]string{
	"wait": "Blocking added: WAIT blocks the connection until replicas acknowledge",
}

// TestEveryServerCommandIsClassified asks the server for every command and
// subcommand it knows and checks that the table classifies each (Lookup with
// a minimal argument list does not say Unknown and does not fail), with the
// server's write/readonly/blocking flags.
func TestEveryServerCommandIsClassified(t *testing.T) {
	ctx := context.Background()
	rdb := protocol2Client(t, redistest.Start(t))

	reply, err := rdb.Do(ctx, "command").Slice()
	if err != nil {
		t.Fatalf("COMMAND: %v", err)
	}
	var cmds, subs int
	for _, r := range reply {
		c, err := parseCommand(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.subs) == 0 {
			cmds++
			checkClassified(t, c)
			continue
		}
		for _, sc := range c.subs {
			subs++
			checkClassified(t, sc)
		}
	}
	t.Logf("%d commands and %d subcommands checked (%s)", cmds, subs, serverVersion(ctx, t, rdb))
	if cmds < 150 {
		t.Errorf("server listed only %d commands", cmds)
	}
}

// splitHere are commands with no subcommands to Redis that the routing
// table splits by their first argument: DEBUG OBJECT names a key, the rest
// of DEBUG does not.
var splitHere = map[string]bool{"debug": true}

func checkClassified(t *testing.T, c serverCommand) {
	t.Helper()
	info, args, err := lookupMinimal(c)
	if err != nil {
		t.Errorf("%s: Lookup(%q): %v", c.name, args, err)
		return
	}
	if info.Class == command.Unknown {
		t.Errorf("%s: not classified: the routing table does not know it", c.name)
		return
	}
	if info.Name != c.name && !(splitHere[c.name] && strings.HasPrefix(info.Name, c.name+"|")) {
		t.Errorf("%s: Lookup names it %q", c.name, info.Name)
	}
	var want command.Flags
	if c.flags["write"] {
		want |= command.Write
	}
	if c.flags["readonly"] {
		want |= command.ReadOnly
	}
	if c.flags["blocking"] {
		want |= command.Blocking
	}
	if info.Flags&^command.PerServer != want { // PerServer is redshard's own routing flag
		if _, ok := flagExceptions[c.name]; !ok {
			t.Errorf("%s: Flags %v; server flags say %v", c.name, info.Flags, want)
		}
	}
}

// lookupMinimal runs Lookup on a plausible argument list for c: its name
// words, then filler arguments up to its arity. Fillers are "1", which
// parses as a numkeys of 1, and one to three more are tried for commands
// that need the key after numkeys.
func lookupMinimal(c serverCommand) (command.Info, []interface{}, error) {
	if args, ok := minimalArgs[c.name]; ok {
		info, _, err := command.Lookup(args, nil)
		return info, args, err
	}
	var words []interface{}
	for _, w := range strings.Split(c.name, "|") {
		words = append(words, w)
	}
	n := max(c.arity, -c.arity)
	var (
		info command.Info
		args []interface{}
		err  error
	)
	for extra := 0; extra <= 3; extra++ {
		args = slices.Clone(words)
		for len(args) < n+extra {
			args = append(args, "1")
		}
		if info, _, err = command.Lookup(args, nil); err == nil {
			break
		}
	}
	return info, args, err
}

// serverCommand is one entry of the COMMAND reply.
type serverCommand struct {
	name  string
	arity int
	flags map[string]bool
	subs  []serverCommand
}

func parseCommand(r interface{}) (serverCommand, error) {
	fields, ok := r.([]interface{})
	if !ok || len(fields) < 3 {
		return serverCommand{}, fmt.Errorf("COMMAND entry %v: not an array of at least 3", r)
	}
	name, _ := fields[0].(string)
	arity, _ := fields[1].(int64)
	c := serverCommand{name: name, arity: int(arity), flags: map[string]bool{}}
	flags, _ := fields[2].([]interface{})
	for _, f := range flags {
		s, _ := f.(string)
		c.flags[s] = true
	}
	if len(fields) > 9 {
		subs, _ := fields[9].([]interface{})
		for _, s := range subs {
			sc, err := parseCommand(s)
			if err != nil {
				return c, err
			}
			c.subs = append(c.subs, sc)
		}
	}
	return c, nil
}

// getKeys returns the server's COMMAND GETKEYS for args; a command without
// keys gives an empty list.
func getKeys(ctx context.Context, rdb *redis.Client, args []interface{}) ([]string, error) {
	keys, err := rdb.Do(ctx, append(a("command", "getkeys"), args...)...).StringSlice()
	if err != nil {
		msg := err.Error()
		// Redis 7.0 replies an error when it finds no key, and GETKEYS
		// itself needs an argument after the command name.
		if strings.Contains(msg, "has no key arguments") || strings.Contains(msg, "Invalid arguments specified") ||
			strings.Contains(msg, "wrong number of arguments for 'command|getkeys'") {
			return nil, nil
		}
		return nil, err
	}
	return keys, nil
}

func keyNames(args []interface{}, keys []int) []string {
	var names []string
	for _, k := range keys {
		names = append(names, command.Arg(args[k]))
	}
	return names
}

func caseName(args []interface{}) string {
	var b strings.Builder
	for i, x := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(command.Arg(x))
	}
	return b.String()
}

// protocol2Client is a client whose replies are RESP2, so COMMAND's flags
// are plain arrays.
func protocol2Client(t *testing.T, s *redistest.Server) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func serverVersion(ctx context.Context, t *testing.T, rdb *redis.Client) string {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return "redis " + strings.TrimSpace(v)
		}
	}
	return "redis ?"
}

type binaryValue struct{ b []byte }

func (v binaryValue) MarshalBinary() ([]byte, error) { return v.b, nil }

// TestArgMatchesWire checks command.Arg against what go-redis really sends:
// the server's ECHO returns each argument's bytes as written.
func TestArgMatchesWire(t *testing.T) {
	ctx := context.Background()
	rdb := protocol2Client(t, redistest.Start(t))
	s, n, f, yes := "ptr", -12, float32(0.1), true
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	d := 1500 * time.Millisecond
	for _, v := range []interface{}{
		nil, "", "text", &s, []byte("bytes"), []byte{0, 255, '\r', '\n'},
		0, -1, n, &n, int8(-8), int16(16), int32(-32), int64(math.MinInt64),
		uint(1), uint8(255), uint16(16), uint32(32), uint64(math.MaxUint64), uintptr(7),
		f, &f, 2.5, 1e21, 1e-7, math.Inf(-1), true, false, &yes,
		ts, &ts, d, &d, binaryValue{[]byte("marshaled")}, net.ParseIP("10.0.0.1"),
	} {
		got, err := rdb.Do(ctx, "echo", v).Text()
		if err != nil {
			t.Fatalf("ECHO %T %v: %v", v, v, err)
		}
		if want := command.Arg(v); got != want {
			t.Errorf("Arg(%T %v) = %q; go-redis sent %q", v, v, want, got)
		}
	}
}
