package member

import "github.com/redshard/redshard/ring"

// Ring is a registry document's ring with the server identity of each of
// its indexes (what the root's Host.Parse returns).
type Ring struct {
	R   *ring.Ring
	IDs []string // IDs[i] is the identity of R's index i
}

// Owner returns the identity of key's server.
func (r Ring) Owner(key string) string { return r.IDs[r.R.LookupIndex(key)] }
