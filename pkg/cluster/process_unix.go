//go:build unix

package cluster

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// processRuns reports whether a process with this pid runs on this
// machine (signal 0 checks without sending anything; a process of
// another user answers EPERM, and runs). A process that was killed but
// not yet reaped by its parent (a zombie, state Z in /proc where there is
// one) does not run.
func processRuns(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc to tell: it runs
	}
	// The state follows the command name, which is in parentheses and
	// may itself hold any character.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 || end+2 >= len(stat) {
		return true
	}
	state := stat[end+2]
	return state != 'Z' && state != 'X'
}
