package redshard

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
	"github.com/redshard/redshard/internal/parallel"
)

// routeHook is installed on the front client. It replaces go-redis's
// processing with routing and never calls next, so the front never dials.
type routeHook struct{ c *client }

func (h routeHook) DialHook(redis.DialHook) redis.DialHook {
	return dialFront
}

func (h routeHook) ProcessHook(redis.ProcessHook) redis.ProcessHook { return h.c.processCommand }

func (h routeHook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return h.c.processCommands
}

// routeOne is where a command enters routing, below the command hooks
// (processCommand): it routes cmd, again whenever it was held in a fleet's
// Prepare and released (errReroute). A command never held pays one
// comparison for the loop.
func (c *client) routeOne(ctx context.Context, cmd redis.Cmder) error {
	for {
		err := c.process(ctx, cmd)
		if err != errReroute {
			return err
		}
		cmd.SetErr(nil)
	}
}

// routeMany is routeOne for a pipeline or a transaction.
func (c *client) routeMany(ctx context.Context, cmds []redis.Cmder) error {
	for {
		err := c.processPipeline(ctx, cmds)
		if err != errReroute {
			return err
		}
		for _, cmd := range cmds {
			cmd.SetErr(nil)
		}
	}
}

// process routes one command. go-redis stores the returned error on cmd.
//
// It only counts the command in flight around route: with its few returns
// the compiler open-codes the defer, which in route's many would cost a
// deferred call record per command.
func (c *client) process(ctx context.Context, cmd redis.Cmder) error {
	top, slot, err := c.enter()
	if err != nil {
		return err
	}
	var buf [8]int
	info, keys, err := command.Lookup(cmd.Args(), buf[:0])
	if err == nil && info.Flags&command.Blocking != 0 {
		// A blocking command may wait for ever; a change waits for it only
		// briefly (see blockingGrace).
		top.block(slot)
		defer top.unblock()
		return c.route(ctx, top, cmd, &info, keys, err, true)
	}
	defer top.exit(slot)
	return c.route(ctx, top, cmd, &info, keys, err, false)
}

// route carries out one command counted in flight on top, with what
// command.Lookup said of it (lookupErr is its error): a keyed command here,
// the others in routeOther. info is a pointer and the rest a call away so
// that the common case copies and spills little.
func (c *client) route(ctx context.Context, top *topology, cmd redis.Cmder, info *command.Info, keys []int,
	lookupErr error, blocking bool) error {
	err := lookupErr
	if err == nil && len(keys) > 0 && (info.Class == command.Keyed || info.Class == command.Channel) {
		// The hot path: one shard, the caller's command object, no allocation.
		var i int
		if len(keys) == 1 && info.Flags&command.OtherKeys == 0 {
			i = top.ring.LookupIndex(command.Arg(cmd.Args()[keys[0]])) // owner, in short
		} else {
			i, err = top.owner(info, cmd.Args(), keys)
		}
		if err == nil {
			// A channel is no key: nothing to move, hold or fence (during
			// a change the pub/sub multiplexer listens on both owners).
			if top.guarded && info.Class == command.Keyed {
				if err := c.handOff(ctx, top, cmd, keys); err != nil {
					return err
				}
			}
			if s := top.shards[i]; !s.down.Load() {
				if c.hot != nil {
					return c.hot.Process(ctx, (*hotTopology)(top), *info, cmd, keys, i)
				}
				return s.send(ctx, cmd, blocking)
			}
			return c.processDown(ctx, top, *info, cmd, keys, i)
		}
	}
	return c.routeOther(ctx, top, cmd, *info, keys, err, blocking)
}

