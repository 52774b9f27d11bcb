//go:build unix

package cluster

import (
	"errors"
	"syscall"
)

// processRuns reports whether a process with this pid runs on this
// machine (signal 0 checks without sending anything; a process of
// another user answers EPERM, and runs).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
