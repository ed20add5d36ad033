package command

// The routing table.
//
// Rows for the commands of Redis 7.0 were written from a redis-server
// 7.0.15's COMMAND reply (flags "write", "readonly", "blocking" and the key
// specs); rows for what Redis 7.2 to 8.x and go-redis v9.23 added, and for
// module commands, from the commands' documentation. Flags of Redis 7.0
// rows, and key positions, are checked against a real server by
// integration_test/command_test.go.

// containers are the commands with subcommands. The entry passed to
// container describes unlisted subcommands (e.g. every CLIENT subcommand is
// NotSharded, including those newer than this table).
var containers = []*entry{
	container("acl", fanout("", MergeSame, 0)), // users are configured alike on every shard
	container("client", notSharded("", 0, hintEachShard)),
	container("cluster", notSharded("", 0, hintCluster)),
	container("command", fanout("", MergeSame, 0)), // shards run the same server version
	container("config", notSharded("", 0, hintEachShard)),
	container("debug", notSharded("", 0, hintEachShard)), // not a container to Redis: OBJECT names a key
	container("function", nil),
	container("hotkeys", notSharded("", 0, hintEachShard)),
	container("himport", nil),
	container("json.debug", nil),
	container("latency", notSharded("", 0, hintEachShard)),
	container("memory", notSharded("", 0, hintEachShard)),
	container("module", notSharded("", 0, hintEachShard)),
	container("object", nil),
	container("pubsub", nil),
	container("script", nil),
	container("slowlog", notSharded("", 0, hintEachShard)),
	container("xgroup", nil),
	container("xinfo", nil),
}