// routeOther is route for every command but a keyed one that found its
// owner; err is Lookup's or the owner's error.
func (c *client) routeOther(ctx context.Context, top *topology, cmd redis.Cmder, info command.Info, keys []int,
	err error, blocking bool) error {
	if top.single(info, keys, err) {
		return c.processSingle(ctx, top, info, cmd)
	}
	if err != nil {
		return err
	}
	if info.Name == "randomkey" {
		return top.randomKey(ctx, cmd)
	}
	if c.hot != nil && info.Name == "mget" {
		if done, err := c.hot.MGet(ctx, (*hotTopology)(top), cmd, keys); done {
			return err
		}
	}
	if err := c.flushRefused(top, info, false); err != nil {
		cmd.SetErr(err)
		return err
	}
	rt, err := top.plan(ctx, cmd, info, keys)
	if err != nil {
		return err
	}
	if top.guarded && info.Class == command.Split {
		if err := c.handOff(ctx, top, cmd, keys); err != nil {
			return err
		}
	}
	if top.handoff != nil && info.Class == command.Fanout && (info.Name == "flushdb" || info.Name == "flushall") {
		return c.flushDuringChange(ctx, top, cmd, rt)
	}
	if rt.direct >= 0 {
		if s := top.shards[rt.direct]; !s.down.Load() {
			if c.hot != nil && info.Class == command.Split && len(keys) == 1 {
				return c.hot.Process(ctx, (*hotTopology)(top), info, cmd, keys, rt.direct) // EXISTS k, DEL k, ...
			}
			err := s.send(ctx, cmd, blocking)
			c.ran(info, cmd, keys)
			return err
		}
		return c.processDown(ctx, top, info, cmd, keys, rt.direct)
	}
	parallel.Run(len(rt.subs), func(i int) {
		s := rt.subs[i]
		if b := top.shards[s.shard]; b.down.Load() {
			s.cmd.SetErr(b.downError())
		} else {
			_ = b.send(ctx, s.cmd, blocking)
		}
	})
	parallel.Run(len(rt.after), func(i int) {
		s := rt.after[i]
		_ = top.shards[s.shard].send(ctx, s.cmd, false)
	})
	rt.finish()
	c.ran(info, cmd, keys)
	return cmd.Err()
}

// ran tells the hot-key layer of a command routeOther sent, once it ran
// (hot.Path.Ran: a split read such as MGET supersedes its keys' cached
// replies, whether it went to one shard or to several), and counts a
// read's keys toward detection.
func (c *client) ran(info command.Info, cmd redis.Cmder, keys []int) {
	if c.hot == nil {
		return
	}
	if !info.MayWrite() {
		c.hot.Observe(cmd.Args(), keys)
	}
	c.hot.Ran(info, cmd.Args(), keys, cmd.Err())
}

// single reports whether a command goes, exactly as it is, to the ring's
// only shard, as it would to a plain go-redis client on that server:
// connection-state, server and scripting commands with no key (HELLO,
// SELECT, CLIENT *, INFO, EVAL with numkeys 0, ...). Commands the table does
// not know, and arguments it cannot parse (the server answers them), go too
// unless a membership change is being handed off, when their keys may still
// be on a removed shard. So do fanned-out commands whose merge keeps one
// reply (CONFIG SET, FUNCTION LIST, ...). What redshard does itself (DBSIZE
// and KEYS without its own keys, SCAN cursors, FLUSHDB during a change)
// keeps its path.
func (t *topology) single(info command.Info, keys []int, lookupErr error) bool {
	if len(t.shards) != 1 {
		return false
	}
	if lookupErr != nil {
		return t.settled() && errors.Is(lookupErr, command.ErrMalformed)
	}
	switch info.Class {
	case command.NotSharded:
		return true
	case command.Unknown:
		return t.settled()
	case command.Keyed:
		return len(keys) == 0
	case command.Fanout: // one shard's reply is the answer: the server's own, errors included
		return t.settled() && ownReply(info.Merge)
	}
	return false
}

