//go:build unix

package redshard_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used so far, user and
// system, all threads; ok is false when the system does not say.
func processCPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
