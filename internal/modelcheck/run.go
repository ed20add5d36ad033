package modelcheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
)

// Server is one server the scheduler may put on the ring.
type Server struct {
	Addr string
	// Down makes the server unreachable without losing its data, Up brings
	// it back; nil when the backend cannot (then the plan has no faults).
	Down, Up func()
}

// Config is one history to run.
type Config struct {
	Plan    *Plan
	Servers []Server // at least Plan.Servers; the first Plan.Shards start on the ring
	// NewClient opens a redshard client over shards. Run adds its hook,
	// and closes the client at the end.
	NewClient func(shards []redshard.Shard) (*redshard.Client, error)
	// Timeout bounds the whole history (a stuck history is a failure).
	// Default 60s.
	Timeout time.Duration
}

// Failure is one violation found in a history.
type Failure struct {
	Kind string // "linearizability", "final state", "placement", "error", "stuck", ...
	Key  string // "" when not about one key
	Msg  string
}

func (f Failure) String() string {
	if f.Key != "" {
		return fmt.Sprintf("%s: key %s: %s", f.Kind, f.Key, f.Msg)
	}
	return f.Kind + ": " + f.Msg
}

// Result is what one history did and what the checks found.
type Result struct {
	Plan      *Plan
	Failures  []Failure
	Commands  int // per-key commands checked
	Ambiguous int // of which outcome unknown
	Changes   int // SetShards accepted (per change, not per client)
	Refused   int // SetShards refused with ErrHandoffInProgress
	Rebalance int // Rebalance runs (cancelled ones included)
	Cancelled int
	Paused    int // holds that paused a command
	hist      *recorder
}

// Run runs cfg's plan and checks its history.
func Run(cfg Config) *Result {
	p := cfg.Plan
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	res := &Result{Plan: p, hist: &recorder{}}
	r := &runner{cfg: cfg, p: p, res: res, rec: res.hist, holds: map[int]*heldOp{}}
	r.ctx, r.cancel = context.WithTimeout(context.Background(), cfg.Timeout)
	defer r.cancel()
	if err := r.start(); err != nil {
		res.fail("setup", "", "%v", err)
		return res
	}
	defer func() {
		for _, c := range r.clients {
			_ = c.Close()
		}
	}()
	for i, s := range p.Steps {
		if r.ctx.Err() != nil {
			res.fail("stuck", "", "the history did not finish within %v; it was at step %d of %d (%v)", cfg.Timeout, i, len(p.Steps), s.Kind)
			break
		}
		r.step(i, s)
	}
	r.finish()
	r.check()
	return res
}

type runner struct {
	cfg     Config
	p       *Plan
	res     *Result
	rec     *recorder
	ctx     context.Context
	cancel  context.CancelFunc
	clients []*redshard.Client

	names   []string         // each server's base name
	cur     []redshard.Shard // the list every client runs
	lists   [][]redshard.Shard
	renames int

	workers []*worker
	wg      sync.WaitGroup // workers and held operations

	holds    map[int]*heldOp // by hold ID: the scheduler's only
	progress []*heldOp       // paused, waiting for the next Rebalance's Progress calls
	rb       *rebalanceRun
	down     []int // servers made unreachable, oldest first
}

// heldOp is an operation run with a hold, or a Rebalance's hold.
type heldOp struct {
	h      *hold
	done   chan struct{} // closed when the operation returned (nil: a Rebalance's)
	keys   []string
	client int // the client that runs it
}

type worker struct {
	jobs chan job
	mu   sync.Mutex
	keys []string // guarded by mu: the keys of the operation running
}

type job struct {
	op   *Op // nil: a barrier
	keys []string
	took chan struct{} // closed once the worker has noted keys
}

func (w *worker) current() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keys
}

func (r *runner) start() error {
	p := r.p
	if len(r.cfg.Servers) < p.Servers {
		return fmt.Errorf("the plan needs %d servers, got %d", p.Servers, len(r.cfg.Servers))
	}
	for i := range p.Servers {
		r.names = append(r.names, fmt.Sprintf("s%d", i))
	}
	for i := range p.Shards {
		r.cur = append(r.cur, redshard.Shard{Name: r.names[i], Addr: r.cfg.Servers[i].Addr, Weight: 1})
	}
	r.lists = [][]redshard.Shard{slices.Clone(r.cur)}
	for range max(1, p.Scenario.Clients) {
		c, err := r.cfg.NewClient(slices.Clone(r.cur))
		if err != nil {
			return err
		}
		c.AddShardHook(func(s redshard.Shard) redis.Hook { return holdHook{shard: s} })
		r.clients = append(r.clients, c)
	}
	for w := range p.Workers {
		wk := &worker{jobs: make(chan job)}
		r.workers = append(r.workers, wk)
		c := r.clients[w%len(r.clients)]
		r.wg.Go(func() {
			for j := range wk.jobs {
				wk.mu.Lock()
				wk.keys = j.keys
				wk.mu.Unlock()
				close(j.took)
				if j.op != nil {
					r.exec(r.ctx, c, w, j.op)
				}
				wk.mu.Lock()
				wk.keys = nil
				wk.mu.Unlock()
			}
		})
	}
	r.rec.event("start: %s", r.describeList(r.cur))
	return nil
}

