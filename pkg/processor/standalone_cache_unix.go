//go:build unix

package processor

import (
	"fmt"
	"os"
	"syscall"
)

// privateCacheDir makes dir (mode 0700) when it is missing and checks that
// it is conduit's own: a directory, not a symlink, owned by this process's
// user and writable by no one else. The compilation cache holds native
// code conduit runs; a directory another local user can write to would let
// them run theirs as conduit.
func privateCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory (a symlink is not accepted)", dir)
	case ok && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not to conduit's user (uid %d)", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by other users (mode %o); chmod go-w it", dir, fi.Mode().Perm())
	}
	return nil
}
