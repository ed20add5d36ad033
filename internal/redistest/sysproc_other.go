//go:build !linux

package redistest

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; Cleanup stops
// the server.
func sysProcAttr() *syscall.SysProcAttr { return nil }
