package modelcheck

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Change is a kind of membership change a scenario may make.
type Change uint8

const (
	AddShard    Change = iota // a spare server joins under a new name
	RemoveShard               // a shard leaves (at least two stay)
	RenameShard               // a shard gets a new name, same address
	Readdress                 // a shard keeps its name and moves to a spare server
	Reweight                  // a shard's weight changes
	Rollback                  // back to a list accepted before
)

func (c Change) String() string {
	return [...]string{"add", "remove", "rename", "readdress", "reweight", "rollback"}[c]
}

// Scenario chooses what a history may contain besides client commands.
type Scenario struct {
	Name string
	// Known, when set, says why the scenario fails on the current code
	// ("known failure: <what> — seed N"): the tests skip it unless told
	// to run everything (-model.all).
	Known string
	// Guards names the failure the scenario was written to catch (found
	// in an earlier version of the membership protocol, since fixed).
	Guards  string
	Changes []Change // membership changes drawn from; none: no SetShards
	// Rebalance runs Rebalance (to completion, in the background while
	// commands run); CancelRebalance also cancels some runs from their
	// Progress callback (a later run resumes).
	Rebalance, CancelRebalance bool
	// QuietRebalance runs each Rebalance with no worker command running
	// and waits for it: handoffs still run under traffic, moves do not.
	QuietRebalance bool
	// QuietChanges gives SetShards with no worker command running (held
	// commands excepted); with two clients changes are always quiet.
	QuietChanges bool
	// Holds pauses some client commands before they reach a shard, after
	// the shard answered, or inside their handoff, and releases them at a
	// later step or from a Rebalance's Progress callback.
	Holds bool
	// HoldRebalance pauses some Rebalance runs between DUMP and RESTORE or
	// between RESTORE and the delete on the old shard.
	HoldRebalance bool
	// Faults makes servers unreachable for a few steps (data kept).
	Faults bool
	// Clients is the number of redshard clients sharing the servers (1 or
	// 2); every change is given to all of them while no worker command
	// runs (held commands stay in flight).
	Clients int
}

// Point is where a held command pauses.
type Point uint8

const (
	Before Point = iota // before the command is sent to the shard
	After               // after the shard answered, before the caller sees it
)

// Target is which shard command a hold pauses.
type Target uint8

const (
	Own       Target = iota // the caller's own command (or its per-shard part)
	Restore                 // the RESTORE of a move (handoff or Rebalance): after DUMP
	CasDelete               // the delete on the old shard: after RESTORE
)

func (t Target) String() string { return [...]string{"own", "restore", "cas-delete"}[t] }

// HoldSpec is one pause.
type HoldSpec struct {
	ID     int
	Point  Point
	Target Target
	// OnProgress > 0 releases the hold from the OnProgress'th Progress
	// call of the next Rebalance (or when that run ends), instead of at a
	// release step.
	OnProgress int
}

func (h HoldSpec) String() string {
	p := "before"
	if h.Point == After {
		p = "after"
	}
	s := fmt.Sprintf("hold#%d %s %s", h.ID, p, h.Target)
	if h.OnProgress > 0 {
		s += fmt.Sprintf(" (released at Progress call %d)", h.OnProgress)
	}
	return s
}

// Shape is how an operation's commands are sent.
type Shape uint8

const (
	Single   Shape = iota // one command
	MSet                  // MSET over keys of several shards
	MGet                  // MGET over keys of several shards
	Pipeline              // a pipeline of single-key commands
	Tx                    // a TxPipeline on the hash-tagged keys
)

func (s Shape) String() string { return [...]string{"", "MSET", "MGET", "pipeline", "tx"}[s] }

// Cmd is one single-key command of an operation.
type Cmd struct {
	Kind Kind
	Key  string
	Arg  string
}

// Op is one operation of a worker.
type Op struct {
	N     int
	Shape Shape
	Cmds  []Cmd
}

func (o Op) String() string {
	var parts []string
	for _, c := range o.Cmds {
		s := c.Kind.String() + " " + c.Key
		if c.Arg != "" {
			s += " " + c.Arg
		}
		parts = append(parts, s)
	}
	if o.Shape == Single {
		return parts[0]
	}
	return o.Shape.String() + "[" + strings.Join(parts, "; ") + "]"
}

