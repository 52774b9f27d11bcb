//go:build linux || darwin || freebsd

package store

import (
	"errors"
	"os"
	"syscall"
)

// lockHeldByOther reports whether another process (or another open in this
// one) holds Badger's lock on dir, which is an flock on the directory
// itself. It takes and at once releases the lock, so that the checks before
// Badger's open do not read files a live database is writing.
func lockHeldByOther(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false // Badger's open reports it
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
