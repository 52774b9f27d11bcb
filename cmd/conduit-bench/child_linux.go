package main

import "syscall"

// childAttributes make the conduit processes the cluster benchmark starts
// die with it, even when it is killed.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
