package ring

// Move is an arc of the circle whose owner differs between two rings, as
// returned by Diff: every key whose Position lies in the arc is owned by From
// in the old ring and by To in the new one.
//
// The arc is half-open on the left, (Start, End]: the positions Start+1,
// Start+2, ..., End, counting modulo 2^32. So when End < Start the arc wraps
// past 2^32-1 to 0, and when Start == End it is the whole circle (Fraction
// 1). Diff never returns an empty arc; the zero Move, with Fraction 0,
// contains nothing.
type Move struct {
	Start, End uint32
	From, To   string  // "" stands for an empty (nil or zero) ring
	Fraction   float64 // the arc's length divided by 2^32
}

// Contains reports whether position pos lies in the arc (Start, End].
func (m Move) Contains(pos uint32) bool {
	if m.Start == m.End {
		return m.Fraction > 0 // the whole circle, or the zero Move
	}
	// Shift so that the arc starts at 0: it is then (0, End-Start].
	d := pos - m.Start
	return d != 0 && d <= m.End-m.Start
}

// Diff returns the arcs of the circle whose owner in from differs from their
// owner in to, in circle order (ascending End, the first one possibly
// wrapping), with adjacent arcs of the same From and To coalesced. Two rings
// with the same nodes and Config give nil; so do two nil or zero Rings, and
// a nil or zero Ring on one side owns nothing (its name is ""). Owners are
// compared by name, so the rings may have different nodes; they should use
// the same Hash. Diff walks both rings' points once, only reads the rings,
// and is safe for concurrent use.
func Diff(from, to *Ring) []Move {
	if from.Len() == 0 && to.Len() == 0 {
		return nil
	}
	a, b := side{r: from}, side{r: to}
	a.init()
	b.init()
	// The arc ending at the first position starts at the last one.
	prev := max(a.last, b.last)
	if a.empty() {
		prev = b.last
	} else if b.empty() {
		prev = a.last
	}

	var moves []Move
	var widths []uint64 // of moves, in positions
	open := false       // the previous arc was a move that may grow
	for !a.done() || !b.done() {
		u := min(a.pos(), b.pos())
		w := uint64(u - prev)
		if w == 0 {
			w = 1 << 32 // a single distinct position: the whole circle
		}
		fromName, toName := from.name(a.owner()), to.name(b.owner())
		switch {
		case fromName == toName:
			open = false
		case open && moves[len(moves)-1].From == fromName && moves[len(moves)-1].To == toName:
			moves[len(moves)-1].End = u
			widths[len(widths)-1] += w
		default:
			moves = append(moves, Move{Start: prev, End: u, From: fromName, To: toName})
			widths = append(widths, w)
			open = true
		}
		a.skip(u)
		b.skip(u)
		prev = u
	}
	// Join the last arc to the first across the wrap point.
	if n := len(moves) - 1; n > 0 && open && moves[n].End == moves[0].Start &&
		moves[n].From == moves[0].From && moves[n].To == moves[0].To {
		moves[0].Start = moves[n].Start
		widths[0] += widths[n]
		moves, widths = moves[:n], widths[:n]
	}
	for i, w := range widths {
		moves[i].Fraction = float64(w) / (1 << 32)
	}
	return moves
}

// side is one ring of a Diff: a cursor that also knows the wrap owner.
type side struct {
	r     *Ring
	c     cursor
	first int    // owner of the first point, which owns the wrap arc
	last  uint32 // position of the last point
}

func (s *side) init() {
	if s.empty() {
		s.first = -1
		return
	}
	s.c = s.r.cursor()
	s.first = s.c.owner()
	b := s.r.buckets() - 1
	for s.r.size(b) == 0 {
		b--
	}
	s.last = b<<s.r.shift | s.r.entry(b, s.r.size(b)-1)>>s.r.ownerBits
}

func (s *side) empty() bool { return s.r.Len() == 0 }
func (s *side) done() bool  { return s.empty() || s.c.done() }

// pos is the next point's position; past the end it is 2^32-1, which
// min ignores unless both sides are there.
func (s *side) pos() uint32 {
	if s.done() {
		return 1<<32 - 1
	}
	return s.c.pos()
}

// owner is the owner of the arc ending at the next distinct position.
func (s *side) owner() int {
	if s.done() {
		return s.first
	}
	return s.c.owner()
}

// skip moves past every point at or before u.
func (s *side) skip(u uint32) {
	for !s.done() && s.c.pos() <= u {
		s.c.next()
	}
}

// Summarize adds up moves by (From, To): the key is [2]string{From, To} and
// the value the fraction of the circle, and so of uniformly spread keys,
// that passes from From to To. A nil slice gives an empty map.
func Summarize(moves []Move) map[[2]string]float64 {
	out := make(map[[2]string]float64)
	for _, m := range moves {
		out[[2]string{m.From, m.To}] += m.Fraction
	}
	return out
}
