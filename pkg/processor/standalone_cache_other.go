//go:build !unix

package processor

import "os"

// privateCacheDir makes dir when it is missing; ownership is only checked
// where Unix permissions apply.
func privateCacheDir(dir string) error { return os.MkdirAll(dir, 0o700) }