// processSingle sends cmd as it is to the ring's only shard (see single).
// A script or command whose keys are unknown may write any key, so the
// hot-key layer forgets what it holds.
func (c *client) processSingle(ctx context.Context, top *topology, info command.Info, cmd redis.Cmder) error {
	s := top.shards[0]
	if s.down.Load() {
		err := s.downError()
		cmd.SetErr(err)
		return err
	}
	err := s.client.Process(ctx, cmd)
	if c.hot != nil && info.MayWrite() {
		c.hot.Written(info, cmd.Args(), nil)
	}
	return err
}

// flushRefused returns the error of a FLUSHDB, FLUSHALL or SWAPDB that
// cannot run safely while top's membership change is in progress, or nil.
// In a fleet every such command is refused until the change is over: the
// other processes' moves are not held off by this one's flush (a key taken
// from its previous owner before the flush could be settled on its new
// owner after it, the flush having also emptied the settled set that would
// refuse it), and in Prepare the flush would reach the previous ring's
// servers only. A single client (SetShards) runs FLUSHDB and FLUSHALL alone
// with its own moves held off (flushDuringChange); in a pipeline, which
// would not reach the removed servers, they are refused, and SWAPDB always.
func (c *client) flushRefused(top *topology, info command.Info, pipelined bool) error {
	if info.Class != command.Fanout || top.settled() ||
		info.Name != "flushdb" && info.Name != "flushall" && info.Name != "swapdb" {
		return nil
	}
	name := displayName(info.Name)
	switch {
	case c.fleet != nil && top.handoff == nil && top.hold == nil:
		return fmt.Errorf("%w: %s while this process is fenced (%s): a change it has not seen may be moving keys; run it once it has caught up",
			ErrFenced, name, top.fence.Reason())
	case c.fleet != nil:
		return fmt.Errorf("%w: %s while the fleet changes membership: another process's move could bring flushed keys back; run it once the change is over",
			ErrHandoffInProgress, name)
	case info.Name == "swapdb":
		return fmt.Errorf("%w: %s during a membership change: keys being moved would land in the other database", ErrHandoffInProgress, name)
	case pipelined:
		return fmt.Errorf("%w: %s in a pipeline during a membership change would miss the removed servers; send it alone", ErrHandoffInProgress, name)
	}
	return nil
}

// flushDuringChange runs FLUSHDB or FLUSHALL while a membership change is
// in progress: on every shard and on the servers the change removed, whose
// keys would otherwise be handed off after the flush, with this process's
// moves held off meanwhile.
func (c *client) flushDuringChange(ctx context.Context, top *topology, cmd redis.Cmder, rt route) error {
	defer top.handoff.excludeMoves()()
	orphans := make([]redis.Cmder, len(top.orphans))
	for i := range orphans {
		orphans[i] = cmd.Clone()
	}
	parallel.Run(len(rt.subs)+len(orphans), func(i int) {
		if i < len(rt.subs) {
			s := rt.subs[i]
			if b := top.shards[s.shard]; b.down.Load() {
				s.cmd.SetErr(b.downError())
			} else {
				_ = b.client.Process(ctx, s.cmd)
			}
			return
		}
		_ = top.orphans[i-len(rt.subs)].client.Process(ctx, orphans[i-len(rt.subs)])
	})
	rt.finish()
	for i, o := range orphans {
		switch err := o.Err(); {
		case err == nil || cmd.Err() != nil:
		case isRedisError(err): // keep the server's error a redis.Error
			cmd.SetErr(wrapShardErr(top.orphans[i].Shard, err))
		default:
			cmd.SetErr(fmt.Errorf("redshard: %s on removed shard %s: %w", displayName(cmd.Name()), top.orphans[i].Shard, err))
		}
	}
	if c.hot != nil {
		c.hot.InvalidateAll()
	}
	return cmd.Err()
}

// plan decides how a command that is not a plain keyed command is carried out.
func (t *topology) plan(ctx context.Context, cmd redis.Cmder, info command.Info, keys []int) (route, error) {
	args := cmd.Args()
	switch info.Class {
	case command.Keyed, command.Channel:
		i, err := t.owner(&info, args, keys)
		return route{direct: i}, err
	case command.Split:
		return t.planSplit(ctx, cmd, info, keys)
	case command.Fanout:
		return t.planFanout(ctx, cmd, info), nil
	case command.Scan:
		return t.planScan(ctx, cmd)
	default:
		return route{}, classErr(info, args)
	}
}

