//go:build !(linux || darwin || freebsd)

package store

import "errors"

// statfsFree is not implemented here; the guard then lets writes through
// and says once that it cannot measure.
func statfsFree(string) (uint64, error) {
	return 0, errors.New("measuring free space is not supported on this platform")
}
