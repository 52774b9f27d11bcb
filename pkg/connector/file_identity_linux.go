package connector

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// birthTime is the creation time of f in nanoseconds, or 0 where the file
// system does not record one. Inode numbers are reused soon after a file is
// deleted; the birth time tells a new file from the old one.
func birthTime(f *os.File) int64 {
	conn, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	var st unix.Statx_t
	var statErr error
	if err := conn.Control(func(fd uintptr) {
		statErr = unix.Statx(int(fd), "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &st)
	}); err != nil || statErr != nil || st.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
}

// openedPath is where the open file f really is: the kernel's name for
// it, which no symbolic link or rename between a check and the open can
// change.
func openedPath(f *os.File, path string) string {
	if real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err == nil && filepath.IsAbs(real) {
		return real
	}
	real, _ := resolveExisting(path)
	return real
}
