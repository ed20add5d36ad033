// Package conformance holds the drop-in conformance table: calls that must
// give the same results through redshard over several shards as through a
// plain go-redis client on one server. Tests run it on miniredis (root
// package) and on real redis-server processes (integration_test).
package conformance

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Step is one call of the drop-in conformance table: it runs a command (or a
// pipeline, or a transaction) and describes the outcome as text.
type Step struct {
	Name string
	Run  func(ctx context.Context, c redis.UniversalClient) string
}

func res(v interface{}, err error) string { return fmt.Sprintf("%v|%v", v, err) }

// Steps covers strings, hashes, lists, sets, sorted sets,
// streams, expirations, HyperLogLog, bitmaps, geo, multi-key commands,
// scripting, pipelines and transactions (with hash tags).
func Steps() []Step {
	var s []Step
	add := func(name string, run func(ctx context.Context, c redis.UniversalClient) string) {
		s = append(s, Step{name, run})
	}
	// strings
	add("SET", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Set(ctx, "str:1", "hello", 0).Result())
	})
	add("GET", func(ctx context.Context, c redis.UniversalClient) string { return res(c.Get(ctx, "str:1").Result()) })
	add("GET missing", func(ctx context.Context, c redis.UniversalClient) string { return res(c.Get(ctx, "str:none").Result()) })
	add("APPEND", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Append(ctx, "str:1", " world").Result())
	})
	add("STRLEN", func(ctx context.Context, c redis.UniversalClient) string { return res(c.StrLen(ctx, "str:1").Result()) })
	add("GETRANGE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.GetRange(ctx, "str:1", 0, 4).Result())
	})
	add("SETRANGE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SetRange(ctx, "str:1", 6, "WORLD").Result())
	})
	add("SETNX", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SetNX(ctx, "str:1", "x", 0).Result())
	})
	add("SETNX new", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SetNX(ctx, "str:2", "x", 0).Result())
	})
	add("GETSET", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.GetSet(ctx, "str:2", "y").Result())
	})
	add("GETDEL", func(ctx context.Context, c redis.UniversalClient) string { return res(c.GetDel(ctx, "str:2").Result()) })
	add("INCR", func(ctx context.Context, c redis.UniversalClient) string { return res(c.Incr(ctx, "cnt:1").Result()) })
	add("INCRBY", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.IncrBy(ctx, "cnt:1", 10).Result())
	})
	add("DECR", func(ctx context.Context, c redis.UniversalClient) string { return res(c.Decr(ctx, "cnt:1").Result()) })
	add("DECRBY", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.DecrBy(ctx, "cnt:1", 3).Result())
	})
	add("INCRBYFLOAT", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.IncrByFloat(ctx, "cnt:f", 1.5).Result())
	})
	add("INCR wrong type", func(ctx context.Context, c redis.UniversalClient) string { return res(c.Incr(ctx, "str:1").Result()) })
	add("MSET", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.MSet(ctx, "m:1", "a", "m:2", "b", "m:3", "c", "m:4", "d", "m:5", "e").Result())
	})
	add("MGET", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.MGet(ctx, "m:5", "m:1", "nope", "m:3", "m:2", "m:4").Result())
	})
	add("MSETNX tagged", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.MSetNX(ctx, "{t}a", "1", "{t}b", "2").Result())
	})
	add("MGET tagged", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.MGet(ctx, "{t}a", "{t}b").Result())
	})
	add("EXISTS", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Exists(ctx, "m:1", "m:2", "nope", "m:1", "str:1").Result())
	})
	add("TOUCH", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Touch(ctx, "m:1", "m:2", "nope").Result())
	})
	add("SETEX/TTL", func(ctx context.Context, c redis.UniversalClient) string {
		c.SetEx(ctx, "exp:1", "v", 100*time.Second)
		return res(c.TTL(ctx, "exp:1").Result())
	})
	add("EXPIRE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Expire(ctx, "m:1", time.Hour).Result())
	})
	add("PTTL", func(ctx context.Context, c redis.UniversalClient) string { return res(c.TTL(ctx, "m:1").Result()) })
	add("PERSIST", func(ctx context.Context, c redis.UniversalClient) string { return res(c.Persist(ctx, "m:1").Result()) })
	add("TTL none", func(ctx context.Context, c redis.UniversalClient) string { return res(c.TTL(ctx, "m:1").Result()) })
	add("TTL missing", func(ctx context.Context, c redis.UniversalClient) string { return res(c.TTL(ctx, "nope").Result()) })
	add("EXPIREAT", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ExpireAt(ctx, "m:2", time.Unix(4102444800, 0)).Result())
	})
	add("TYPE", func(ctx context.Context, c redis.UniversalClient) string { return res(c.Type(ctx, "m:2").Result()) })
	add("SET EX KEEPTTL", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SetArgs(ctx, "exp:1", "w", redis.SetArgs{KeepTTL: true, Get: true}).Result())
	})
	add("RENAME tagged", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Rename(ctx, "{t}a", "{t}c").Result())
	})
	add("RENAMENX tagged", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.RenameNX(ctx, "{t}c", "{t}b").Result())
	})
	add("COPY tagged", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Copy(ctx, "{t}c", "{t}d", 0, false).Result())
	})
	add("DEL", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Del(ctx, "m:3", "m:4", "nope", "{t}d").Result())
	})
	add("UNLINK", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Unlink(ctx, "m:5", "nope").Result())
	})
	// bitmaps and HyperLogLog
	add("SETBIT", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SetBit(ctx, "bits", 7, 1).Result())
	})
	add("GETBIT", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.GetBit(ctx, "bits", 7).Result())
	})
	add("BITCOUNT", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.BitCount(ctx, "bits", nil).Result())
	})
	add("BITOP tagged", func(ctx context.Context, c redis.UniversalClient) string {
		c.SetBit(ctx, "{b}1", 1, 1)
		c.SetBit(ctx, "{b}2", 2, 1)
		return res(c.BitOpOr(ctx, "{b}3", "{b}1", "{b}2").Result())
	})
	add("BITPOS", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.BitPos(ctx, "{b}3", 1).Result())
	})
	add("PFADD", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.PFAdd(ctx, "{h}1", "a", "b", "c").Result())
	})
	add("PFCOUNT", func(ctx context.Context, c redis.UniversalClient) string { return res(c.PFCount(ctx, "{h}1").Result()) })
	add("PFMERGE tagged", func(ctx context.Context, c redis.UniversalClient) string {
		c.PFAdd(ctx, "{h}2", "c", "d")
		return res(c.PFMerge(ctx, "{h}3", "{h}1", "{h}2").Result())
	})
	add("PFCOUNT merged", func(ctx context.Context, c redis.UniversalClient) string { return res(c.PFCount(ctx, "{h}3").Result()) })
	// hashes
	add("HSET", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HSet(ctx, "hash:1", "f1", "v1", "f2", "v2", "n", 5).Result())
	})
	add("HGET", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HGet(ctx, "hash:1", "f1").Result())
	})
	add("HGET missing", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HGet(ctx, "hash:1", "zz").Result())
	})
	add("HMGET", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HMGet(ctx, "hash:1", "f2", "zz", "f1").Result())
	})
	add("HGETALL", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HGetAll(ctx, "hash:1").Result())
	})
	add("HINCRBY", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HIncrBy(ctx, "hash:1", "n", 2).Result())
	})
	add("HINCRBYFLOAT", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HIncrByFloat(ctx, "hash:1", "n", 0.5).Result())
	})
	add("HEXISTS", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HExists(ctx, "hash:1", "f2").Result())
	})
	add("HLEN", func(ctx context.Context, c redis.UniversalClient) string { return res(c.HLen(ctx, "hash:1").Result()) })
	add("HKEYS", func(ctx context.Context, c redis.UniversalClient) string {
		return res(sorted(c.HKeys(ctx, "hash:1").Result()))
	})
	add("HVALS", func(ctx context.Context, c redis.UniversalClient) string {
		return res(sorted(c.HVals(ctx, "hash:1").Result()))
	})
	add("HSETNX", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HSetNX(ctx, "hash:1", "f1", "x").Result())
	})
	add("HDEL", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HDel(ctx, "hash:1", "f2", "zz").Result())
	})
	add("HSTRLEN", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.HStrLen(ctx, "hash:1", "f1").Result())
	})
	add("HSCAN", func(ctx context.Context, c redis.UniversalClient) string {
		keys, _, err := c.HScan(ctx, "hash:1", 0, "", 100).Result()
		return res(len(keys), err)
	})
	// lists
	add("RPUSH", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.RPush(ctx, "list:1", "a", "b", "c", "d").Result())
	})
	add("LPUSH", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LPush(ctx, "list:1", "z").Result())
	})
	add("LRANGE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LRange(ctx, "list:1", 0, -1).Result())
	})
	add("LLEN", func(ctx context.Context, c redis.UniversalClient) string { return res(c.LLen(ctx, "list:1").Result()) })
	add("LINDEX", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LIndex(ctx, "list:1", 2).Result())
	})
	add("LSET", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LSet(ctx, "list:1", 0, "y").Result())
	})
	add("LINSERT", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LInsertBefore(ctx, "list:1", "b", "ab").Result())
	})
	add("LREM", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LRem(ctx, "list:1", 0, "ab").Result())
	})
	add("LPOP", func(ctx context.Context, c redis.UniversalClient) string { return res(c.LPop(ctx, "list:1").Result()) })
	add("RPOP", func(ctx context.Context, c redis.UniversalClient) string { return res(c.RPop(ctx, "list:1").Result()) })
	add("LTRIM", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LTrim(ctx, "list:1", 0, 1).Result())
	})
	add("LPOS", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LPos(ctx, "list:1", "b", redis.LPosArgs{}).Result())
	})
	add("RPOPLPUSH tagged", func(ctx context.Context, c redis.UniversalClient) string {
		c.RPush(ctx, "{l}src", "1", "2")
		return res(c.RPopLPush(ctx, "{l}src", "{l}dst").Result())
	})
	add("LMOVE tagged", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LMove(ctx, "{l}src", "{l}dst", "LEFT", "RIGHT").Result())
	})
	add("BLPOP ready", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.BLPop(ctx, time.Second, "{l}dst").Result())
	})
	add("LRANGE dst", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.LRange(ctx, "{l}dst", 0, -1).Result())
	})
	// sets
	add("SADD", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SAdd(ctx, "{s}1", "a", "b", "c").Result())
	})
	add("SADD 2", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SAdd(ctx, "{s}2", "b", "c", "d").Result())
	})
	add("SMEMBERS", func(ctx context.Context, c redis.UniversalClient) string {
		return res(sorted(c.SMembers(ctx, "{s}1").Result()))
	})
	add("SISMEMBER", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SIsMember(ctx, "{s}1", "a").Result())
	})
	add("SMISMEMBER", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SMIsMember(ctx, "{s}1", "a", "z").Result())
	})
	add("SCARD", func(ctx context.Context, c redis.UniversalClient) string { return res(c.SCard(ctx, "{s}1").Result()) })
	add("SINTER", func(ctx context.Context, c redis.UniversalClient) string {
		return res(sorted(c.SInter(ctx, "{s}1", "{s}2").Result()))
	})
	add("SUNION", func(ctx context.Context, c redis.UniversalClient) string {
		return res(sorted(c.SUnion(ctx, "{s}1", "{s}2").Result()))
	})
	add("SDIFF", func(ctx context.Context, c redis.UniversalClient) string {
		return res(sorted(c.SDiff(ctx, "{s}1", "{s}2").Result()))
	})
	add("SINTERSTORE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SInterStore(ctx, "{s}3", "{s}1", "{s}2").Result())
	})
	add("SUNIONSTORE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SUnionStore(ctx, "{s}4", "{s}1", "{s}2").Result())
	})
	add("SDIFFSTORE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SDiffStore(ctx, "{s}5", "{s}1", "{s}2").Result())
	})
	add("SMOVE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SMove(ctx, "{s}1", "{s}2", "a").Result())
	})
	add("SREM", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.SRem(ctx, "{s}2", "d", "zz").Result())
	})
	add("SPOP single", func(ctx context.Context, c redis.UniversalClient) string { return res(c.SPop(ctx, "{s}5").Result()) })
	// sorted sets
	add("ZADD", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZAdd(ctx, "{z}1", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}, redis.Z{Score: 3, Member: "c"}).Result())
	})
	add("ZADD 2", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZAdd(ctx, "{z}2", redis.Z{Score: 10, Member: "b"}, redis.Z{Score: 20, Member: "d"}).Result())
	})
	add("ZSCORE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZScore(ctx, "{z}1", "b").Result())
	})
	add("ZINCRBY", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZIncrBy(ctx, "{z}1", 5, "a").Result())
	})
	add("ZRANGE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZRange(ctx, "{z}1", 0, -1).Result())
	})
	add("ZRANGE WITHSCORES", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZRangeWithScores(ctx, "{z}1", 0, -1).Result())
	})
	add("ZREVRANGE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZRevRange(ctx, "{z}1", 0, 1).Result())
	})
	add("ZRANGEBYSCORE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZRangeByScore(ctx, "{z}1", &redis.ZRangeBy{Min: "2", Max: "10"}).Result())
	})
	add("ZRANK", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZRank(ctx, "{z}1", "c").Result())
	})
	add("ZCARD", func(ctx context.Context, c redis.UniversalClient) string { return res(c.ZCard(ctx, "{z}1").Result()) })
	add("ZCOUNT", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZCount(ctx, "{z}1", "1", "5").Result())
	})
	add("ZUNIONSTORE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZUnionStore(ctx, "{z}3", &redis.ZStore{Keys: []string{"{z}1", "{z}2"}}).Result())
	})
	add("ZINTERSTORE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZInterStore(ctx, "{z}4", &redis.ZStore{Keys: []string{"{z}1", "{z}2"}, Weights: []float64{2, 1}}).Result())
	})
	add("ZRANGE stored", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZRangeWithScores(ctx, "{z}3", 0, -1).Result())
	})
	add("ZREM", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZRem(ctx, "{z}1", "a", "zz").Result())
	})
	add("ZPOPMIN", func(ctx context.Context, c redis.UniversalClient) string { return res(c.ZPopMin(ctx, "{z}2").Result()) })
	add("ZREMRANGEBYRANK", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.ZRemRangeByRank(ctx, "{z}3", 0, 0).Result())
	})
	// streams
	add("XADD", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XAdd(ctx, &redis.XAddArgs{Stream: "stream:1", ID: "1-1", Values: []string{"f", "v"}}).Result())
	})
	add("XADD 2", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XAdd(ctx, &redis.XAddArgs{Stream: "stream:1", ID: "2-1", Values: []string{"f", "w"}}).Result())
	})
	add("XLEN", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XLen(ctx, "stream:1").Result())
	})
	add("XRANGE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XRange(ctx, "stream:1", "-", "+").Result())
	})
	add("XREVRANGE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XRevRangeN(ctx, "stream:1", "+", "-", 1).Result())
	})
	add("XREAD", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XRead(ctx, &redis.XReadArgs{Streams: []string{"stream:1", "0"}, Count: 10, Block: -1}).Result())
	})
	add("XGROUP CREATE", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XGroupCreate(ctx, "stream:1", "g1", "0").Result())
	})
	add("XREADGROUP", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g1", Consumer: "c1", Streams: []string{"stream:1", ">"}, Count: 1, Block: -1}).Result())
	})
	add("XACK", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XAck(ctx, "stream:1", "g1", "1-1").Result())
	})
	add("XDEL", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XDel(ctx, "stream:1", "2-1").Result())
	})
	add("XTRIM", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.XTrimMaxLen(ctx, "stream:1", 0).Result())
	})
	// geo
	add("GEOADD", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.GeoAdd(ctx, "geo", &redis.GeoLocation{Name: "a", Longitude: 13.36, Latitude: 38.11},
			&redis.GeoLocation{Name: "b", Longitude: 15.08, Latitude: 37.50}).Result())
	})
	add("GEODIST", func(ctx context.Context, c redis.UniversalClient) string {
		v, err := c.GeoDist(ctx, "geo", "a", "b", "km").Result()
		return res(int(v), err)
	})
	// scripting
	add("EVAL one key", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Eval(ctx, "return redis.call('incr', KEYS[1])", []string{"lua:1"}).Result())
	})
	add("EVAL tagged keys", func(ctx context.Context, c redis.UniversalClient) string {
		return res(c.Eval(ctx, "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[2])",
			[]string{"{lua}a", "{lua}b"}, "x").Result())
	})
	add("Script.Run", func(ctx context.Context, c redis.UniversalClient) string {
		return res(redis.NewScript("return redis.call('get', KEYS[1])").Run(ctx, c, []string{"{lua}a"}).Result())
	})
	// pipelines and transactions
	add("Pipelined", func(ctx context.Context, c redis.UniversalClient) string {
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < 10; i++ {
				p.Set(ctx, fmt.Sprintf("pipe:%d", i), i, 0)
			}
			p.MGet(ctx, "pipe:1", "pipe:9", "pipe:5")
			p.Incr(ctx, "pipe:3")
			p.Get(ctx, "nope")
			p.Del(ctx, "pipe:0", "pipe:8")
			return nil
		})
		return cmdsString(cmds, err)
	})
	add("TxPipelined tagged", func(ctx context.Context, c redis.UniversalClient) string {
		cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "{acct}balance", 100, 0)
			p.IncrBy(ctx, "{acct}balance", -30)
			p.RPush(ctx, "{acct}log", "withdraw 30")
			p.LRange(ctx, "{acct}log", 0, -1)
			return nil
		})
		return cmdsString(cmds, err)
	})
	add("Watch tagged", func(ctx context.Context, c redis.UniversalClient) string {
		err := c.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Get(ctx, "{acct}balance").Int()
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, "{acct}balance", n+1, 0)
				return nil
			})
			return err
		}, "{acct}balance")
		return res(c.Get(ctx, "{acct}balance").Val(), err)
	})
	// keyless
	add("PING", func(ctx context.Context, c redis.UniversalClient) string { return res(c.Ping(ctx).Result()) })
	add("ECHO", func(ctx context.Context, c redis.UniversalClient) string { return res(c.Echo(ctx, "hi").Result()) })
	add("DBSIZE", func(ctx context.Context, c redis.UniversalClient) string { return res(c.DBSize(ctx).Result()) })
	add("KEYS", func(ctx context.Context, c redis.UniversalClient) string {
		return res(sorted(c.Keys(ctx, "m:*").Result()))
	})
	add("SCAN all", func(ctx context.Context, c redis.UniversalClient) string {
		var all []string
		iter := c.Scan(ctx, 0, "pipe:*", 3).Iterator()
		for iter.Next(ctx) {
			all = append(all, iter.Val())
		}
		return res(sorted(all, iter.Err()))
	})
	add("SCAN TYPE", func(ctx context.Context, c redis.UniversalClient) string {
		var all []string
		iter := c.ScanType(ctx, 0, "", 5, "set").Iterator()
		for iter.Next(ctx) {
			all = append(all, iter.Val())
		}
		return res(sorted(all, iter.Err()))
	})
	add("FLUSHDB", func(ctx context.Context, c redis.UniversalClient) string { return res(c.FlushDB(ctx).Result()) })
	add("DBSIZE after flush", func(ctx context.Context, c redis.UniversalClient) string { return res(c.DBSize(ctx).Result()) })
	return s
}

func sorted(v []string, err error) ([]string, error) {
	out := append([]string(nil), v...)
	slices.Sort(out)
	return out, err
}

func cmdsString(cmds []redis.Cmder, err error) string {
	s := fmt.Sprintf("err=%v;", err)
	for _, c := range cmds {
		s += c.String() + fmt.Sprintf("(%v);", c.Err())
	}
	return s
}
