//go:build !unix

package connector

import "os"

// identityOf cannot name a file without inode numbers; the file destination
// then never cuts anything off.
func identityOf(*os.File, os.FileInfo) (fileIdentity, bool) { return fileIdentity{}, false }

// linkCount is 1: hard links are not counted here.
func linkCount(os.FileInfo) uint64 { return 1 }

// openNonBlock is 0: no named pipes to wait on.
const openNonBlock = 0

// openNoFollow is 0: the check after opening compares the resolved path.
const openNoFollow = 0

func isSymlinkRefusal(error) bool { return false }
