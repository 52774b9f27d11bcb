//go:build unix

package connector

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup puts the plugin in a process group of its own: a Ctrl-C
// in the terminal then reaches only the runtime, which stops its pipelines
// in order and tears the plugins down itself, and the signals below also
// reach the processes the plugin started. Where the system can, the plugin
// is also told to stop when the runtime dies (dieWithParent).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

// terminate asks the plugin's process group to exit.
func terminate(p *os.Process) error { return signalGroup(p, syscall.SIGTERM) }

// kill ends the plugin's process group at once.
func kill(p *os.Process) error { return signalGroup(p, syscall.SIGKILL) }

func signalGroup(p *os.Process, sig syscall.Signal) error {
	if err := syscall.Kill(-p.Pid, sig); err != nil {
		// The group is gone or was never made: signal the process itself.
		return p.Signal(sig)
	}
	return nil
}
