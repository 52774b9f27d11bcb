//go:build !unix

package connector

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing where there are no process groups.
func setProcessGroup(*exec.Cmd) {}

// terminate ends the plugin; without signals it cannot be asked nicely.
func terminate(p *os.Process) error { return p.Kill() }

// kill ends the plugin at once.
func kill(p *os.Process) error { return p.Kill() }
