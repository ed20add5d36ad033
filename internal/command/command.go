package command

import (
	"errors"
	"fmt"
	"strings"
)

// Class says how the client routes a command.
type Class uint8

const (
	// Unknown: not in the table; the client refuses it.
	Unknown Class = iota
	// Keyed: keys at the returned positions (0, 1 or many); all must live on
	// one shard. Zero keys (EVAL with numkeys 0, etc.) is possible: the client
	// then refuses it.
	Keyed
	// Split: MGET, MSET, MSETEX, DEL, UNLINK, EXISTS, TOUCH are split per shard
	// and the replies merged. Info.Step says how many arguments go with a key.
	Split
	// Fanout: keyless; sent to every shard, replies merged as Info.Merge says.
	Fanout
	// Scan: SCAN (the client rewrites the cursor to encode the shard).
	Scan
	// Channel: PUBLISH, SPUBLISH are routed by the channel name; the returned
	// keys slice holds the channel's position.
	Channel
	// NotSharded: cannot be answered correctly by one shard or a merge (INFO,
	// CLIENT *, SELECT, MULTI, WATCH, SUBSCRIBE, WAIT, ...). The client returns
	// an error with Info.Hint.
	NotSharded
)

var classNames = [...]string{"Unknown", "Keyed", "Split", "Fanout", "Scan", "Channel", "NotSharded"}

// String returns the class's Go name, e.g. "Keyed".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Merge says how the replies of a Fanout command combine.
type Merge uint8

const (
	// MergeNone is the Merge of every class but Fanout.
	MergeNone Merge = iota
	// MergeAllOK: every shard must answer OK (FLUSHDB, FLUSHALL, SCRIPT FLUSH,
	// FUNCTION FLUSH/DELETE/RESTORE, CONFIG SET/RESETSTAT/REWRITE, SAVE, ...).
	MergeAllOK
	// MergeSum: integers are summed (DBSIZE).
	MergeSum
	// MergeConcat: arrays are concatenated (KEYS, PUBSUB CHANNELS/NUMSUB/
	// SHARDCHANNELS/SHARDNUMSUB, TS.QUERYINDEX, TS.MGET).
	MergeConcat
	// MergeSame: every shard must give the same reply, which is returned
	// (PING, ECHO, SCRIPT LOAD, FUNCTION LOAD/LIST/DUMP/STATS, CONFIG GET,
	// COMMAND, ACL); replies that differ are an error, never a pick.
	MergeSame
	// MergeAnd: arrays of 0/1 are combined element-wise with AND (SCRIPT EXISTS).
	MergeAnd
	// MergeAny: any one non-nil reply (RANDOMKEY, ACL GENPASS).
	MergeAny
	// MergeKill: the shard running a script or function kills it (OK); the
	// others' NOTBUSY is not an error unless every shard says it (FUNCTION
	// KILL, SCRIPT KILL).
	MergeKill
	// MergeMax: the largest integer (PUBSUB NUMPAT: redshard subscribes a
	// pattern on every shard, so each shard counts each pattern once, and
	// a sum would count it once per shard).
	MergeMax
)

var mergeNames = [...]string{"MergeNone", "MergeAllOK", "MergeSum", "MergeConcat", "MergeSame", "MergeAnd", "MergeAny", "MergeKill", "MergeMax"}

// String returns the merge's Go name, e.g. "MergeSum".
func (m Merge) String() string {
	if int(m) < len(mergeNames) {
		return mergeNames[m]
	}
	return fmt.Sprintf("Merge(%d)", uint8(m))
}

// Flags describe what a command may do. A command with neither Write nor
// ReadOnly (EVAL, FCALL, PUBLISH, most server commands) may still write:
// treat it as a write when in doubt.
type Flags uint8

const (
	// Write: may modify keys (Redis's "write" flag).
	Write Flags = 1 << iota
	// ReadOnly: Redis's "readonly" flag; does not modify keys.
	ReadOnly
	// Blocking: may block (BLPOP, XREAD [BLOCK], WAIT, ...).
	Blocking
	// OtherKeys: reads keys it does not name, which may live on any shard:
	// SORT and SORT_RO with a BY or GET pattern that has no {hash tag}
	// before its '*'. Only a one-shard ring can run it correctly. Set by
	// Lookup for the command at hand, never in the table.
	OtherKeys
	// PerServer: a keyless NotSharded command whose reply is the answer of
	// whichever server runs it, and which reads nothing else and changes
	// nothing: TIME and LASTSAVE. Alone on a ring of many shards it is
	// refused like any NotSharded command; in a pipeline or transaction
	// whose keyed commands all live on one shard, the client runs it on that
	// shard, as a plain client runs it on the server that holds those keys.
	// Commands that describe a server as a whole (INFO, ROLE, MEMORY STATS)
	// do not qualify: their keyspace, memory or replication figures would be
	// read as those of the whole data set. PING and ECHO need no flag: every
	// shard answers them alike (Fanout, MergeSame).
	PerServer
)

// String returns the flags joined by "|", e.g. "Write|Blocking", or "0".
func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	var parts []string
	for _, x := range [...]struct {
		f    Flags
		name string
	}{{Write, "Write"}, {ReadOnly, "ReadOnly"}, {Blocking, "Blocking"}, {OtherKeys, "OtherKeys"}, {PerServer, "PerServer"}} {
		if f&x.f != 0 {
			parts = append(parts, x.name)
			f &^= x.f
		}
	}
	if f != 0 {
		parts = append(parts, fmt.Sprintf("Flags(%#x)", uint8(f)))
	}
	return strings.Join(parts, "|")
}

