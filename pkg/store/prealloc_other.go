//go:build !linux

package store

import (
	"errors"
	"os"
)

var errFallocateUnsupported = errors.New("fallocate is not supported on this system")

func fallocate(*os.File, int64, bool) error { return errFallocateUnsupported }