// processPipeline routes a pipeline or, when go-redis wrapped it in
// MULTI/EXEC, a transaction.
func (c *client) processPipeline(ctx context.Context, cmds []redis.Cmder) error {
	if isTx(cmds) {
		return c.processTx(ctx, cmds[1:len(cmds)-1])
	}
	top, slot, err := c.enter()
	if err != nil {
		setCmdsErr(cmds, err)
		return err
	}
	defer top.exit(slot)
	// Every command (or sub-command) is first listed with its shard, then
	// grouped per shard with a counting sort: one allocation, not one per
	// append.
	sends := make([]sub, 0, len(cmds))
	var after []sub // sent once the pipelines are done
	var finishes []func()
	var moved []string // keys to hand off before the pipeline runs
	var writes notes
	var perServer []int                       // indexes into sends of TIME and the like, placed once the keys' shard is known
	hp := c.hot.Pipeline((*hotTopology)(top)) // answers hot reads from the local cache
	var buf [8]int
	for _, cmd := range cmds {
		info, keys, err := command.Lookup(cmd.Args(), buf[:0])
		if hp.Answer(info, cmd, keys, err) {
			continue
		}
		if err == nil && info.Flags&command.PerServer != 0 && !top.single(info, keys, err) {
			perServer = append(perServer, len(sends))
			sends = append(sends, sub{shard: -1, cmd: cmd})
			continue
		}
		var rt route
		switch {
		case top.single(info, keys, err):
			rt, err = route{direct: 0}, nil
		case err == nil:
			if err = c.flushRefused(top, info, true); err == nil {
				rt, err = top.plan(ctx, cmd, info, keys)
			}
		}
		if err == nil {
			c.note(&writes, len(cmds), info, cmd, keys)
		}
		if err == nil && top.guarded && info.Class != command.Fanout && info.Class != command.Scan && info.Class != command.Channel {
			for _, k := range keys {
				moved = append(moved, command.Arg(cmd.Args()[k]))
			}
		}
		switch {
		case err != nil:
			cmd.SetErr(err)
		case rt.direct >= 0:
			i := rt.direct
			if !top.shards[i].down.Load() {
				sends = append(sends, sub{shard: i, cmd: cmd})
				break
			}
			j, err := top.serve(i, cmd.Args(), keys)
			if err != nil {
				cmd.SetErr(err)
				break
			}
			if !info.MayWrite() {
				sends = append(sends, sub{shard: j, cmd: cmd})
				break
			}
			caps, ok := top.recordStandIn(ctx, cmd.Args(), keys, i, j)
			if !ok { // the owner came up meanwhile
				sends = append(sends, sub{shard: i, cmd: cmd})
				break
			}
			sends = append(sends, sub{shard: j, cmd: cmd})
			for _, capCmd := range caps {
				sends = append(sends, sub{shard: j, cmd: capCmd})
			}
		default:
			for _, s := range rt.subs {
				if b := top.shards[s.shard]; b.down.Load() {
					s.cmd.SetErr(b.downError())
					continue
				}
				sends = append(sends, s)
			}
			after = append(after, rt.after...)
			finishes = append(finishes, rt.finish)
		}
	}
	if len(perServer) > 0 {
		sends = top.placePerServer(cmds, sends, perServer)
	}
	if err := c.handOffBatch(ctx, top, cmds, moved); err != nil {
		setCmdsErr(cmds, err)
		return err
	}
	hp.Start(ctx)
	perShard := groupByShard(sends, len(top.shards))
	used := make([]int, 0, len(perShard))
	for i, list := range perShard {
		if len(list) > 0 {
			used = append(used, i)
		}
	}
	parallel.Run(len(used), func(j int) {
		i := used[j]
		p := top.shards[i].client.Pipeline()
		p.BatchProcess(ctx, perShard[i]...)
		_, _ = p.Exec(ctx) // errors are on the commands
	})
	parallel.Run(len(after), func(i int) {
		s := after[i]
		_ = top.shards[s.shard].client.Process(ctx, s.cmd)
	})
	hp.Wait()
	for _, f := range finishes {
		f()
	}
	c.wrote(top, &writes)
	return firstErr(cmds)
}

