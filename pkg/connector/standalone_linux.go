package connector

import "syscall"

// dieWithParent has the kernel send the plugin SIGTERM when the runtime
// dies, SIGKILL included: a plugin left behind by a runtime that was
// killed would go on holding what it opened - a PostgreSQL replication
// slot, a consumer group's partitions - and the plugin the next runtime
// starts could not have it. SIGTERM, not SIGKILL: a plugin of this SDK
// then finishes the write under way and tears its connector down (a
// SIGKILL can cut a line of a file in two), and Conduit's plugins, which do
// not handle it, exit at once. (The kernel signals the plugin when the
// thread that started it ends; the Go runtime ends a thread only when a
// goroutine that locked itself to it returns, which the runtime here does
// not do.)
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGTERM
}
