//go:build !linux

package connector

import "os"

// openedPath is where the open file f is, as its path resolves now.
func openedPath(_ *os.File, path string) string {
	real, _ := resolveExisting(path)
	return real
}
