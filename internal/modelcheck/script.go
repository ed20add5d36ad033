package modelcheck

import "fmt"

// Script builds a plan step by step instead of from a seed: the minimal
// scenarios of known failures, each a few operations long. Every
// operation's values must be fresh (the model tells writes apart by their
// values); Set and Append below take them as given.
type Script struct{ p *Plan }

// NewScript starts a plan on shards servers (plus spares up to servers)
// with workers workers over keys. Keys beginning "{g}" form the hash-tagged
// group.
func NewScript(name string, sc Scenario, shards, servers, workers int, keys ...string) *Script {
	sc.Name = name
	p := &Plan{Scenario: sc, Workers: workers, Shards: shards, Servers: servers, BatchSize: 100, Keys: keys}
	for _, k := range keys {
		if len(k) > 3 && k[:3] == "{g}" {
			p.Tagged = append(p.Tagged, k)
		}
	}
	return &Script{p: p}
}

func (s *Script) op(shape Shape, cmds []Cmd) int {
	n := len(s.p.Ops)
	s.p.Ops = append(s.p.Ops, Op{N: n, Shape: shape, Cmds: cmds})
	return n
}

// Op has worker run one operation.
func (s *Script) Op(worker int, shape Shape, cmds ...Cmd) *Script {
	s.p.Steps = append(s.p.Steps, Step{Kind: StepOp, Worker: worker, Op: s.op(shape, cmds)})
	return s
}

// Each runs one single-command operation per key on worker, each built by
// cmd.
func (s *Script) Each(worker int, cmd func(i int, key string) Cmd) *Script {
	for i, k := range s.p.Keys {
		s.Op(worker, Single, cmd(i, k))
	}
	return s
}

// Held runs an operation paused at point/target; it returns the hold's ID.
func (s *Script) Held(point Point, target Target, shape Shape, cmds ...Cmd) int {
	s.p.Holds++
	h := HoldSpec{ID: s.p.Holds, Point: point, Target: target}
	s.p.Steps = append(s.p.Steps, Step{Kind: StepHeld, Op: s.op(shape, cmds), Hold: h})
	return h.ID
}

// HeldOn is Held on the given client (an index into the clients).
func (s *Script) HeldOn(client int, point Point, target Target, shape Shape, cmds ...Cmd) int {
	id := s.Held(point, target, shape, cmds...)
	s.p.Steps[len(s.p.Steps)-1].Client = client + 1
	return id
}

// Release releases hold id.
func (s *Script) Release(id int) *Script {
	s.p.Steps = append(s.p.Steps, Step{Kind: StepRelease, Hold: HoldSpec{ID: id}})
	return s
}

// Change runs SetShards with c; r picks the shard (r modulo the shards on
// the list) and the spare server (r>>8 modulo the spares).
func (s *Script) Change(c Change, r uint64) *Script {
	s.p.Steps = append(s.p.Steps, Step{Kind: StepChange, Change: c, R: r})
	return s
}

// Rebalance starts a Rebalance; with a target other than Own it pauses its
// first move there, and the pause gets the returned hold ID (else 0).
func (s *Script) Rebalance(target Target) int {
	st := Step{Kind: StepRebalance}
	if target != Own {
		s.p.Holds++
		st.Hold = HoldSpec{ID: s.p.Holds, Point: Before, Target: target}
	}
	s.p.Steps = append(s.p.Steps, st)
	return st.Hold.ID
}

// Down makes server r (modulo the servers not down) unreachable; Up brings
// back the oldest one down.
func (s *Script) Down(r uint64) *Script {
	s.p.Steps = append(s.p.Steps, Step{Kind: StepDown, R: r})
	return s
}

// Up brings back the server that went down first.
func (s *Script) Up() *Script {
	s.p.Steps = append(s.p.Steps, Step{Kind: StepUp})
	return s
}

// Quiesce waits until the workers' commands so far, and the held
// operations released so far, have returned.
func (s *Script) Quiesce() *Script {
	s.p.Steps = append(s.p.Steps, Step{Kind: StepQuiesce})
	return s
}

// AwaitRebalance waits for the Rebalance started last to end.
func (s *Script) AwaitRebalance() *Script {
	s.p.Steps = append(s.p.Steps, Step{Kind: StepAwaitRebalance})
	return s
}

// Plan returns the plan built so far.
func (s *Script) Plan() *Plan { return s.p }

// Keys returns n keys k00, k01, ...
func Keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%02d", i)
	}
	return out
}
