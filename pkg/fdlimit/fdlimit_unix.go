//go:build unix

package fdlimit

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// fdDir lists the open descriptors of the process.
var fdDir = func() string {
	if runtime.GOOS == "linux" {
		return "/proc/self/fd"
	}
	return "/dev/fd"
}()

func limit() (uint64, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	return uint64(rl.Cur), nil
}

// outOfDescriptors reports whether err is the process (EMFILE) or the
// system (ENFILE) being out of file descriptors.
func outOfDescriptors(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}