// Info describes one command (or container subcommand).
type Info struct {
	Name  string // canonical lower-case name; container subcommands as "object|encoding", "script|load"
	Class Class
	Merge Merge // Fanout only
	Flags Flags
	Step  int    // Split only: arguments per key group (1 for MGET, DEL, ...; 2 for MSET and MSETEX pairs)
	Hint  string // NotSharded only: what to use instead, e.g. "run it on each shard with Client.ForEachShard"
}

// ErrMalformed is wrapped by every error Lookup returns: the arguments are
// not a well-formed command, so where its keys are cannot be said. The error
// text names the command and what is wrong.
var ErrMalformed = errors.New("redshard: malformed command")

// Lookup classifies args (a command exactly as go-redis builds it: args[0]
// is the command name, in any case) and appends the indexes into args of
// its key arguments to keys, in argument order. For Split commands the
// indexes are those of each key (for MSET, the key of each pair); for
// Channel, the channel's. NotSharded commands that name keys (WATCH,
// SSUBSCRIBE) report them too.
//
// Lookup never panics. Malformed arguments it needs to parse (no command,
// too few arguments for the key positions, a numkeys that is not a
// non-negative integer or exceeds the arguments, ...) give an error that
// wraps ErrMalformed and names the command; the returned Info then still
// describes the command if it was found, and keys is returned unextended.
// A name that is not in the table gives Class Unknown and no error.
//
// Lookup is safe for concurrent use. It does not allocate for the common
// commands when keys has capacity for their keys.
func Lookup(args []interface{}, keys []int) (Info, []int, error) {
	// Small enough to inline: the caller's variable takes the Info without
	// a copy through lookup's results (every command comes here).
	var info Info
	keys, err := lookup(args, keys, &info)
	return info, keys, err
}

// lookup is Lookup, writing the Info to *info.
func lookup(args []interface{}, keys []int, info *Info) ([]int, error) {
	if len(args) == 0 {
		return keys, fmt.Errorf("%w: empty command", ErrMalformed)
	}
	e := findName(args[0])
	if e == nil {
		name := strings.ToLower(Arg(args[0]))
		if name == "" {
			return keys, fmt.Errorf("%w: empty command name", ErrMalformed)
		}
		info.Name = name
		return keys, nil
	}
	if e.subs != nil {
		s, err := e.sub(args)
		if err != nil {
			*info = e.info
			return keys, err
		}
		if s == nil {
			*info = e.unknownSub(args)
			return keys, nil
		}
		e = s
	}
	*info = e.info
	if e.keys.kind == noKeys {
		return keys, nil
	}
	n := len(keys)
	keys, err := e.keys.locate(args, keys)
	if err == errOtherKeys {
		info.Flags |= OtherKeys
		return keys, nil
	}
	if err != nil {
		return keys[:n], fmt.Errorf("%w: %s: %v", ErrMalformed, DisplayName(e.info.Name), err)
	}
	return keys, nil
}

// entry is one row of the table.
type entry struct {
	info Info
	keys keySpec

	// Containers (OBJECT, SCRIPT, CLIENT, ...) only.
	subs map[string]*entry // subcommands by lower-case name ("encoding")
	dflt *entry            // unknown or missing subcommand; nil: Unknown / an error
}

// sub returns the subcommand entry of container e named by args[1]. A nil
// entry with a nil error means an unknown subcommand without a default.
func (e *entry) sub(args []interface{}) (*entry, error) {
	if len(args) < 2 {
		if e.dflt != nil {
			return e.dflt, nil
		}
		return nil, fmt.Errorf("%w: %s: missing subcommand", ErrMalformed, DisplayName(e.info.Name))
	}
	if s := find(e.subs, args[1]); s != nil {
		return s, nil
	}
	return nil, nil
}

// unknownSub describes a subcommand of container e that the table does not
// list: the container's default class (e.g. NotSharded for CLIENT), or
// Unknown.
func (e *entry) unknownSub(args []interface{}) Info {
	var info Info
	if e.dflt != nil {
		info = e.dflt.info
	}
	info.Name = e.info.Name
	if len(args) > 1 {
		info.Name += "|" + strings.ToLower(Arg(args[1]))
	}
	return info
}

// maxName is the longest command name find lower-cases on the stack.
const maxName = 64

// find returns the entry of m named by a, matched case-insensitively, or nil.
// go-redis sends lower-case names, so the name is tried as-is first and only
// lower-cased (in a stack buffer, without allocating) when that fails.
func find(m map[string]*entry, a interface{}) *entry {
	switch v := a.(type) {
	case string:
		if e, ok := m[v]; ok {
			return e
		}
		if len(v) > maxName || !hasUpper(v) {
			return nil
		}
		var buf [maxName]byte
		n := copy(buf[:], v)
		lower(buf[:n])
		return m[string(buf[:n])]
	case []byte:
		if e, ok := m[string(v)]; ok {
			return e
		}
		if len(v) > maxName {
			return nil
		}
		var buf [maxName]byte
		n := copy(buf[:], v)
		lower(buf[:n])
		return m[string(buf[:n])]
	default:
		s := Arg(a)
		if len(s) > maxName {
			return nil
		}
		return m[strings.ToLower(s)]
	}
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// lower lower-cases ASCII letters in place. Redis compares command names
// with strcasecmp, which folds ASCII only.
func lower(b []byte) {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
}

// DisplayName turns "script|load" into "SCRIPT LOAD" for messages.
func DisplayName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "|", " "))
}

// MayWrite reports whether the command may change keys: every command not
// marked ReadOnly, so EVAL and FCALL count as writes.
func (i Info) MayWrite() bool { return i.Flags&ReadOnly == 0 }
