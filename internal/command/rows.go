package command

import "strings"

// Hints of NotSharded commands: what to use instead.
const (
	hintEachShard = "run it on each shard with Client.ForEachShard"
	hintPerServer = "run it on each shard with Client.ForEachShard, or in a pipeline or transaction whose keys live on one shard, which then answers it"
	hintOneShard  = "it describes one server: run it on a shard with Client.ForEachShard"
	hintSelect    = "set ShardOptions.DB"
	hintTx        = "use TxPipelined or Watch"
	hintSubscribe = "use Subscribe or PSubscribe"
	hintSSub      = "use SSubscribe"
	hintAuth      = "set Username and Password in ShardOptions"
	hintHello     = "set Protocol in ShardOptions"
	hintQuit      = "use Client.Close"
	hintConn      = "connection state cannot be shared across shards; configure the shard clients with ShardOptions"
	hintCluster   = "shards are independent servers, not a Redis Cluster"
	hintRepl      = "replication commands are for servers, not clients"
	hintSentinel  = "SENTINEL commands go to a Sentinel, not to a shard"
	hintSearch    = "a RediSearch index covers one server's keys: run FT.* on each shard with Client.ForEachShard and merge the results"
	hintTSQuery   = "series are spread over the shards and the reply cannot be merged: run it on each shard with Client.ForEachShard"
	hintHImport   = "HIMPORT fieldsets are per connection: run HImportPrepare on each shard with Client.ForEachShard"
)

// Row constructors. The table in table.go is a list of these; names with a
// '|' are subcommands of the container named before the '|'.

func keyed(name string, f Flags, k keySpec) *entry {
	return &entry{info: Info{Name: name, Class: Keyed, Flags: f}, keys: k}
}

func split(name string, f Flags, k keySpec) *entry {
	return &entry{info: Info{Name: name, Class: Split, Flags: f, Step: k.step}, keys: k}
}

func fanout(name string, m Merge, f Flags) *entry {
	return &entry{info: Info{Name: name, Class: Fanout, Merge: m, Flags: f}}
}

func notSharded(name string, f Flags, hint string) *entry {
	return &entry{info: Info{Name: name, Class: NotSharded, Flags: f, Hint: hint}}
}

// notShardedKeys is a NotSharded command that names keys (WATCH) or shard
// channels (SSUBSCRIBE); Lookup reports them.
func notShardedKeys(name string, f Flags, hint string, k keySpec) *entry {
	e := notSharded(name, f, hint)
	e.keys = k
	return e
}

func scan(name string, f Flags) *entry {
	return &entry{info: Info{Name: name, Class: Scan, Flags: f}}
}

func channel(name string, f Flags, k keySpec) *entry {
	return &entry{info: Info{Name: name, Class: Channel, Flags: f}, keys: k}
}

// container declares a command with subcommands. dflt describes subcommands
// the table does not list, and the container named alone; nil makes those
// Unknown and an error.
func container(name string, dflt *entry) *entry {
	e := &entry{info: Info{Name: name}, subs: map[string]*entry{}, dflt: dflt}
	if dflt != nil {
		e.info.Class = dflt.info.Class
		e.info.Hint = dflt.info.Hint
		dflt.info.Name = name
	}
	return e
}

// table maps lower-case command names to their rows.
var table = build(containers, rows)

// build indexes rows by name, putting "container|sub" rows into their
// container. It panics on a malformed table, which the tests exercise.
func build(containers []*entry, rows []*entry) map[string]*entry {
	m := make(map[string]*entry, len(rows)+len(containers))
	for _, c := range containers {
		if m[c.info.Name] != nil {
			panic("command: duplicate container " + c.info.Name)
		}
		m[c.info.Name] = c
	}
	for _, r := range rows {
		name := r.info.Name
		if name != strings.ToLower(name) {
			panic("command: upper-case name " + name)
		}
		if parent, sub, ok := strings.Cut(name, "|"); ok {
			c := m[parent]
			if c == nil || c.subs == nil {
				panic("command: subcommand without container: " + name)
			}
			if c.subs[sub] != nil {
				panic("command: duplicate " + name)
			}
			c.subs[sub] = r
			continue
		}
		if m[name] != nil {
			panic("command: duplicate " + name)
		}
		m[name] = r
	}
	return m
}