// StepKind is what one scheduler step does.
type StepKind uint8

const (
	StepOp             StepKind = iota // hand Op to Worker (waits until the worker is free)
	StepHeld                           // run Op on its own goroutine with Hold; wait until it pauses or ends
	StepRelease                        // release hold Hold.ID
	StepChange                         // SetShards with Change (resolved against the current list with R)
	StepRebalance                      // start Rebalance in the background (waits for the previous run)
	StepDown                           // make server R%n unreachable
	StepUp                             // bring server Server back
	StepQuiesce                        // wait until no worker runs a command (scripts only)
	StepAwaitRebalance                 // wait for the Rebalance in the background to end (scripts only)
)

// Step is one step of the scheduler.
type Step struct {
	Kind   StepKind
	Worker int
	Op     int
	Hold   HoldSpec
	Change Change
	R      uint64 // random choices made when the step runs
	Server int
	// Client is, for StepHeld, 1 + the index of the client that runs the
	// operation; 0 picks it by hold ID.
	Client int
	// Rebalance: CancelAfter > 0 cancels the run from that Progress call;
	// Hold, when Hold.ID > 0, pauses one of its moves.
	CancelAfter int
}

// Plan is everything a seed decides.
type Plan struct {
	Seed      uint64
	Scenario  Scenario
	Workers   int
	Keys      []string // plain keys, then the hash-tagged group
	Tagged    []string // the hash-tagged group, used by transactions
	Shards    int      // servers on the ring at the start; the rest are spares
	Servers   int
	BatchSize int
	Ops       []Op
	Steps     []Step
	Holds     int // hold IDs are 1..Holds
}

// NewPlan draws a plan of about ops operations from seed.
func NewPlan(seed uint64, ops int, sc Scenario) *Plan {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	p := &Plan{Seed: seed, Scenario: sc, Workers: 3 + rng.IntN(4), Shards: 3 + rng.IntN(3), BatchSize: 2 + rng.IntN(4)}
	p.Servers = p.Shards + 2
	for i, n := 0, 10+rng.IntN(17); i < n; i++ {
		p.Keys = append(p.Keys, fmt.Sprintf("k%02d", i))
	}
	for _, s := range []string{"a", "b", "c"} {
		p.Tagged = append(p.Tagged, "{g}"+s)
	}
	p.Keys = append(p.Keys, p.Tagged...)

	g := &planner{p: p, rng: rng, release: map[int][]Step{}}
	for len(p.Ops) < ops {
		g.dueReleases()
		r := rng.Float64()
		switch {
		case r < 0.035 && len(sc.Changes) > 0:
			if sc.Holds && rng.IntN(2) == 0 { // a command in flight across the change
				g.held(HoldSpec{Point: Point(rng.IntN(2)), Target: Own}, 2+rng.IntN(3))
			}
			g.emit(Step{Kind: StepChange, Change: sc.Changes[rng.IntN(len(sc.Changes))], R: rng.Uint64()})
			if sc.Rebalance && rng.IntN(3) > 0 {
				g.rebalance()
			}
		case r < 0.06 && sc.Rebalance:
			g.rebalance()
		case r < 0.07 && sc.Faults:
			g.emit(Step{Kind: StepDown, R: rng.Uint64()})
			g.at(2+rng.IntN(10), Step{Kind: StepUp}) // Server is filled in when Down runs
		case sc.Holds && r < 0.17:
			h := HoldSpec{Point: Point(rng.IntN(2)), Target: Target(rng.IntN(3))}
			if h.Target != Own {
				h.Point = Before
			}
			if sc.Rebalance && rng.IntN(4) == 0 {
				h.OnProgress = 1 + rng.IntN(3)
				g.held(h, 0)
			} else {
				g.held(h, 1+rng.IntN(10))
			}
		default:
			g.emit(Step{Kind: StepOp, Worker: rng.IntN(p.Workers), Op: g.op()})
		}
	}
	g.flush(math.MaxInt) // what is still pending runs at the end, in order
	return p
}

type planner struct {
	p       *Plan
	rng     *rand.Rand
	release map[int][]Step // steps due at a later step index
	value   int
}

func (g *planner) emit(s Step) { g.p.Steps = append(g.p.Steps, s) }

