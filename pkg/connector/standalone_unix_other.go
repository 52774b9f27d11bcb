//go:build unix && !linux

package connector

import "syscall"

// dieWithParent does nothing: only Linux kills a child when its parent
// dies. A plugin whose runtime was killed ends once it notices that the
// runtime's end of its connection closed, if it does.
func dieWithParent(*syscall.SysProcAttr) {}
