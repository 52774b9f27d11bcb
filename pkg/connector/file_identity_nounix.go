//go:build !unix

package connector

import "os"

// identityOf cannot name a file without inode numbers; the file destination
// then never cuts anything off.
func identityOf(*os.File, os.FileInfo) (fileIdentity, bool) { return fileIdentity{}, false }