var rows = []*entry{
	// Strings.
	keyed("append", Write, key(1)),
	keyed("decr", Write, key(1)),
	keyed("decrby", Write, key(1)),
	keyed("delex", Write, key(1)),     // 8.4
	keyed("digest", ReadOnly, key(1)), // 8.4
	keyed("get", ReadOnly, key(1)),
	keyed("getdel", Write, key(1)),
	keyed("getex", Write, key(1)),
	keyed("getrange", ReadOnly, key(1)),
	keyed("getset", Write, key(1)),
	keyed("incr", Write, key(1)),
	keyed("incrby", Write, key(1)),
	keyed("incrbyfloat", Write, key(1)),
	keyed("increx", Write, key(1)), // 8.4
	keyed("lcs", ReadOnly, keys(1, 2)),
	split("mget", ReadOnly, keys(1, -1)),
	split("mset", Write, every(1, 2)),
	split("msetex", Write, numkeyGroups(1, 2)), // 8.4: MSETEX numkeys key value [key value ...] [NX|XX] [EX ...]
	keyed("msetnx", Write, every(1, 2)),        // all or nothing: the keys must live together
	keyed("psetex", Write, key(1)),
	keyed("set", Write, key(1)),
	keyed("setex", Write, key(1)),
	keyed("setnx", Write, key(1)),
	keyed("setrange", Write, key(1)),
	keyed("strlen", ReadOnly, key(1)),
	keyed("substr", ReadOnly, key(1)),

	// Bitmaps.
	keyed("bitcount", ReadOnly, key(1)),
	keyed("bitfield", Write, key(1)),
	keyed("bitfield_ro", ReadOnly, key(1)),
	keyed("bitop", Write, keys(2, -1)), // BITOP op destkey key [key ...]
	keyed("bitpos", ReadOnly, key(1)),
	keyed("getbit", ReadOnly, key(1)),
	keyed("setbit", Write, key(1)),

	// Hashes.
	keyed("hdel", Write, key(1)),
	keyed("hexists", ReadOnly, key(1)),
	keyed("hexpire", Write, key(1)),        // 7.4
	keyed("hexpireat", Write, key(1)),      // 7.4
	keyed("hexpiretime", ReadOnly, key(1)), // 7.4
	keyed("hget", ReadOnly, key(1)),
	keyed("hgetall", ReadOnly, key(1)),
	keyed("hgetdel", Write, key(1)), // 8.0
	keyed("hgetex", Write, key(1)),  // 8.0
	keyed("hincrby", Write, key(1)),
	keyed("hincrbyfloat", Write, key(1)),
	keyed("hkeys", ReadOnly, key(1)),
	keyed("hlen", ReadOnly, key(1)),
	keyed("hmget", ReadOnly, key(1)),
	keyed("hmset", Write, key(1)),
	keyed("hpersist", Write, key(1)),        // 7.4
	keyed("hpexpire", Write, key(1)),        // 7.4
	keyed("hpexpireat", Write, key(1)),      // 7.4
	keyed("hpexpiretime", ReadOnly, key(1)), // 7.4
	keyed("hpttl", ReadOnly, key(1)),        // 7.4
	keyed("hrandfield", ReadOnly, key(1)),
	keyed("hscan", ReadOnly, key(1)),
	keyed("hset", Write, key(1)),
	keyed("hsetex", Write, key(1)), // 8.0
	keyed("hsetnx", Write, key(1)),
	keyed("hstrlen", ReadOnly, key(1)),
	keyed("httl", ReadOnly, key(1)), // 7.4
	keyed("hvals", ReadOnly, key(1)),
	// HIMPORT (8.10): PREPARE registers a fieldset in the connection's
	// session, which a sharded client cannot keep in step across shards.
	notSharded("himport|discard", 0, hintHImport),
	notSharded("himport|discardall", 0, hintHImport),
	notSharded("himport|prepare", 0, hintHImport),
	keyed("himport|set", Write, key(2)), // HIMPORT SET key fieldset value ...

	// Lists.
	keyed("blmove", Write|Blocking, keys(1, 2)),
	keyed("blmovem", Write|Blocking, keys(1, 2)), // 8.10
	keyed("blmpop", Write|Blocking, numkeys(2)),  // BLMPOP timeout numkeys key ...
	keyed("blpop", Write|Blocking, keys(1, -2)),  // the last argument is the timeout
	keyed("brpop", Write|Blocking, keys(1, -2)),
	keyed("brpoplpush", Write|Blocking, keys(1, 2)),
	keyed("lindex", ReadOnly, key(1)),
	keyed("linsert", Write, key(1)),
	keyed("llen", ReadOnly, key(1)),
	keyed("lmove", Write, keys(1, 2)),
	keyed("lmovem", Write, keys(1, 2)), // 8.10
	keyed("lmpop", Write, numkeys(1)),
	keyed("lpop", Write, key(1)),
	keyed("lpos", ReadOnly, key(1)),
	keyed("lpush", Write, key(1)),
	keyed("lpushx", Write, key(1)),
	keyed("lrange", ReadOnly, key(1)),
	keyed("lrem", Write, key(1)),
	keyed("lset", Write, key(1)),
	keyed("ltrim", Write, key(1)),
	keyed("rpop", Write, key(1)),
	keyed("rpoplpush", Write, keys(1, 2)),
	keyed("rpush", Write, key(1)),
	keyed("rpushx", Write, key(1)),

	// Sets.
	keyed("sadd", Write, key(1)),
	keyed("scard", ReadOnly, key(1)),
	keyed("sdiff", ReadOnly, keys(1, -1)),
	keyed("sdiffcard", ReadOnly, numkeys(1)), // 8.8
	keyed("sdiffstore", Write, keys(1, -1)),
	keyed("sinter", ReadOnly, keys(1, -1)),
	keyed("sintercard", ReadOnly, numkeys(1)),
	keyed("sinterstore", Write, keys(1, -1)),
	keyed("sismember", ReadOnly, key(1)),
	keyed("smembers", ReadOnly, key(1)),
	keyed("smismember", ReadOnly, key(1)),
	keyed("smove", Write, keys(1, 2)),
	keyed("spop", Write, key(1)),
	keyed("srandmember", ReadOnly, key(1)),
	keyed("srem", Write, key(1)),
	keyed("sscan", ReadOnly, key(1)),
	keyed("sunion", ReadOnly, keys(1, -1)),
	keyed("sunioncard", ReadOnly, numkeys(1)), // 8.8
	keyed("sunionstore", Write, keys(1, -1)),

	// Sorted sets.
	keyed("bzmpop", Write|Blocking, numkeys(2)),
	keyed("bzpopmax", Write|Blocking, keys(1, -2)),
	keyed("bzpopmin", Write|Blocking, keys(1, -2)),
	keyed("zadd", Write, key(1)),
	keyed("zcard", ReadOnly, key(1)),
	keyed("zcount", ReadOnly, key(1)),
	keyed("zdiff", ReadOnly, numkeys(1)),
	keyed("zdiffstore", Write, destNumkeys(2)),
	keyed("zincrby", Write, key(1)),
	keyed("zinter", ReadOnly, numkeys(1)),
	keyed("zintercard", ReadOnly, numkeys(1)),
	keyed("zinterstore", Write, destNumkeys(2)),
	keyed("zlexcount", ReadOnly, key(1)),
	keyed("zmpop", Write, numkeys(1)),
	keyed("zmscore", ReadOnly, key(1)),
	keyed("zpopmax", Write, key(1)),
	keyed("zpopmin", Write, key(1)),
	keyed("zrandmember", ReadOnly, key(1)),
	keyed("zrange", ReadOnly, key(1)),
	keyed("zrangebylex", ReadOnly, key(1)),
	keyed("zrangebyscore", ReadOnly, key(1)),
	keyed("zrangestore", Write, keys(1, 2)),
	keyed("zrank", ReadOnly, key(1)),
	keyed("zrem", Write, key(1)),
	keyed("zremrangebylex", Write, key(1)),
	keyed("zremrangebyrank", Write, key(1)),
	keyed("zremrangebyscore", Write, key(1)),
	keyed("zrevrange", ReadOnly, key(1)),
	keyed("zrevrangebylex", ReadOnly, key(1)),
	keyed("zrevrangebyscore", ReadOnly, key(1)),
	keyed("zrevrank", ReadOnly, key(1)),
	keyed("zscan", ReadOnly, key(1)),
	keyed("zscore", ReadOnly, key(1)),
	keyed("zunion", ReadOnly, numkeys(1)),
	keyed("zunionstore", Write, destNumkeys(2)),

	// Streams.
	keyed("xack", Write, key(1)),
	keyed("xackdel", Write, key(1)), // 8.2
	keyed("xadd", Write, key(1)),
	keyed("xautoclaim", Write, key(1)),
	keyed("xcfgset", Write, key(1)), // 8.6
	keyed("xclaim", Write, key(1)),
	keyed("xdel", Write, key(1)),
	keyed("xdelex", Write, key(1)), // 8.2
	keyed("xgroup|create", Write, key(2)),
	keyed("xgroup|createconsumer", Write, key(2)),
	keyed("xgroup|delconsumer", Write, key(2)),
	keyed("xgroup|destroy", Write, key(2)),
	fanout("xgroup|help", MergeSame, 0),
	keyed("xgroup|setid", Write, key(2)),
	keyed("xinfo|consumers", ReadOnly, key(2)),
	keyed("xinfo|groups", ReadOnly, key(2)),
	fanout("xinfo|help", MergeSame, 0),
	keyed("xinfo|stream", ReadOnly, key(2)),
	keyed("xlen", ReadOnly, key(1)),
	keyed("xnack", Write, key(1)), // 8.6
	keyed("xpending", ReadOnly, key(1)),
	keyed("xrange", ReadOnly, key(1)),
	keyed("xread", ReadOnly|Blocking, custom(parseStream)),
	keyed("xreadgroup", Write|Blocking, custom(parseStream)),
	keyed("xrevrange", ReadOnly, key(1)),
	keyed("xsetid", Write, key(1)),
	keyed("xtrim", Write, key(1)),

	// Geo.
	keyed("geoadd", Write, key(1)),
	keyed("geodist", ReadOnly, key(1)),
	keyed("geohash", ReadOnly, key(1)),
	keyed("geopos", ReadOnly, key(1)),
	keyed("georadius", Write, custom(parseGeoStore)), // [STORE key] [STOREDIST key]
	keyed("georadius_ro", ReadOnly, key(1)),
	keyed("georadiusbymember", Write, custom(parseGeoStore)),
	keyed("georadiusbymember_ro", ReadOnly, key(1)),
	keyed("geosearch", ReadOnly, key(1)),
	keyed("geosearchstore", Write, keys(1, 2)), // GEOSEARCHSTORE destination source ...

	// HyperLogLog.
	keyed("pfadd", Write, key(1)),
	keyed("pfcount", ReadOnly, keys(1, -1)),
	keyed("pfdebug", Write, key(2)), // PFDEBUG subcommand key
	keyed("pfmerge", Write, keys(1, -1)),
	notSharded("pfselftest", 0, hintEachShard),

	// Keyspace.
	keyed("copy", Write, keys(1, 2)),
	split("del", Write, keys(1, -1)),
	keyed("dump", ReadOnly, key(1)),
	split("exists", ReadOnly, keys(1, -1)),
	keyed("expire", Write, key(1)),
	keyed("expireat", Write, key(1)),
	keyed("expiretime", ReadOnly, key(1)),
	fanout("keys", MergeConcat, ReadOnly),
	keyed("migrate", Write, custom(parseMigrate)),
	keyed("move", Write, key(1)),
	keyed("object|encoding", ReadOnly, key(2)),
	keyed("object|freq", ReadOnly, key(2)),
	fanout("object|help", MergeSame, 0),
	keyed("object|idletime", ReadOnly, key(2)),
	keyed("object|refcount", ReadOnly, key(2)),
	keyed("persist", Write, key(1)),
	keyed("pexpire", Write, key(1)),
	keyed("pexpireat", Write, key(1)),
	keyed("pexpiretime", ReadOnly, key(1)),
	keyed("pttl", ReadOnly, key(1)),
	fanout("randomkey", MergeAny, ReadOnly),
	keyed("rename", Write, keys(1, 2)),
	keyed("renamenx", Write, keys(1, 2)),
	keyed("restore", Write, key(1)),
	keyed("restore-asking", Write, key(1)),
	scan("scan", ReadOnly),
	keyed("sort", Write, custom(parseSort)),
	keyed("sort_ro", ReadOnly, custom(parseSortRO)),
	split("touch", ReadOnly, keys(1, -1)),
	keyed("ttl", ReadOnly, key(1)),
	keyed("type", ReadOnly, key(1)),
	split("unlink", Write, keys(1, -1)),

	// Scripting and functions. Scripts may write: no flag on EVAL and FCALL.
	keyed("eval", 0, numkeys(2)),
	keyed("eval_ro", ReadOnly, numkeys(2)),
	keyed("evalsha", 0, numkeys(2)),
	keyed("evalsha_ro", ReadOnly, numkeys(2)),
	keyed("fcall", 0, numkeys(2)),
	keyed("fcall_ro", ReadOnly, numkeys(2)),
	fanout("function|delete", MergeAllOK, Write),
	fanout("function|dump", MergeSame, 0), // the client compares the shards' FUNCTION LIST WITHCODE, not the payloads
	fanout("function|flush", MergeAllOK, Write),
	fanout("function|help", MergeSame, 0),
	fanout("function|kill", MergeKill, 0),
	fanout("function|list", MergeSame, 0),
	fanout("function|load", MergeSame, Write),
	fanout("function|restore", MergeAllOK, Write),
	fanout("function|stats", MergeSame, 0), // differs, and is an error, while a function runs on a shard
	notSharded("script|debug", 0, hintEachShard),
	fanout("script|exists", MergeAnd, 0),
	fanout("script|flush", MergeAllOK, 0),
	fanout("script|help", MergeSame, 0),
	fanout("script|kill", MergeKill, 0),
	fanout("script|load", MergeSame, 0),

	// Pub/Sub.
	notSharded("psubscribe", 0, hintSubscribe),
	channel("publish", 0, key(1)),
	fanout("pubsub|channels", MergeConcat, 0),
	fanout("pubsub|help", MergeSame, 0),
	fanout("pubsub|numpat", MergeMax, 0),
	fanout("pubsub|numsub", MergeConcat, 0),
	fanout("pubsub|shardchannels", MergeConcat, 0),
	fanout("pubsub|shardnumsub", MergeConcat, 0),
	notSharded("punsubscribe", 0, hintSubscribe),
	channel("spublish", 0, key(1)),
	notShardedKeys("ssubscribe", 0, hintSSub, keys(1, -1)),
	notSharded("subscribe", 0, hintSubscribe),
	notShardedKeys("sunsubscribe", 0, hintSSub, keys(1, -1)),
	notSharded("unsubscribe", 0, hintSubscribe),

	// Transactions: the client's TxPipelined and Watch run them per shard.
	notSharded("discard", 0, hintTx),
	notSharded("exec", 0, hintTx),
	notSharded("multi", 0, hintTx),
	notSharded("unwatch", 0, hintTx),
	notShardedKeys("watch", 0, hintTx, keys(1, -1)),

	// Connection.
	notSharded("auth", 0, hintAuth),
	fanout("echo", MergeSame, 0),
	notSharded("hello", 0, hintHello),
	fanout("ping", MergeSame, 0),
	notSharded("quit", 0, hintQuit),
	notSharded("reset", 0, hintConn),
	notSharded("select", 0, hintSelect),

	// ACL: users must be alike on every shard, so reads are MergeSame (via
	// the container) and changes go to every shard; the log is per server.
	fanout("acl|deluser", MergeSame, 0),
	fanout("acl|genpass", MergeAny, 0),
	fanout("acl|load", MergeAllOK, 0),
	notSharded("acl|log", 0, hintEachShard),
	fanout("acl|save", MergeAllOK, 0),
	fanout("acl|setuser", MergeAllOK, 0),

	// CLIENT: a name or library info is given to one connection per shard,
	// as a pooled go-redis client gives it to one connection (set
	// ShardOptions.ClientName to name them all), and GETNAME answers when
	// the connections it ran on agree (in a pipeline after SETNAME: the
	// same connections); PAUSE and UNPAUSE hold or release every shard.
	// The rest describe or change one server's connections (the
	// container's default: NotSharded).
	fanout("client|getname", MergeSame, 0),
	fanout("client|pause", MergeAllOK, 0),
	fanout("client|setinfo", MergeAllOK, 0),
	fanout("client|setname", MergeAllOK, 0),
	fanout("client|unpause", MergeAllOK, 0),

	// Server. Flags of "config|set" and the like are those of Redis (none).
	notSharded("bgrewriteaof", 0, hintEachShard), // reply text differs per shard ("started"/"scheduled")
	notSharded("bgsave", 0, hintEachShard),
	fanout("config|resetstat", MergeAllOK, 0),
	fanout("config|rewrite", MergeAllOK, 0),
	fanout("config|get", MergeSame, 0),
	fanout("config|set", MergeAllOK, 0),
	fanout("dbsize", MergeSum, ReadOnly),
	keyed("debug|object", ReadOnly, key(2)),
	notSharded("failover", 0, hintRepl),
	fanout("flushall", MergeAllOK, Write),
	fanout("flushdb", MergeAllOK, Write),
	notSharded("info", 0, hintEachShard),
	notSharded("lastsave", PerServer, hintPerServer),
	notSharded("lolwut", ReadOnly, hintOneShard),
	fanout("memory|purge", MergeAllOK, 0),
	keyed("memory|usage", ReadOnly, key(2)),
	notSharded("monitor", 0, hintEachShard),
	notSharded("psync", 0, hintRepl),
	notSharded("replconf", 0, hintRepl),
	notSharded("replicaof", 0, hintRepl),
	notSharded("role", 0, hintEachShard),
	fanout("save", MergeAllOK, 0),
	notSharded("sentinel", 0, hintSentinel),
	notSharded("shutdown", 0, hintEachShard),
	notSharded("slaveof", 0, hintRepl),
	fanout("swapdb", MergeAllOK, Write), // every shard swaps: the whole keyspace does
	notSharded("sync", 0, hintRepl),
	notSharded("time", PerServer, hintPerServer),
	notSharded("wait", Blocking, hintEachShard),
	notSharded("waitaof", Blocking, hintEachShard), // 7.2

	// Cluster.
	notSharded("asking", 0, hintCluster),
	notSharded("readonly", 0, hintCluster),
	notSharded("readwrite", 0, hintCluster),

	// Vector sets (8.0).
	keyed("vadd", Write, key(1)),
	keyed("vcard", ReadOnly, key(1)),
	keyed("vdim", ReadOnly, key(1)),
	keyed("vemb", ReadOnly, key(1)),
	keyed("vgetattr", ReadOnly, key(1)),
	keyed("vinfo", ReadOnly, key(1)),
	keyed("vismember", ReadOnly, key(1)),
	keyed("vlinks", ReadOnly, key(1)),
	keyed("vrandmember", ReadOnly, key(1)),
	keyed("vrange", ReadOnly, key(1)),
	keyed("vrem", Write, key(1)),
	keyed("vsetattr", Write, key(1)),
	keyed("vsim", ReadOnly, key(1)),

	// Arrays (8.8).
	keyed("arcount", ReadOnly, key(1)),
	keyed("ardel", Write, key(1)),
	keyed("ardelrange", Write, key(1)),
	keyed("arget", ReadOnly, key(1)),
	keyed("argetrange", ReadOnly, key(1)),
	keyed("argrep", ReadOnly, key(1)),
	keyed("arinfo", ReadOnly, key(1)),
	keyed("arinsert", Write, key(1)),
	keyed("arlastitems", ReadOnly, key(1)),
	keyed("arlen", ReadOnly, key(1)),
	keyed("armget", ReadOnly, key(1)),
	keyed("armset", Write, key(1)),
	keyed("arnext", ReadOnly, key(1)),
	keyed("arop", ReadOnly, key(1)),
	keyed("arring", Write, key(1)),
	keyed("arscan", ReadOnly, key(1)),
	keyed("arseek", Write, key(1)),
	keyed("arset", Write, key(1)),

	// RedisJSON.
	keyed("json.arrappend", Write, key(1)),
	keyed("json.arrindex", ReadOnly, key(1)),
	keyed("json.arrinsert", Write, key(1)),
	keyed("json.arrlen", ReadOnly, key(1)),
	keyed("json.arrpop", Write, key(1)),
	keyed("json.arrtrim", Write, key(1)),
	keyed("json.clear", Write, key(1)),
	fanout("json.debug|help", MergeSame, 0),
	keyed("json.debug|memory", ReadOnly, key(2)),
	keyed("json.del", Write, key(1)),
	keyed("json.forget", Write, key(1)),
	keyed("json.get", ReadOnly, key(1)),
	keyed("json.merge", Write, key(1)),
	keyed("json.mget", ReadOnly, keys(1, -2)), // JSON.MGET key [key ...] path
	keyed("json.mset", Write, every(1, 3)),    // JSON.MSET key path value [key path value ...]
	keyed("json.numincrby", Write, key(1)),
	keyed("json.nummultby", Write, key(1)),
	keyed("json.objkeys", ReadOnly, key(1)),
	keyed("json.objlen", ReadOnly, key(1)),
	keyed("json.resp", ReadOnly, key(1)),
	keyed("json.set", Write, key(1)),
	keyed("json.strappend", Write, key(1)),
	keyed("json.strlen", ReadOnly, key(1)),
	keyed("json.toggle", Write, key(1)),
	keyed("json.type", ReadOnly, key(1)),

	// Bloom filters.
	keyed("bf.add", Write, key(1)),
	keyed("bf.card", ReadOnly, key(1)),
	keyed("bf.debug", ReadOnly, key(1)),
	keyed("bf.exists", ReadOnly, key(1)),
	keyed("bf.info", ReadOnly, key(1)),
	keyed("bf.insert", Write, key(1)),
	keyed("bf.loadchunk", Write, key(1)),
	keyed("bf.madd", Write, key(1)),
	keyed("bf.mexists", ReadOnly, key(1)),
	keyed("bf.reserve", Write, key(1)),
	keyed("bf.scandump", ReadOnly, key(1)),

	// Cuckoo filters.
	keyed("cf.add", Write, key(1)),
	keyed("cf.addnx", Write, key(1)),
	keyed("cf.compact", Write, key(1)),
	keyed("cf.count", ReadOnly, key(1)),
	keyed("cf.debug", ReadOnly, key(1)),
	keyed("cf.del", Write, key(1)),
	keyed("cf.exists", ReadOnly, key(1)),
	keyed("cf.info", ReadOnly, key(1)),
	keyed("cf.insert", Write, key(1)),
	keyed("cf.insertnx", Write, key(1)),
	keyed("cf.loadchunk", Write, key(1)),
	keyed("cf.mexists", ReadOnly, key(1)),
	keyed("cf.reserve", Write, key(1)),
	keyed("cf.scandump", ReadOnly, key(1)),

	// Count-min sketches.
	keyed("cms.incrby", Write, key(1)),
	keyed("cms.info", ReadOnly, key(1)),
	keyed("cms.initbydim", Write, key(1)),
	keyed("cms.initbyprob", Write, key(1)),
	keyed("cms.merge", Write, destNumkeys(2)), // CMS.MERGE dest numkeys src ... [WEIGHTS ...]
	keyed("cms.query", ReadOnly, key(1)),

	// Top-K.
	keyed("topk.add", Write, key(1)),
	keyed("topk.count", ReadOnly, key(1)),
	keyed("topk.incrby", Write, key(1)),
	keyed("topk.info", ReadOnly, key(1)),
	keyed("topk.list", ReadOnly, key(1)),
	keyed("topk.query", ReadOnly, key(1)),
	keyed("topk.reserve", Write, key(1)),

	// t-digest.
	keyed("tdigest.add", Write, key(1)),
	keyed("tdigest.byrank", ReadOnly, key(1)),
	keyed("tdigest.byrevrank", ReadOnly, key(1)),
	keyed("tdigest.cdf", ReadOnly, key(1)),
	keyed("tdigest.create", Write, key(1)),
	keyed("tdigest.info", ReadOnly, key(1)),
	keyed("tdigest.max", ReadOnly, key(1)),
	keyed("tdigest.merge", Write, destNumkeys(2)), // TDIGEST.MERGE dest numkeys src ... [COMPRESSION c] [OVERRIDE]
	keyed("tdigest.min", ReadOnly, key(1)),
	keyed("tdigest.quantile", ReadOnly, key(1)),
	keyed("tdigest.rank", ReadOnly, key(1)),
	keyed("tdigest.reset", Write, key(1)),
	keyed("tdigest.revrank", ReadOnly, key(1)),
	keyed("tdigest.trimmed_mean", ReadOnly, key(1)),

	// Time series.
	keyed("ts.add", Write, key(1)),
	keyed("ts.alter", Write, key(1)),
	keyed("ts.create", Write, key(1)),
	keyed("ts.createrule", Write, keys(1, 2)), // source, destination
	keyed("ts.decrby", Write, key(1)),
	keyed("ts.del", Write, key(1)),
	keyed("ts.deleterule", Write, keys(1, 2)),
	keyed("ts.get", ReadOnly, key(1)),
	keyed("ts.incrby", Write, key(1)),
	keyed("ts.info", ReadOnly, key(1)),
	keyed("ts.madd", Write, every(1, 3)), // TS.MADD key timestamp value [...]
	fanout("ts.mget", MergeConcat, ReadOnly),
	notSharded("ts.mrange", ReadOnly, hintTSQuery),
	notSharded("ts.mrevrange", ReadOnly, hintTSQuery),
	keyed("ts.nrange", ReadOnly, numkeys(1)),
	keyed("ts.nrevrange", ReadOnly, numkeys(1)),
	fanout("ts.queryindex", MergeConcat, ReadOnly),
	notSharded("ts.querylabels", ReadOnly, hintTSQuery),
	keyed("ts.range", ReadOnly, key(1)),
	keyed("ts.read", ReadOnly, key(1)),
	keyed("ts.revrange", ReadOnly, key(1)),

	// RediSearch. Indexes are per server (see the package doc); suggestion
	// dictionaries are ordinary keys.
	notSharded("ft._list", 0, hintSearch),
	notSharded("ft.aggregate", ReadOnly, hintSearch),
	notSharded("ft.aliasadd", 0, hintSearch),
	notSharded("ft.aliasdel", 0, hintSearch),
	notSharded("ft.aliaslist", 0, hintSearch),
	notSharded("ft.aliasupdate", 0, hintSearch),
	notSharded("ft.alter", 0, hintSearch),
	notSharded("ft.config", 0, hintSearch),
	notSharded("ft.create", 0, hintSearch),
	notSharded("ft.cursor", ReadOnly, hintSearch),
	notSharded("ft.dictadd", 0, hintSearch),
	notSharded("ft.dictdel", 0, hintSearch),
	notSharded("ft.dictdump", 0, hintSearch),
	notSharded("ft.dropindex", 0, hintSearch),
	notSharded("ft.explain", 0, hintSearch),
	notSharded("ft.explaincli", 0, hintSearch),
	notSharded("ft.hybrid", ReadOnly, hintSearch),
	notSharded("ft.info", 0, hintSearch),
	notSharded("ft.profile", ReadOnly, hintSearch),
	notSharded("ft.search", ReadOnly, hintSearch),
	notSharded("ft.spellcheck", 0, hintSearch),
	keyed("ft.sugadd", Write, key(1)),
	keyed("ft.sugdel", Write, key(1)),
	keyed("ft.sugget", ReadOnly, key(1)),
	keyed("ft.suglen", ReadOnly, key(1)),
	notSharded("ft.syndump", 0, hintSearch),
	notSharded("ft.synupdate", 0, hintSearch),
	notSharded("ft.tagvals", ReadOnly, hintSearch),
}
