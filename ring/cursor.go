package ring

// cursor walks a ring's points in circle order, decoding positions.
type cursor struct {
	r *Ring
	b uint32 // bucket of the point; buckets() when done
	j uint32 // the point is the j-th of bucket b
}

func (r *Ring) cursor() cursor {
	c := cursor{r: r}
	c.skipEmpty()
	return c
}

// skipEmpty moves b to the first non-empty bucket from b on.
func (c *cursor) skipEmpty() {
	nb := c.r.buckets()
	for c.b < nb && c.r.size(c.b) == 0 {
		c.b++
	}
}

func (c *cursor) done() bool { return c.b >= c.r.buckets() }

func (c *cursor) next() {
	if c.j++; c.j < c.r.size(c.b) {
		return
	}
	c.b++
	c.j = 0
	c.skipEmpty()
}

func (c *cursor) entry() uint32 { return c.r.entry(c.b, c.j) }

func (c *cursor) pos() uint32 {
	return c.b<<c.r.shift | c.entry()>>c.r.ownerBits
}

func (c *cursor) owner() int { return int(c.entry() & c.r.ownerMask) }

// seek returns a cursor at the first point at or after pos, wrapping.
func (r *Ring) seek(pos uint32) cursor {
	c := cursor{r: r, b: pos >> r.shift}
	t := (pos & r.offMask) << r.ownerBits
	for n := r.size(c.b); c.j < n; c.j++ {
		if c.entry() >= t {
			return c
		}
	}
	c.b++
	c.j = 0
	c.skipEmpty()
	if c.done() {
		return r.cursor()
	}
	return c
}
