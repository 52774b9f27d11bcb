//go:build !linux

package store

import "os"

// syncData makes f's data durable (fsync where fdatasync is not offered).
func syncData(f *os.File) error { return f.Sync() }
