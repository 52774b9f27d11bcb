package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

var errFallocateUnsupported = errors.New("fallocate is not supported")

// fallocate allocates the first size bytes of f's blocks; keepSize leaves
// f's size unchanged.
func fallocate(f *os.File, size int64, keepSize bool) error {
	mode := uint32(0)
	if keepSize {
		mode = unix.FALLOC_FL_KEEP_SIZE
	}
	for {
		err := unix.Fallocate(int(f.Fd()), mode, 0, size)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return errors.Join(errFallocateUnsupported, err)
		default:
			return err
		}
	}
}