func (r *runner) step(i int, s Step) {
	switch s.Kind {
	case StepOp:
		op := &r.p.Ops[s.Op]
		r.dispatch(s.Worker, op)
	case StepHeld:
		r.runHeld(s)
	case StepRelease:
		if ho := r.holds[s.Hold.ID]; ho != nil {
			r.open(ho)
		}
	case StepChange:
		r.change(s)
	case StepRebalance:
		if r.p.Scenario.QuietRebalance {
			r.quiesce()
			r.startRebalance(s)
			r.awaitRebalance()
			break
		}
		r.startRebalance(s)
	case StepDown:
		r.serverDown(s)
	case StepUp:
		r.serverUp()
	case StepAwaitRebalance:
		r.awaitRebalance()
	case StepQuiesce:
		r.quiesce()
		for _, ho := range r.holds { // and the released operations have returned
			if ho.done != nil && isClosed(ho.h.release) {
				select {
				case <-ho.done:
				case <-r.ctx.Done():
				}
			}
		}
	}
}

// dispatch hands op to a worker once it is free. Nothing a worker runs
// may wait for a hold forever: a command on a key whose handoff is paused
// would join the paused handoff (one per key), so that hold is released
// first.
func (r *runner) dispatch(w int, op *Op) {
	wk := r.workers[w]
	var keys []string
	if op != nil {
		keys = opKeys(op)
	}
	r.unblock(w%len(r.clients), keys)
	r.unblock(w%len(r.clients), wk.current())
	j := job{op: op, keys: keys, took: make(chan struct{})}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case wk.jobs <- j:
			r.wait(j.took)
			return
		case <-r.ctx.Done():
			return
		case <-t.C: // the worker is busy: see wait
			r.releaseStalled()
		}
	}
}

// wait waits for ch. A membership change waits for the commands in flight
// on the previous ring, held ones included; a held command stands for a
// slow one, which ends some time: when the wait stalls, the oldest paused
// operation is released, one per tick, so the schedule goes on. It
// reports false when the run was stopped.
func (r *runner) wait(ch <-chan struct{}) bool {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ch:
			return true
		case <-r.ctx.Done():
			return false
		case <-t.C:
			r.releaseStalled()
		}
	}
}

// releaseStalled releases the paused operation with the lowest hold ID
// (commands before Rebalances' own pauses).
func (r *runner) releaseStalled() {
	var pick *heldOp
	for _, ho := range r.holds {
		if !isClosed(ho.h.arrived) || isClosed(ho.h.release) {
			continue
		}
		if pick == nil || (ho.done != nil && pick.done == nil) ||
			((ho.done == nil) == (pick.done == nil) && ho.h.spec.ID < pick.h.spec.ID) {
			pick = ho
		}
	}
	if pick != nil {
		r.rec.event("%v released: the schedule stalled (a change waits for the commands in flight on the old ring)", pick.h.spec)
		r.open(pick)
	}
}

// quiesce waits until no worker runs a command (held operations may).
func (r *runner) quiesce() {
	for w := range r.workers { // a worker takes a job once the previous one returned
		r.dispatch(w, nil)
	}
}

// unblock releases the paused handoffs (holds on RESTORE or the delete of a
// handoff, which runs as a shared flight per key and per client) of keys on
// client.
func (r *runner) unblock(client int, keys []string) {
	if len(keys) == 0 {
		return
	}
	for _, ho := range r.holds {
		if ho.done == nil || ho.client != client || ho.h.spec.Target == Own || !isClosed(ho.h.arrived) || isClosed(ho.h.release) {
			continue
		}
		if slices.Contains(keys, ho.h.key) {
			r.rec.event("%v released early: a command on %s would wait for its handoff", ho.h.spec, ho.h.key)
			r.open(ho)
		}
	}
}

