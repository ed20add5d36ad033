//go:build !unix

package redshard_test

import "time"

// processCPU is not measured here (see the unix version).
func processCPU() (time.Duration, bool) { return 0, false }
