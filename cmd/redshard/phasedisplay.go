package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/redshard/redshard"
	rsfleet "github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/registry"
)

// phaseDisplay draws fleet.Apply's progress: for the phase being
// acknowledged, how many live processes are on which version, which are
// late, and how long apply has waited; while the data moves, rebalance's
// progress bar. On a terminal (live) it redraws one line in place; in a
// log it prints a line whenever what it says changes, and every
// logEvery while nothing does. A nil *phaseDisplay draws nothing. It is
// safe for concurrent use.
type phaseDisplay struct {
	w    io.Writer
	live bool
	now  func() time.Time // time.Now when nil

	mu       sync.Mutex // guards the fields below
	cur      registry.Version
	started  bool         // cur is set
	onScreen int          // width of the live line drawn, 0 if none
	said     string       // the last state printed (without the time waited)
	saidAt   time.Time    // when it was printed
	drawnAt  time.Time    // when the live line was last redrawn
	bar      *progressBar // while the data moves
}

// How often the display redraws: a live line at most every liveEvery, a
// log line at least every logEvery while a phase is waited for.
const (
	liveEvery  = 100 * time.Millisecond
	logEvery   = 5 * time.Second
	maxLateIDs = 5
)

// newPhaseDisplay draws on w, live when w is a terminal.
func newPhaseDisplay(w io.Writer) *phaseDisplay {
	return &phaseDisplay{w: w, live: isTerminal(w)}
}

// isTerminal reports whether w is (a lockedWriter around) a terminal.
func isTerminal(w io.Writer) bool {
	if lw, ok := w.(*lockedWriter); ok {
		w = lw.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (d *phaseDisplay) clock() time.Time {
	if d.now != nil {
		return d.now()
	}
	return time.Now()
}

// progress is fleet.ApplyOptions.Progress.
func (d *phaseDisplay) progress(p rsfleet.ApplyProgress) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.Rebalancing {
		d.endLine()
		fmt.Fprintf(d.w, "%s: every process is on it; moving the keys (Rebalance):\n", p.Config.Version())
		d.bar = &progressBar{w: d.w, now: d.now, start: d.clock()}
		return
	}
	if !d.started || p.Config.Version() != d.cur {
		d.finishBar(true)
		d.endLine()
		d.cur, d.started, d.said = p.Config.Version(), true, ""
	}
	state := phaseState(p)
	text := fmt.Sprintf("%s, waited %s", state, age(p.Waited))
	now := d.clock()
	if d.live {
		if state == d.said && now.Sub(d.drawnAt) < liveEvery {
			return
		}
		pad := max(d.onScreen-len(text), 0)
		fmt.Fprintf(d.w, "\r%s%s", text, strings.Repeat(" ", pad))
		d.onScreen, d.said, d.drawnAt = len(text), state, now
		return
	}
	if state != d.said || now.Sub(d.saidAt) >= logEvery {
		fmt.Fprintln(d.w, text)
		d.said, d.saidAt = state, now
	}
}

// rebalance is the data migration's RebalanceOptions.Progress.
func (d *phaseDisplay) rebalance(p redshard.RebalanceProgress) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bar == nil { // Rebalance reported before Apply said it started
		d.endLine()
		d.bar = &progressBar{w: d.w, now: d.now, start: d.clock()}
	}
	d.bar.update(p)
}

// end finishes what is on screen; complete says apply succeeded.
func (d *phaseDisplay) end(complete bool) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.finishBar(complete)
	d.endLine()
}

// endLine ends the live line, if one is drawn. The caller holds mu.
func (d *phaseDisplay) endLine() {
	if d.onScreen > 0 {
		fmt.Fprintln(d.w)
		d.onScreen = 0
	}
}

// finishBar ends the progress bar, if one runs. The caller holds mu.
func (d *phaseDisplay) finishBar(complete bool) {
	if d.bar != nil {
		d.bar.finish(complete)
		d.bar = nil
	}
}

// phaseState describes where the fleet is on p's phase: "epoch 2 prepare:
// 3 live, 2 on it, 1 on epoch 1 stable; late: web-3".
func phaseState(p rsfleet.ApplyProgress) string {
	v := p.Config.Version()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", v)
	if len(p.Members) == 0 {
		b.WriteString("no live process")
		return b.String()
	}
	count := map[registry.Version]int{}
	for _, m := range p.Members {
		count[m.Version()]++
	}
	versions := make([]registry.Version, 0, len(count))
	for w := range count {
		versions = append(versions, w)
	}
	// The version being acknowledged (and any ahead of it) first, then the
	// late ones, newest first.
	slices.SortFunc(versions, func(a, b registry.Version) int {
		switch {
		case a == b:
			return 0
		case b.Less(a):
			return -1
		}
		return 1
	})
	fmt.Fprintf(&b, "%d live", len(p.Members))
	for _, w := range versions {
		switch w {
		case v:
			fmt.Fprintf(&b, ", %d on it", count[w])
		case registry.Version{}: // joined, has read nothing yet
			fmt.Fprintf(&b, ", %d joining", count[w])
		default:
			fmt.Fprintf(&b, ", %d on %s", count[w], w)
		}
	}
	if len(p.Late) == 0 {
		b.WriteString("; all acknowledged")
		return b.String()
	}
	late := slices.Clone(p.Late)
	slices.SortFunc(late, func(a, b registry.Member) int { return cmp.Compare(a.ID, b.ID) })
	ids := make([]string, 0, maxLateIDs)
	for i, m := range late {
		if i == maxLateIDs {
			ids = append(ids, fmt.Sprintf("+%d more", len(late)-maxLateIDs))
			break
		}
		ids = append(ids, m.ID)
	}
	fmt.Fprintf(&b, "; late: %s", strings.Join(ids, ", "))
	return b.String()
}