func (r *runner) open(ho *heldOp) {
	if !isClosed(ho.h.release) {
		if isClosed(ho.h.arrived) {
			r.rec.event("release %v (paused on %s %s)", ho.h.spec, ho.h.shard, ho.h.key)
		}
		ho.h.open()
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// runHeld runs an operation with a hold on its own goroutine and waits
// until it has paused or returned.
func (r *runner) runHeld(s Step) {
	op := &r.p.Ops[s.Op]
	ci := s.Hold.ID % len(r.clients)
	if s.Client > 0 {
		ci = (s.Client - 1) % len(r.clients)
	}
	ho := &heldOp{h: newHold(s.Hold), done: make(chan struct{}), keys: opKeys(op), client: ci}
	r.unblock(ci, ho.keys)
	r.holds[s.Hold.ID] = ho
	c := r.clients[ci]
	client := r.p.Workers + s.Hold.ID - 1
	ctx := withHold(r.ctx, ho.h)
	r.wg.Go(func() {
		defer close(ho.done)
		r.exec(ctx, c, client, op)
	})
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ho.h.arrived:
			r.res.Paused++
			r.rec.event("%v paused op#%d %v on %s", s.Hold, op.N, op, ho.h.shard)
			if s.Hold.OnProgress > 0 {
				r.progress = append(r.progress, ho)
			}
			return
		case <-ho.done:
			ho.h.open()
			return
		case <-r.ctx.Done():
			return
		case <-t.C: // it waits for another hold (a change waits for the old ring): see wait
			r.releaseStalled()
		}
	}
}

// rebalanceRun is a Rebalance running in the background.
type rebalanceRun struct {
	done  chan struct{}
	hold  *heldOp   // its own pause, or nil
	taken []*heldOp // holds released from its Progress calls
	// Set before done is closed.
	complete bool
	err      error
}

func (r *runner) startRebalance(s Step) {
	r.awaitRebalance()
	ctx, cancel := context.WithCancel(r.ctx)
	run := &rebalanceRun{done: make(chan struct{}), taken: r.progress}
	r.progress = nil
	if s.Hold.ID > 0 {
		run.hold = &heldOp{h: newHold(s.Hold)}
		r.holds[s.Hold.ID] = run.hold
		ctx = withHold(ctx, run.hold.h)
	}
	calls := 0
	opt := redshard.RebalanceOptions{BatchSize: r.p.BatchSize, Progress: func(redshard.RebalanceProgress) {
		calls++
		if calls == s.CancelAfter {
			r.rec.event("Rebalance cancelled from Progress call %d", calls)
			cancel()
		}
		for _, ho := range run.taken {
			if ho.h.spec.OnProgress == calls {
				r.rec.event("release %v from Rebalance Progress call %d", ho.h.spec, calls)
				ho.h.open()
				select { // the command finishes in the middle of the run
				case <-ho.done:
				case <-r.ctx.Done():
				}
			}
		}
	}}
	r.res.Rebalance++
	what := "Rebalance"
	if s.CancelAfter > 0 {
		what += fmt.Sprintf(" (to be cancelled at Progress call %d)", s.CancelAfter)
		r.res.Cancelled++
	}
	if run.hold != nil {
		what += fmt.Sprintf(" with %v", s.Hold)
	}
	r.rec.event("%s starts", what)
	r.wg.Go(func() {
		defer close(run.done)
		defer cancel()
		rep, err := r.clients[0].Rebalance(ctx, opt)
		run.err = err
		run.complete = err == nil && rep.Verified && rep.Misplaced == 0 && rep.Failed == 0
		r.rec.event("Rebalance ends: moved %d, failed %d, misplaced %d, err %v", rep.Moved, rep.Failed, rep.Misplaced, err)
	})
	if run.hold != nil {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
	wait:
		for {
			select {
			case <-run.hold.h.arrived:
				r.res.Paused++
				r.rec.event("%v paused Rebalance on %s at %s", s.Hold, run.hold.h.shard, run.hold.h.key)
				break wait
			case <-run.done:
				break wait
			case <-r.ctx.Done():
				break wait
			case <-t.C: // its first move waits for the old ring's commands: see wait
				r.releaseStalled()
			}
		}
	}
	r.rb = run
}

// awaitRebalance releases the running Rebalance's hold and waits for it.
func (r *runner) awaitRebalance() {
	run := r.rb
	if run == nil {
		return
	}
	r.rb = nil
	if run.hold != nil {
		r.open(run.hold)
	}
	if !r.wait(run.done) {
		return
	}
	for _, ho := range run.taken { // their Progress call never came
		r.open(ho)
	}
	switch {
	case run.err != nil && !errors.Is(run.err, context.Canceled) && !r.p.Scenario.Faults:
		r.res.fail("error", "", "Rebalance: %v", run.err)
	case run.complete:
		// Every key has moved: the other clients finish the change too (a
		// Rebalance that finds nothing to move).
		r.finishOthers()
	}
}

