package modelcheck

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// recorder is the history: every command with its call and return on one
// logical clock (an atomic counter: a command that returned before another
// was called has a smaller return than that call), and the scheduler's
// events on the same clock.
type recorder struct {
	clock atomic.Int64

	mu     sync.Mutex // guards ops, events and Result.Failures
	ops    []porcupine.Operation
	events []event
}

type event struct {
	t    int64
	desc string
}

// meta is an operation's metadata: the real return of an ambiguous one.
type meta struct {
	ret int64
}

func (r *recorder) tick() int64 { return r.clock.Add(1) }

func (r *recorder) add(client int, in Input, out Output, call, ret int64) {
	m := meta{ret: ret}
	if out.Unknown && in.Kind.writes() {
		// It may take effect at any time after its call, or never.
		ret = math.MaxInt64
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret, Metadata: m})
	r.mu.Unlock()
}

func (r *recorder) event(format string, args ...any) {
	e := event{t: r.tick(), desc: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// byKey returns each key's operations, in call order.
func (r *recorder) byKey() map[string][]porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]porcupine.Operation{}
	for _, op := range r.ops {
		k := op.Input.(Input).Key
		out[k] = append(out[k], op)
	}
	for _, ops := range out {
		slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	}
	return out
}

// checkTimeout bounds porcupine on one key; a history it cannot decide in
// time is reported, not passed.
const checkTimeout = 20 * time.Second

// check runs the per-key checks on the recorded history.
func (r *runner) check() {
	res := r.res
	keys := r.rec.byKey()
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		ops := keys[k]
		for _, op := range ops {
			if op.Input.(Input).Op >= 0 {
				res.Commands++
				if op.Output.(Output).Unknown {
					res.Ambiguous++
				}
			}
		}
		switch porcupine.CheckOperationsTimeout(model, ops, checkTimeout) {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			res.fail("linearizability", k, "porcupine could not decide within %v", checkTimeout)
			continue
		}
		// Illegal: was it already so before the final reads?
		var during []porcupine.Operation
		for _, op := range ops {
			if op.Input.(Input).Op >= 0 {
				during = append(during, op)
			}
		}
		if porcupine.CheckOperationsTimeout(model, during, checkTimeout) == porcupine.Illegal {
			res.fail("linearizability", k, "the history of the key has no linearization (a read saw a value it could not have, or a write was lost)")
		} else {
			res.fail("final state", k, "the history is linearizable until the end, but the final reads (after Rebalance) are not: %s", finalHint(ops))
		}
	}
	for _, k := range names {
		r.determined(k, keys[k])
	}
}

// finalHint says what the final read found against the last write.
func finalHint(ops []porcupine.Operation) string {
	var last, final *porcupine.Operation
	for i := range ops {
		in := ops[i].Input.(Input)
		if in.Op < 0 && final == nil {
			final = &ops[i]
		} else if in.Op >= 0 && in.Kind.writes() {
			last = &ops[i]
		}
	}
	if final == nil || last == nil {
		return "no write to compare with"
	}
	return fmt.Sprintf("last write called %s, final read %s", describe(last.Input.(Input), last.Output.(Output)), describe(final.Input.(Input), final.Output.(Output)))
}

// determined checks the final reads against the final state where the
// history determines it: the last write, called after every other write
// returned, all outcomes known. It follows from linearizability; it is
// checked on its own so that a lost write or a deleted key that came back
// is named as such.
func (r *runner) determined(k string, ops []porcupine.Operation) {
	var writes []porcupine.Operation
	var finals []porcupine.Operation
	for _, op := range ops {
		in := op.Input.(Input)
		switch {
		case in.Op < 0:
			finals = append(finals, op)
		case in.Kind.writes():
			if op.Output.(Output).Unknown {
				return
			}
			writes = append(writes, op)
		}
	}
	if len(writes) == 0 || len(finals) == 0 {
		return
	}
	last := writes[len(writes)-1] // latest call
	for _, w := range writes[:len(writes)-1] {
		if w.Return >= last.Call {
			return // concurrent with the last one: either may be last
		}
	}
	in, out := last.Input.(Input), last.Output.(Output)
	var want string
	switch in.Kind {
	case Set:
		want = in.Arg
	case Del, GetDel, ExpirePast:
		want = ""
	case Incr:
		want = fmt.Sprint(out.N)
	default:
		return
	}
	for _, f := range finals {
		got := f.Output.(Output)
		if got.Unknown || matches(want, got) {
			continue
		}
		gotS := "absent"
		if !got.Nil {
			gotS = fmt.Sprintf("%q", got.Val)
		}
		kind := "acknowledged write lost"
		if want == "" {
			kind = "deleted key came back"
		}
		r.res.fail(kind, k, "the last write, %s (op#%d), was acknowledged, and the final read found %s", describe(in, out), in.Op, gotS)
	}
}

