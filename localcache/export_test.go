package localcache

// SetBeforeStore installs f to run in SetWithTicket after the ticket check
// and before the entry is handed to ristretto.
func (c *Cache) SetBeforeStore(f func()) { c.beforeStore = f }
