package main

import "syscall"

// sysProcAttr makes a server die with the runner, even if the runner is
// killed before it can stop it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
