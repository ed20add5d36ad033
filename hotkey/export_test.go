package hotkey

import "fmt"

// Tracked returns the number of keys the detector currently tracks.
func (d *Detector) Tracked() int {
	n := 0
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		n += len(s.sum.slots)
		s.mu.Unlock()
	}
	return n
}

// Shards returns the number of lock stripes.
func (d *Detector) Shards() int { return len(d.shards) }

// Effective returns the configuration after defaults.
func (d *Detector) Effective() Config { return d.cfg }

// CheckInvariants verifies every shard's summary structure.
func (d *Detector) CheckInvariants() error {
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		err := s.sum.check()
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}

func (s *summary) check() error {
	if len(s.slots) != len(s.heap) || len(s.slots) > cap(s.slots) {
		return fmt.Errorf("%d slots, %d heap entries, capacity %d", len(s.slots), len(s.heap), cap(s.slots))
	}
	for p, e := range s.heap {
		if int(s.slots[e.slot].hpos) != p {
			return fmt.Errorf("heap %d -> slot %d -> hpos %d", p, e.slot, s.slots[e.slot].hpos)
		}
		if p > 0 && s.heap[(p-1)/heapArity].count > e.count {
			return fmt.Errorf("heap order broken at %d", p)
		}
	}
	used := 0
	for _, e := range s.table {
		if e.slot != 0 {
			used++
		}
	}
	if used != len(s.slots) {
		return fmt.Errorf("table holds %d entries, want %d", used, len(s.slots))
	}
	for i := range s.slots {
		if got := s.find(s.slots[i].key, s.slots[i].hash); got != int32(i) {
			return fmt.Errorf("find(%q) = %d, want %d", s.slots[i].key, got, i)
		}
	}
	return nil
}

// Pending returns the observations of hot key that ObserveHot has not yet
// added to its summary.
func (d *Detector) Pending(key string) int64 {
	if p := d.hot.Load().counter(key); p != nil {
		return p.n.Load()
	}
	return 0
}
