//go:build !linux

package connector

// processTree is empty where /proc and pidfds are not there: a plugin's
// processes are ended through its process group only (see
// standalone_unix.go), and a child that left the group is not found.
type processTree struct{}

func findDescendants(int) processTree { return processTree{} }

func (processTree) terminate() {}

func (*processTree) kill() {}