// finishOthers has every client but the first finish the change with a
// Rebalance (one that finds nothing to move); each waits for its own
// commands of the old ring, held ones included, so the scheduler waits
// with wait.
func (r *runner) finishOthers() {
	for _, c := range r.clients[1:] {
		done := make(chan struct{})
		r.wg.Go(func() {
			defer close(done)
			if rep, err := c.Rebalance(r.ctx, redshard.RebalanceOptions{BatchSize: r.p.BatchSize}); err != nil || rep.Moved != 0 {
				r.rec.event("another client's Rebalance: moved %d, err %v", rep.Moved, err)
			}
		})
		r.wait(done)
	}
}

func (r *runner) serverDown(s Step) {
	var cand []int
	for i := range r.p.Servers {
		if !slices.Contains(r.down, i) && r.cfg.Servers[i].Down != nil {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return
	}
	i := cand[s.R%uint64(len(cand))]
	r.cfg.Servers[i].Down()
	r.down = append(r.down, i)
	r.rec.event("server %d (%s) down", i, r.cfg.Servers[i].Addr)
}

func (r *runner) serverUp() {
	if len(r.down) == 0 {
		return
	}
	i := r.down[0]
	r.down = r.down[1:]
	r.cfg.Servers[i].Up()
	r.rec.event("server %d (%s) up", i, r.cfg.Servers[i].Addr)
}

func (r *runner) change(s Step) {
	r.awaitRebalance()
	next, what, ok := r.resolve(s)
	if !ok {
		return
	}
	if len(r.clients) > 1 || r.p.Scenario.QuietChanges {
		r.quiesce()
	}
	for i, c := range r.clients {
		err := c.SetShards(r.ctx, next)
		switch {
		case err == nil:
		case errors.Is(err, redshard.ErrHandoffInProgress) && i == 0:
			r.res.Refused++
			r.rec.event("SetShards %s refused: handoff in progress", what)
			return
		default:
			r.res.fail("error", "", "SetShards %s on client %d: %v", what, i, err)
			return
		}
	}
	r.res.Changes++
	r.cur = next
	r.lists = append(r.lists, next)
	r.rec.event("SetShards %s -> %s", what, r.describeList(next))
}

// resolve applies a change to the current list.
func (r *runner) resolve(s Step) ([]redshard.Shard, string, bool) {
	cur := slices.Clone(r.cur)
	var free []int // servers on no shard of the list, and up
	for i := range r.p.Servers {
		if !slices.ContainsFunc(cur, func(sh redshard.Shard) bool { return sh.Addr == r.cfg.Servers[i].Addr }) && !slices.Contains(r.down, i) {
			free = append(free, i)
		}
	}
	n := uint64(len(cur))
	i := int(s.R % n)
	switch s.Change {
	case AddShard:
		if len(free) == 0 {
			return nil, "", false
		}
		srv := free[(s.R>>8)%uint64(len(free))]
		name := r.names[srv]
		if slices.ContainsFunc(cur, func(sh redshard.Shard) bool { return sh.Name == name }) {
			r.renames++
			name = fmt.Sprintf("%s-%d", name, r.renames)
		}
		cur = append(cur, redshard.Shard{Name: name, Addr: r.cfg.Servers[srv].Addr, Weight: 1})
		return cur, "add " + name, true
	case RemoveShard:
		if len(cur) <= 2 {
			return nil, "", false
		}
		name := cur[i].Name
		return slices.Delete(cur, i, i+1), "remove " + name, true
	case RenameShard:
		r.renames++
		old := cur[i].Name
		cur[i].Name = fmt.Sprintf("%s-%d", r.names[r.serverOf(cur[i].Addr)], r.renames)
		return cur, fmt.Sprintf("rename %s to %s (same address)", old, cur[i].Name), true
	case Readdress:
		if len(free) == 0 {
			return nil, "", false
		}
		srv := free[(s.R>>8)%uint64(len(free))]
		what := fmt.Sprintf("readdress %s from server %d to server %d", cur[i].Name, r.serverOf(cur[i].Addr), srv)
		cur[i].Addr = r.cfg.Servers[srv].Addr
		return cur, what, true
	case Reweight:
		weights := []float64{0.5, 1, 2, 3}
		w := weights[(s.R>>8)%4]
		if w == cur[i].Weight {
			w = weights[((s.R>>8)+1)%4]
		}
		what := fmt.Sprintf("reweight %s %g -> %g", cur[i].Name, cur[i].Weight, w)
		cur[i].Weight = w
		return cur, what, true
	case Rollback:
		var cand [][]redshard.Shard
		for _, l := range r.lists {
			if !slices.Equal(l, r.cur) {
				cand = append(cand, l)
			}
		}
		if len(cand) == 0 {
			return nil, "", false
		}
		l := cand[(s.R>>8)%uint64(len(cand))]
		for _, sh := range l { // a list naming a server that is down now is not chosen
			if slices.Contains(r.down, r.serverOf(sh.Addr)) {
				return nil, "", false
			}
		}
		return slices.Clone(l), "roll back", true
	}
	return nil, "", false
}

func (r *runner) serverOf(addr string) int {
	for i, s := range r.cfg.Servers {
		if s.Addr == addr {
			return i
		}
	}
	return -1
}

func (r *runner) describeList(l []redshard.Shard) string {
	s := "["
	for i, sh := range l {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s@%d", sh.Name, r.serverOf(sh.Addr))
		if sh.Weight != 1 {
			s += fmt.Sprintf("*%g", sh.Weight)
		}
	}
	return s + "]"
}

// finish releases everything, lets the last Rebalance complete, reads
// every key and checks where it lives.
func (r *runner) finish() {
	ids := make([]int, 0, len(r.holds))
	for id := range r.holds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r.open(r.holds[id])
	}
	r.progress = nil
	r.awaitRebalance()
	for _, wk := range r.workers {
		close(wk.jobs)
	}
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-r.ctx.Done():
		r.res.fail("stuck", "", "operations still running after every hold was released")
		return
	}
	for len(r.down) > 0 {
		r.serverUp()
	}
	r.rec.event("end of the scheduled steps")

	complete := false
	for attempt := 0; attempt < 3 && !complete; attempt++ {
		rep, err := r.clients[0].Rebalance(r.ctx, redshard.RebalanceOptions{BatchSize: r.p.BatchSize})
		complete = err == nil && rep.Verified && rep.Misplaced == 0 && rep.Failed == 0
		r.rec.event("final Rebalance: moved %d, failed %d, misplaced %d, err %v", rep.Moved, rep.Failed, rep.Misplaced, err)
	}
	if !complete {
		r.res.fail("rebalance", "", "the final Rebalance did not complete in 3 runs")
	}
	r.finishOthers() // they finish the change too
	// The final reads, through every client, after everything returned.
	for ci, c := range r.clients {
		for _, k := range r.p.Keys {
			call := r.rec.tick()
			cmd := c.Get(r.ctx, k)
			out := outcome(cmd)
			r.rec.add(len(r.workers)+r.p.Holds+ci, Input{Kind: Get, Key: k, Via: "final read", Op: -1}, out, call, r.rec.tick())
			if out.Unknown {
				r.res.fail("error", k, "final read: %s", out.Err)
			}
		}
	}
	r.placement()
}