// FailedKeys returns the keys that some failure names, sorted.
func (res *Result) FailedKeys() []string {
	var keys []string
	for _, f := range res.Failures {
		if f.Key != "" && !slices.Contains(keys, f.Key) {
			keys = append(keys, f.Key)
		}
	}
	slices.Sort(keys)
	return keys
}

// History renders one key's history, with the scheduler's events, in
// clock order: the short readable account a failure prints.
func (res *Result) History(key string, maxLines int) string {
	ops := res.hist.byKey()[key]
	res.hist.mu.Lock()
	events := slices.Clone(res.hist.events)
	res.hist.mu.Unlock()
	type line struct {
		t    int64
		text string
	}
	var lines []line
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		ret := op.Metadata.(meta).ret
		who := fmt.Sprintf("c%d", op.ClientId)
		if op.ClientId >= res.Plan.Workers && in.Op >= 0 {
			who = "held"
		}
		opn := ""
		if in.Op >= 0 {
			opn = fmt.Sprintf(" op#%d", in.Op)
		}
		lines = append(lines, line{op.Call, fmt.Sprintf("%5d..%-5d %-4s %s%s", op.Call, ret, who, describe(in, out), opn)})
	}
	if len(ops) == 0 {
		return "(no command on " + key + ")"
	}
	last := ops[len(ops)-1].Call
	for _, e := range events { // from the start: a change before the key's first command matters
		if e.t <= last {
			lines = append(lines, line{e.t, fmt.Sprintf("%5d        ** %s", e.t, e.desc)})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.t, b.t) })
	// Show the lines around the first command no linearization reaches,
	// or else the last ones.
	end := len(lines)
	if t, ok := stuckAt(ops); ok {
		for i, l := range lines {
			if l.t > t {
				end = min(len(lines), i+maxLines/4)
				break
			}
		}
	}
	start := max(0, end-maxLines)
	var b strings.Builder
	if start > 0 {
		fmt.Fprintf(&b, "  (%d earlier lines left out)\n", start)
	}
	for _, l := range lines[start:end] {
		mark := "  "
		if t, ok := stuckAt(ops); ok && l.t == t {
			mark = "=>"
		}
		b.WriteString(mark + l.text + "\n")
	}
	if end < len(lines) {
		fmt.Fprintf(&b, "  (%d later lines left out)\n", len(lines)-end)
	}
	return b.String()
}

// stuckAt returns the call time of the first command (by call) that the
// longest partial linearization porcupine found does not contain: where
// the history stops making sense. "=>" marks it in History.
func stuckAt(ops []porcupine.Operation) (int64, bool) {
	res, info := porcupine.CheckOperationsVerbose(model, ops, checkTimeout)
	if res != porcupine.Illegal {
		return 0, false
	}
	in := map[int64]int{} // calls of linearized operations (calls may repeat: a count)
	longest := 0
	var best []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > longest {
				longest, best = len(lin), lin
			}
		}
	}
	for _, op := range best {
		in[op.Call]++
	}
	for _, op := range ops { // in call order
		if in[op.Call] > 0 {
			in[op.Call]--
			continue
		}
		return op.Call, true
	}
	return 0, false
}

// Events renders the scheduler's events.
func (res *Result) Events() string {
	res.hist.mu.Lock()
	defer res.hist.mu.Unlock()
	var b strings.Builder
	for _, e := range res.hist.events {
		fmt.Fprintf(&b, "  %5d ** %s\n", e.t, e.desc)
	}
	return b.String()
}

// Visualize writes porcupine's visualization of one key's history to a
// new file in dir and returns its path.
func (res *Result) Visualize(dir, key string) (string, error) {
	ops := res.hist.byKey()[key]
	_, info := porcupine.CheckOperationsVerbose(model, ops, checkTimeout)
	res.hist.mu.Lock()
	var notes []porcupine.Annotation
	if len(ops) > 0 {
		for _, e := range res.hist.events {
			if e.t >= ops[0].Call && e.t <= ops[len(ops)-1].Call {
				notes = append(notes, porcupine.Annotation{Tag: "scheduler", Start: e.t, Description: e.desc})
			}
		}
	}
	res.hist.mu.Unlock()
	info.AddAnnotations(notes)
	f, err := os.CreateTemp(dir, fmt.Sprintf("redshard-model-%s-seed%d-%s-*.html", res.Plan.Scenario.Name, res.Plan.Seed, sanitize(key)))
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := porcupine.Visualize(model, info, f); err != nil {
		return "", err
	}
	return f.Name(), nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '{' || r == '}' || r == '/' {
			return '_'
		}
		return r
	}, s)
}

// Summary is one line of counts.
func (res *Result) Summary() string {
	return fmt.Sprintf("%d ops, %d commands checked (%d ambiguous), %d changes (%d refused), %d rebalances (%d cancelled), %d paused",
		len(res.Plan.Ops), res.Commands, res.Ambiguous, res.Changes, res.Refused, res.Rebalance, res.Cancelled, res.Paused)
}