// placePerServer places the PerServer commands of a pipeline (TIME,
// LASTSAVE), listed in sends at the indexes perServer with no shard yet:
// on the shard that owns every key of the pipeline's keyed commands, or,
// when those keys live on several shards or there are none, nowhere, with
// ErrNotSharded. It returns sends without the commands it did not place.
func (t *topology) placePerServer(cmds []redis.Cmder, sends []sub, perServer []int) []sub {
	target, first := -1, ""
	other, otherKey := -1, ""
	var buf [8]int
	for _, cmd := range cmds {
		info, keys, err := command.Lookup(cmd.Args(), buf[:0])
		if err != nil || info.Class != command.Keyed && info.Class != command.Split {
			continue
		}
		for _, k := range keys {
			key := command.Arg(cmd.Args()[k])
			switch i := t.ring.LookupIndex(key); {
			case target < 0:
				target, first = i, key
			case i != target && other < 0:
				other, otherKey = i, key
			}
		}
	}
	for _, n := range perServer {
		cmd := sends[n].cmd
		name := displayName(cmd.Name())
		switch {
		case other >= 0:
			cmd.SetErr(fmt.Errorf("%w: %s in a pipeline runs on the shard that holds the pipeline's keys, and key %q is on shard %s and key %q on shard %s; "+
				"run it on each shard with ForEachShard", ErrNotSharded, name, first, t.shards[target].Name, otherKey, t.shards[other].Name))
		case target < 0:
			cmd.SetErr(fmt.Errorf("%w: %s in a pipeline runs on the shard that holds the pipeline's keys, and this pipeline names no key; "+
				"run it on each shard with ForEachShard", ErrNotSharded, name))
		case t.shards[target].down.Load():
			cmd.SetErr(t.shards[target].downError())
		default:
			sends[n].shard = target
		}
	}
	return slices.DeleteFunc(sends, func(s sub) bool { return s.shard < 0 })
}

// groupByShard returns the commands of sends per shard, in their order.
func groupByShard(sends []sub, n int) [][]redis.Cmder {
	counts := make([]int, n+1)
	for _, s := range sends {
		counts[s.shard+1]++
	}
	for i := 1; i <= n; i++ {
		counts[i] += counts[i-1]
	}
	flat := make([]redis.Cmder, len(sends))
	out := make([][]redis.Cmder, n)
	for i := range out {
		out[i] = flat[counts[i]:counts[i]:counts[i+1]]
	}
	for _, s := range sends {
		out[s.shard] = append(out[s.shard], s.cmd)
	}
	return out
}

// write is a command of a pipeline or transaction that the hot-key layer
// must hear of once it has run (hot.Path.Ran): a write, whose keys it
// invalidates, or a keyed read the local cache did not answer, whose reply
// may be newer than the cached ones (docs/hot-reads.md).
type write struct {
	info command.Info
	args []interface{}
	keys []int
	cmd  redis.Cmder // for its error
}

// notes are the commands of a pipeline or transaction that the hot-key
// layer must hear of once they have run (see write), with their keys in
// one array for the whole batch: a few allocations per batch, not one per
// command.
type notes struct {
	writes []write
	keys   []int
}

