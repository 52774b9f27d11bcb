package connector

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// processTree is every process below a plugin's process, in any process
// group or session: a plugin's child that called setsid left the plugin's
// process group, so signalling the group misses it. They are found by
// their parent links in /proc and held by pidfd, so a signal sent later
// reaches the process that was found, never one that took its pid since.
//
// What it cannot find: a process whose parent exited before the walk (it
// was handed to init, or to a subreaper, and no longer links to the
// plugin) - a daemon that double-forks, or the children of a plugin that
// already died. A cgroup (systemd's KillMode=control-group, a container)
// is what ends those.
type processTree struct{ fds []int }

// findDescendants walks /proc for the processes below root.
func findDescendants(root int) processTree {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return processTree{}
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentPID(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var t processTree
	seen := map[int]bool{root: true}
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			t.fds = append(t.fds, fd)
		}
		queue = append(queue, children[pid]...)
	}
	return t
}

// terminate asks every process of the tree that still runs to exit.
func (t processTree) terminate() {
	for _, fd := range t.fds {
		_ = unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)
	}
}

// kill ends every process of the tree that still runs and releases the
// tree; again, it does nothing.
func (t *processTree) kill() {
	for _, fd := range t.fds {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		_ = unix.Close(fd)
	}
	t.fds = nil
}

// parentPID reads the parent of pid from /proc/<pid>/stat.
func parentPID(pid int) (int, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}
