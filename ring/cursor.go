package ring

// cursor walks a ring's points in circle order, decoding positions.
type cursor struct {
	r *Ring
	i uint32 // point index
	b uint32 // bucket of point i
}

func (r *Ring) cursor() cursor {
	c := cursor{r: r}
	c.seek()
	return c
}

func (c *cursor) done() bool { return int(c.i) >= len(c.r.points) }

func (c *cursor) next() {
	c.i++
	c.seek()
}

// seek moves b to the bucket holding point i.
func (c *cursor) seek() {
	if c.done() {
		return
	}
	for c.r.idx.start(c.b+1) <= c.i {
		c.b++
	}
}

func (c *cursor) pos() uint32 {
	return c.b<<c.r.shift | c.r.points[c.i]>>c.r.ownerBits
}

func (c *cursor) owner() int { return int(c.r.points[c.i] & c.r.ownerMask) }