// note records cmd in n when the hot-key layer needs to know (a write, or
// a read that names keys), and counts a read's keys toward hot-key
// detection at once, so that a key can turn hot partway through a
// pipeline. batch is the number of commands of the batch, to size n once.
func (c *client) note(n *notes, batch int, info command.Info, cmd redis.Cmder, keys []int) {
	if c.hot == nil {
		return
	}
	args := cmd.Args()
	if !info.MayWrite() {
		c.hot.Observe(args, keys)
		if len(keys) == 0 {
			return
		}
	}
	if n.writes == nil {
		n.writes = make([]write, 0, batch)
		n.keys = make([]int, 0, batch)
	}
	start := len(n.keys)
	n.keys = append(n.keys, keys...)
	n.writes = append(n.writes, write{info, args, n.keys[start:len(n.keys):len(n.keys)], cmd})
}

// wrote tells the hot-key layer of the writes and reads noted in n, once
// their batch has run.
func (c *client) wrote(top *topology, n *notes) {
	for _, w := range n.writes {
		c.hot.Ran(w.info, w.args, w.keys, w.cmd.Err())
	}
}

// processTx runs a transaction's commands as one MULTI/EXEC on the shard
// that owns all of their keys, or fails every command with nothing sent.
func (c *client) processTx(ctx context.Context, cmds []redis.Cmder) error {
	top, slot, err := c.enter()
	if err != nil {
		setCmdsErr(cmds, err)
		return err
	}
	defer top.exit(slot)
	target, firstKey := -1, ""
	var moved []string
	var writes notes
	var perServer redis.Cmder // a TIME or the like: it needs a key to choose the shard
	var buf [8]int
	for _, cmd := range cmds {
		info, keys, err := command.Lookup(cmd.Args(), buf[:0])
		if top.single(info, keys, err) {
			err = nil
		} else if err == nil {
			err = top.checkTxCommand(info, cmd.Args(), keys, &target, &firstKey)
			if err == nil && info.Flags&command.PerServer != 0 {
				perServer = cmd
			}
		}
		if err == nil {
			c.note(&writes, len(cmds), info, cmd, keys)
		}
		if err != nil {
			err = fmt.Errorf("transaction not sent: %w", err)
			setCmdsErr(cmds, err)
			return err
		}
		if top.guarded {
			for _, k := range keys {
				moved = append(moved, command.Arg(cmd.Args()[k]))
			}
		}
	}
	if err := c.handOffBatch(ctx, top, cmds, moved); err != nil {
		setCmdsErr(cmds, err)
		return err
	}
	if target < 0 && perServer != nil {
		err := fmt.Errorf("transaction not sent: %w: %s in a transaction runs on the shard that holds the transaction's keys, "+
			"and this transaction names no key; run it on each shard with ForEachShard", ErrNotSharded, displayName(perServer.Name()))
		setCmdsErr(cmds, err)
		return err
	}
	if target < 0 {
		// No key: the only shard, or (checkTxCommand lets nothing else
		// through) PINGs and ECHOs, which every shard answers alike.
		target = top.anyUp()
	}
	if s := top.shards[target]; s.down.Load() {
		err := s.downError()
		setCmdsErr(cmds, err)
		return err
	}
	_, err = top.shards[target].client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, cmd := range cmds {
			_ = p.Process(ctx, cmd)
		}
		return nil
	})
	c.wrote(top, &writes)
	return err
}

// anyUp returns a shard that is not marked down, the first if all are.
func (t *topology) anyUp() int {
	for i, s := range t.shards {
		if !s.down.Load() {
			return i
		}
	}
	return 0
}

