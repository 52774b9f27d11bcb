//go:build linux || darwin || freebsd

package store

import "syscall"

// statfsFree is the free space an unprivileged process may use on the
// filesystem holding path (blocks reserved for root are not counted, so
// the guard errs on the safe side when conduit runs as root).
func statfsFree(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	avail := int64(st.Bavail) //nolint:unconvert // int64 on freebsd, uint64 elsewhere
	if avail < 0 {
		return 0, nil
	}
	return uint64(avail) * uint64(st.Bsize), nil
}
