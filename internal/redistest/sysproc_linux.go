package redistest

import "syscall"

// sysProcAttr makes the kernel kill the server if the test process dies
// without cleaning up (a panic in another goroutine, a -timeout kill), so no
// server outlives its test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
