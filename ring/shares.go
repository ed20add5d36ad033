package ring

// Shares returns the fraction of the circle, and so of uniformly spread keys,
// that each node owns, by name. The fractions are exact (integer arc lengths
// divided by 2^32) and sum to 1 up to float64 rounding. A nil or zero Ring
// gives an empty map. It walks every point, allocates only the map and is
// safe for concurrent use.
func (r *Ring) Shares() map[string]float64 {
	out := make(map[string]float64, r.Len())
	if r.Len() == 0 {
		return out
	}
	arcs := r.arcs()
	for i, a := range arcs {
		out[r.nodes[i].Name] = float64(a) / (1 << 32)
	}
	return out
}

// arcs returns the number of positions each node owns; they sum to 2^32.
func (r *Ring) arcs() []uint64 {
	arcs := make([]uint64, len(r.nodes))
	c := r.cursor()
	first, firstOwner := c.pos(), c.owner()
	prev := first
	for c.next(); !c.done(); c.next() {
		p := c.pos()
		arcs[c.owner()] += uint64(p - prev)
		prev = p
	}
	// The first point owns (last, 2^32) and [0, first].
	arcs[firstOwner] += 1<<32 - uint64(prev-first)
	return arcs
}
