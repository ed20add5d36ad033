package redshard

import "time"

// SetRetireGrace shortens the grace period of removed shards' clients for
// a test and returns a func that restores it.
func SetRetireGrace(d time.Duration) (restore func()) {
	old := retireGrace
	retireGrace = d
	return func() { retireGrace = old }
}