// placement checks that every key lives once, on its owner.
func (r *runner) placement() {
	where := map[string][]int{}
	for i := range r.p.Servers {
		rc := redis.NewClient(&redis.Options{Addr: r.cfg.Servers[i].Addr, MaxRetries: -1, DisableIdentity: true})
		iter := rc.Scan(r.ctx, 0, "", 1000).Iterator()
		for iter.Next(r.ctx) {
			if k := iter.Val(); !isInternal(k) {
				where[k] = append(where[k], i)
			}
		}
		if err := iter.Err(); err != nil {
			r.res.fail("placement", "", "scanning server %d: %v", i, err)
		}
		_ = rc.Close()
	}
	keys := make([]string, 0, len(where))
	for k := range where {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name, _ := r.clients[0].ShardFor(k)
		owner := -1
		for _, sh := range r.cur {
			if sh.Name == name {
				owner = r.serverOf(sh.Addr)
			}
		}
		on := where[k]
		if len(on) != 1 || on[0] != owner {
			r.res.fail("placement", k, "on servers %v; its owner is %s on server %d", on, name, owner)
		}
	}
}

func isInternal(k string) bool { return len(k) >= 9 && k[:9] == "redshard:" }

func opKeys(op *Op) []string {
	keys := make([]string, 0, len(op.Cmds))
	for _, c := range op.Cmds {
		if !slices.Contains(keys, c.Key) {
			keys = append(keys, c.Key)
		}
	}
	return keys
}

func (res *Result) fail(kind, key, format string, args ...any) {
	res.hist.mu.Lock()
	defer res.hist.mu.Unlock()
	res.Failures = append(res.Failures, Failure{Kind: kind, Key: key, Msg: fmt.Sprintf(format, args...)})
}
