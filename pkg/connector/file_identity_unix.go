//go:build unix

package connector

import (
	"errors"
	"os"
	"syscall"
)

// identityOf names the file f, whose FileInfo is fi, so that a later run
// can tell whether the file at the same path is still the same file.
func identityOf(f *os.File, fi os.FileInfo) (fileIdentity, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileIdentity{}, false
	}
	return fileIdentity{Dev: uint64(st.Dev), Ino: st.Ino, Birth: birthTime(f)}, true //nolint:unconvert // Dev's type differs between systems
}

// linkCount is the number of hard links of fi's file.
func linkCount(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink) //nolint:unconvert // Nlink's type differs between systems
	}
	return 1
}

// openNonBlock keeps opening for reading from waiting on a named pipe
// someone put at the path: a regular file is read as usual.
const openNonBlock = syscall.O_NONBLOCK

// openNoFollow makes opening fail on a symbolic link at the path itself.
const openNoFollow = syscall.O_NOFOLLOW

// isSymlinkRefusal reports whether err is opening a symbolic link with
// openNoFollow.
func isSymlinkRefusal(err error) bool { return errors.Is(err, syscall.ELOOP) }