// checkTxCommand checks that one command of a transaction (or of a Watch
// callback) can run on the transaction's shard. *target is the shard chosen
// so far (-1: none yet) and *firstKey the key that chose it.
func (t *topology) checkTxCommand(info command.Info, args []interface{}, keys []int, target *int, firstKey *string) error {
	if t.single(info, keys, nil) || len(t.shards) == 1 && t.settled() && info.Class == command.Fanout {
		if *target < 0 {
			*target = 0
		}
		return nil
	}
	if info.Flags&command.PerServer != 0 {
		return nil // it runs on the transaction's shard, which its keys choose (processTx)
	}
	switch info.Class {
	case command.Keyed, command.Channel, command.Split:
		if err := t.otherKeysErr(info); err != nil {
			return err
		}
		for _, k := range keys {
			key := command.Arg(args[k])
			i := t.ring.LookupIndex(key)
			if *target < 0 {
				*target, *firstKey = i, key
			} else if i != *target {
				return t.crossShard(info.Name, *firstKey, *target, key, i)
			}
		}
		if len(keys) == 0 && info.Class != command.Split {
			_, err := t.owner(&info, args, keys)
			return err
		}
		return nil
	case command.Fanout:
		if info.Name == "ping" || info.Name == "echo" { // any shard answers alike
			return nil
		}
		return fmt.Errorf("%w: %s inside a transaction would run on one shard only; run it outside with ForEachShard",
			ErrNotSharded, displayName(info.Name))
	case command.NotSharded, command.Unknown:
		return classErr(info, args)
	default:
		return fmt.Errorf("%w: %s cannot run inside a transaction", ErrNotSharded, displayName(info.Name))
	}
}

// classErr is the error of a command that is refused by class.
func classErr(info command.Info, args []interface{}) error {
	if info.Class == command.NotSharded {
		return fmt.Errorf("%w: %s: %s", ErrNotSharded, displayName(info.Name), info.Hint)
	}
	return fmt.Errorf("%w: %s: the routing table does not know where its keys are; "+
		"run it on the right shard with ShardFor or ForEachShard", ErrUnknownCommand, displayName(cmdName(args)))
}

func setCmdsErr(cmds []redis.Cmder, err error) {
	for _, cmd := range cmds {
		cmd.SetErr(err)
	}
}

func firstErr(cmds []redis.Cmder) error {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}

// cmdName returns args[0] as text, for messages.
func cmdName(args []interface{}) string {
	if len(args) == 0 {
		return "(empty command)"
	}
	return command.Arg(args[0])
}

// processDown runs a command whose owner i is down: on its stand-in when
// failover is on, else it fails fast with ErrShardDown.
func (c *client) processDown(ctx context.Context, top *topology, info command.Info, cmd redis.Cmder, keys []int, i int) error {
	j, err := top.serve(i, cmd.Args(), keys)
	if err != nil {
		return err
	}
	c.stats.standInCommands.Add(1)
	standIn := top.shards[j].client
	if !info.MayWrite() {
		err := standIn.Process(ctx, cmd)
		if c.hot != nil {
			c.hot.Served(info, cmd.Args(), keys, err)
		}
		return err
	}
	caps, ok := top.recordStandIn(ctx, cmd.Args(), keys, i, j)
	if !ok { // the owner came up meanwhile
		return top.shards[i].client.Process(ctx, cmd)
	}
	_, _ = standIn.Pipelined(ctx, func(p redis.Pipeliner) error {
		_ = p.Process(ctx, cmd)
		for _, c := range caps {
			_ = p.Process(ctx, c)
		}
		return nil
	})
	if c.hot != nil {
		c.hot.Written(info, cmd.Args(), keys)
	}
	return cmd.Err()
}

// commandChain is an immutable chain of command hooks ending in routing.
type commandChain struct {
	hooks    []redis.Hook
	process  redis.ProcessHook
	pipeline redis.ProcessPipelineHook
}

// processCommand runs cmd through the command hooks, if any, and routing.
func (c *client) processCommand(ctx context.Context, cmd redis.Cmder) error {
	if ch := c.cmdHooks.Load(); ch != nil {
		return ch.process(ctx, cmd)
	}
	return c.routeOne(ctx, cmd)
}

// processCommands runs a pipeline through the command hooks and routing.
func (c *client) processCommands(ctx context.Context, cmds []redis.Cmder) error {
	if ch := c.cmdHooks.Load(); ch != nil {
		return ch.pipeline(ctx, cmds)
	}
	return c.routeMany(ctx, cmds)
}
