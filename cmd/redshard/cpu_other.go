//go:build !unix

package main

import "time"

// processCPU is not measured on this system.
func processCPU() (user, sys time.Duration) { return 0, 0 }