// at schedules s d steps from now.
func (g *planner) at(d int, s Step) {
	i := len(g.p.Steps) + d
	g.release[i] = append(g.release[i], s)
}

func (g *planner) dueReleases() { g.flush(len(g.p.Steps)) }

// flush emits the pending steps due at or before step index until, in order.
func (g *planner) flush(until int) {
	due := make([]int, 0, len(g.release))
	for i := range g.release {
		if i <= until {
			due = append(due, i)
		}
	}
	slices.Sort(due)
	for _, i := range due {
		for _, s := range g.release[i] {
			g.emit(s)
		}
		delete(g.release, i)
	}
}

func (g *planner) held(h HoldSpec, releaseAfter int) {
	g.p.Holds++
	h.ID = g.p.Holds
	g.emit(Step{Kind: StepHeld, Op: g.op(), Hold: h})
	if releaseAfter > 0 {
		g.at(releaseAfter, Step{Kind: StepRelease, Hold: h})
	}
}

func (g *planner) rebalance() {
	s := Step{Kind: StepRebalance}
	if g.p.Scenario.CancelRebalance && g.rng.IntN(5) < 2 {
		s.CancelAfter = 1 + g.rng.IntN(3)
	}
	if g.p.Scenario.HoldRebalance && g.rng.IntN(5) < 2 {
		g.p.Holds++
		s.Hold = HoldSpec{ID: g.p.Holds, Point: Before, Target: Restore + Target(g.rng.IntN(2))}
		g.emit(s)
		g.at(1+g.rng.IntN(8), Step{Kind: StepRelease, Hold: s.Hold})
		return
	}
	g.emit(s)
}

// nextValue returns a value nobody wrote before: an integer, so that INCR
// always applies; APPEND appends digits.
func (g *planner) nextValue() string {
	g.value++
	return strconv.Itoa(1000 + g.value)
}

func (g *planner) key() string { return g.p.Keys[g.rng.IntN(len(g.p.Keys))] }

// distinct returns n different keys.
func (g *planner) distinct(n int, from []string) []string {
	perm := g.rng.Perm(len(from))
	out := make([]string, 0, n)
	for _, i := range perm[:n] {
		out = append(out, from[i])
	}
	return out
}

func (g *planner) cmd(key string) Cmd {
	r := g.rng.IntN(100)
	switch {
	case r < 30:
		return Cmd{Kind: Set, Key: key, Arg: g.nextValue()}
	case r < 60:
		return Cmd{Kind: Get, Key: key}
	case r < 68:
		return Cmd{Kind: Del, Key: key}
	case r < 78:
		return Cmd{Kind: Incr, Key: key}
	case r < 84:
		return Cmd{Kind: Append, Key: key, Arg: strconv.Itoa(g.rng.IntN(10))}
	case r < 92:
		return Cmd{Kind: GetDel, Key: key}
	default:
		return Cmd{Kind: ExpirePast, Key: key}
	}
}

// op draws an operation and returns its number.
func (g *planner) op() int {
	o := Op{N: len(g.p.Ops)}
	r := g.rng.IntN(100)
	switch {
	case r < 70:
		o.Cmds = []Cmd{g.cmd(g.key())}
	case r < 78:
		o.Shape = MSet
		for _, k := range g.distinct(2+g.rng.IntN(3), g.p.Keys) {
			o.Cmds = append(o.Cmds, Cmd{Kind: Set, Key: k, Arg: g.nextValue()})
		}
	case r < 86:
		o.Shape = MGet
		for _, k := range g.distinct(2+g.rng.IntN(3), g.p.Keys) {
			o.Cmds = append(o.Cmds, Cmd{Kind: Get, Key: k})
		}
	case r < 94:
		o.Shape = Pipeline
		for i, n := 0, 2+g.rng.IntN(3); i < n; i++ {
			o.Cmds = append(o.Cmds, g.cmd(g.key()))
		}
	default:
		o.Shape = Tx
		for i, n := 0, 2+g.rng.IntN(2); i < n; i++ {
			o.Cmds = append(o.Cmds, g.cmd(g.p.Tagged[g.rng.IntN(len(g.p.Tagged))]))
		}
	}
	g.p.Ops = append(g.p.Ops, o)
	return o.N
}
