package redshard

import (
	"context"
	"fmt"
	"runtime"

	"github.com/redis/go-redis/v9"
	"github.com/redshard/redshard/internal/netconn"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/loan"
)

// Watch runs fn in an optimistic transaction on the shard that owns every
// one of keys: WATCH, the reads in fn and the MULTI/EXEC run on one
// connection of that shard, exactly as with a single server. Keys on several
// shards give ErrCrossShard. Inside fn, a command on tx whose keys live on
// another shard fails with ErrCrossShard instead of running on the wrong one.
//
// With no key, nothing is watched, so nothing binds fn to a shard: on one
// shard it runs on a connection of that shard, as on a single server; on
// several, tx routes each command (and each TxPipelined, whose keys must
// then be on one shard) as the Client does. WATCH inside fn is refused
// there: pass the keys to Watch.
func (c *Client) Watch(ctx context.Context, fn func(*redis.Tx) error, keys ...string) error {
	defer runtime.KeepAlive(c) // the Tx is c's: c stays open while fn runs
	for {
		if len(keys) == 0 && len(c.top.Load().shards) > 1 {
			return c.front.Watch(ctx, fn) // a Tx of the front client: its hooks are the router
		}
		if err := c.watch(ctx, fn, keys...); err != errReroute {
			return err
		}
	}
}

func (c *client) watch(ctx context.Context, fn func(*redis.Tx) error, keys ...string) error {
	top, slot, err := c.enter()
	if err != nil {
		return err
	}
	defer top.exit(slot)
	if len(keys) == 0 && len(top.shards) > 1 { // the ring grew since Watch looked
		return errReroute
	}
	i, first := 0, "" // no key: the only shard
	for n, k := range keys {
		if n == 0 {
			i, first = top.ring.LookupIndex(k), k
		} else if j := top.ring.LookupIndex(k); j != i {
			return top.crossShard("watch", first, i, k, j)
		}
	}
	if s := top.shards[i]; s.down.Load() {
		return s.downError()
	}
	if err := c.handOffAll(ctx, top, keys); err != nil {
		return err
	}
	// The transaction's connection is taken checked: go-redis does not
	// run a Watch again on a new one.
	defer top.shards[i].conns.CheckAll()()
	return top.shards[i].client.Watch(ctx, func(tx *redis.Tx) error {
		tx.AddHook(txGuard{c: c, top: top, shard: i, key: first})
		return fn(tx)
	}, keys...)
}

// txGuard is added to the *redis.Tx of a Watch: it refuses commands whose
// keys live on another shard than the transaction's.
type txGuard struct {
	c     *client
	top   *topology
	shard int
	key   string // the key that chose the shard, for messages
}

func (g txGuard) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g txGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		keys, err := g.check(cmd)
		if err == nil {
			err = g.c.handOffAll(ctx, g.top, keys)
		}
		if err != nil {
			return err
		}
		err = next(ctx, cmd)
		g.ran(cmd)
		return err
	}
}

func (g txGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var moved []string
		for _, cmd := range cmds {
			keys, err := g.check(cmd)
			if err != nil {
				err = fmt.Errorf("transaction not sent: %w", err)
				setCmdsErr(cmds, err)
				return err
			}
			moved = append(moved, keys...)
		}
		if err := g.c.handOffAll(ctx, g.top, moved); err != nil {
			setCmdsErr(cmds, err)
			return err
		}
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			g.ran(cmd)
		}
		return err
	}
}

// check refuses a command whose keys live on another shard and returns
// its keys.
func (g txGuard) check(cmd redis.Cmder) ([]string, error) {
	args := cmd.Args()
	var buf [8]int
	info, idx, err := command.Lookup(args, buf[:0])
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, k := range idx {
		keys = append(keys, command.Arg(args[k]))
	}
	target, first := g.shard, g.key
	switch {
	case info.Name == "watch":
		for _, key := range keys {
			if i := g.top.ring.LookupIndex(key); i != target {
				return nil, g.top.crossShard("watch", first, target, key, i)
			}
		}
		return keys, nil
	case info.Class == command.NotSharded:
		return nil, nil // connection state of this transaction: MULTI, EXEC, UNWATCH, ...
	}
	return keys, g.top.checkTxCommand(info, args, idx, &target, &first)
}

// ran tells the hot-key layer about a command of the transaction once it
// ran (hot.Path.Ran): a write's keys are invalidated; a keyed read (GET
// after WATCH, or inside MULTI) supersedes its keys' cached replies, since
// its reply, read from the server, may be newer than they are. The
// transaction's own commands (WATCH, MULTI, EXEC) are not its reads.
func (g txGuard) ran(cmd redis.Cmder) {
	if g.c.hot == nil {
		return
	}
	var buf [8]int
	if info, keys, err := command.Lookup(cmd.Args(), buf[:0]); err == nil && info.Class != command.NotSharded {
		g.c.hot.Ran(info, cmd.Args(), keys, cmd.Err())
	}
}

// Conn returns a connection for commands that must share one: with one
// shard, no membership change in progress and no hot-key layer, it is a
// dedicated connection of that shard's client, as on a plain go-redis
// client (SELECT, CLIENT SETNAME, CLIENT TRACKING and the like stick to
// it; command hooks (AddCommandHook) do not see its commands, shard hooks
// do). Otherwise it routes every command exactly as c does, over the
// shards' pools, since no one connection reaches every shard. Close it
// when done, as with go-redis. It keeps c open while it is reachable, even
// once c itself is not (see Client). (On one shard, a Conn that made a new
// connection of the pool stays reachable for good: go-redis keeps its
// init function on the connection.)
func (c *Client) Conn() *redis.Conn {
	defer runtime.KeepAlive(c) // until the Conn is lent (internal/loan)
	var conn *redis.Conn
	if top := c.top.Load(); !c.closed.Load() && len(top.shards) == 1 && top.settled() && c.hot == nil {
		conn = top.shards[0].client.Conn()
		// Its connection is taken checked: go-redis does not retry a
		// Conn's command on another connection.
		conn.AddHook(netconn.CheckedHook{Set: &top.shards[0].conns})
	} else {
		conn = c.front.Conn()
	}
	loan.UntilUnreachable(c.loans, conn)
	return conn
}
