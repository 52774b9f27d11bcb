//go:build unix

package connector

import (
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
