package localcache

import "github.com/cespare/xxhash/v2"

// SetBeforeStore installs f to run in SetWithTicket after the ticket check
// and before the entry is handed to ristretto.
func (c *Cache) SetBeforeStore(f func()) { c.beforeStore = f }

// FrontHolds reports whether the front index holds the entry of (shard,
// key, cmd).
func (c *Cache) FrontHolds(shard int, key, cmd string) bool {
	e := c.front.slot(refHash(xxhash.Sum64String(key), shard, cmd)).Load()
	return e != nil && e.shard == shard && e.key == key && e.cmd == cmd
}

// Age halves the admission sketch's counters now, as Admit does once per
// period.
func (c *Cache) Age() {
	c.admit.adds.Store(c.admit.period)
	c.admit.age()
}

// Halvings returns how many times the admission sketch was halved.
func (c *Cache) Halvings() uint64 { return c.admit.halved.Load() }

// LookAtRoom makes Admit look at the cache's fill now, as it does once
// every 1024 reads it counts.
func (c *Cache) LookAtRoom() { c.lookAtRoom() }
