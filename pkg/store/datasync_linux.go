package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// syncData makes f's data durable, and of its metadata what reading the
// data back needs (its size): fdatasync. A write-ahead log's size is set
// when Badger takes it, and a synced commit only changes its content, so
// the journal commit a full fsync makes for the modification time is
// saved on every commit.
func syncData(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
