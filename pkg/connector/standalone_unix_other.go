//go:build unix && !linux

package connector

import "syscall"

// dieWithParent does nothing: the plugin is signalled on its runtime's
// death on Linux only. Elsewhere a plugin whose runtime was killed ends
// once it notices that the runtime went away, if it does (this SDK's do).
func dieWithParent(*syscall.SysProcAttr) {}
