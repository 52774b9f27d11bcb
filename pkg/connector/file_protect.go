package connector

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	cerrors "github.com/conduitry/conduit/errors"
)

// ProtectedPath is a file or directory of conduit's own that the file
// destination never writes to: the store's directory, the configuration
// file, the pipeline files. Appending records to one bricks the store or
// makes the next start fail on invalid YAML.
type ProtectedPath struct {
	// Path is the file or directory, absolute or relative to the working
	// directory; a directory protects everything under it.
	Path string
	// What names it in errors, with the key that sets it:
	// "the store's directory (db.badger.path)".
	What string
}

// maxProtectedScan bounds the entries of a protected directory compared
// with a destination file that has other hard links.
const maxProtectedScan = 100_000

// errProtected is a destination path that is one of conduit's own files.
// Such an error is fatal: retrying writes nothing, a person must change
// the path.
var errProtected = errors.New("conduit never writes to its own files")

// protectedByName refuses a path that names or lies under a protected
// path as written, without looking at the file system: it lets a pipeline
// that would write into conduit's own files be refused when it is loaded
// (validate, apply), before it runs. Open checks again, through symbolic
// links and hard links.
func protectedByName(path string, protected []ProtectedPath) error {
	abs := absPath(path)
	for _, p := range protected {
		if p.Path == "" {
			continue
		}
		pa := absPath(p.Path)
		if abs == pa {
			return protectedError(path, "", p)
		}
		if isBelow(abs, pa) {
			return protectedWhere(path, "", "lies in", p)
		}
	}
	return nil
}

// checkProtectedPath refuses, before anything is created, a path that
// names or lies under a protected path, also through symbolic links in
// the directories that exist.
func checkProtectedPath(path string, protected []ProtectedPath) error {
	real, err := resolveExisting(path)
	if err != nil {
		return nil // the check after opening decides
	}
	for _, p := range protected {
		if p.Path != "" && under(real, p) {
			return protectedError(path, real, p)
		}
	}
	return nil
}

// checkProtectedFile refuses the opened file fi, found at real (its path
// with every symbolic link resolved), when it is or lies under a
// protected path, or is a protected file under another name (a hard
// link).
func checkProtectedFile(path, real string, fi os.FileInfo, protected []ProtectedPath) error {
	for _, p := range protected {
		if p.Path == "" {
			continue
		}
		if real != "" && under(real, p) {
			return protectedError(path, real, p)
		}
		pfi, err := os.Stat(p.Path)
		if err != nil {
			continue
		}
		if !pfi.IsDir() {
			if os.SameFile(fi, pfi) {
				return protectedError(path, "", p)
			}
			continue
		}
		if real != "" && inDir(real, pfi) {
			return protectedError(path, real, p)
		}
		if linkCount(fi) > 1 && holdsFile(p.Path, fi) {
			return protectedError(path, "", p)
		}
	}
	return nil
}

func protectedError(path, real string, p ProtectedPath) error {
	via := ""
	if real != "" && filepath.Clean(real) != filepath.Clean(absPath(path)) {
		via = " (" + real + ")"
	}
	where := "is"
	if fi, err := os.Stat(p.Path); err == nil && fi.IsDir() {
		where = "lies in"
	}
	return protectedWhere(path, via, where, p)
}

// protectedWhere is the error of a destination path that is ("is") or
// lies under ("lies in") the protected path p; via is how it gets there.
func protectedWhere(path, via, where string, p ProtectedPath) error {
	return cerrors.Fatal(fmt.Errorf("file destination path %s%s %s %s %s: %w (records written there would destroy it); choose a path outside it",
		path, via, where, p.What, p.Path, errProtected))
}

// under reports whether the resolved path real is p or lies under it.
func under(real string, p ProtectedPath) bool {
	pr, err := resolveExisting(p.Path)
	if err != nil {
		return false
	}
	return real == pr || isBelow(real, pr)
}

// isBelow reports whether path lies in the directory dir (both cleaned
// absolute paths), dir itself excluded.
func isBelow(path, dir string) bool {
	return strings.HasPrefix(path, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// inDir reports whether one of the directories above real is dir, by
// identity: a name that differs only in case (on a file system that
// ignores it) or a bind mount of dir is seen through.
func inDir(real string, dir os.FileInfo) bool {
	for cur := filepath.Dir(real); ; cur = filepath.Dir(cur) {
		if fi, err := os.Stat(cur); err == nil && os.SameFile(fi, dir) {
			return true
		}
		if filepath.Dir(cur) == cur {
			return false
		}
	}
}

// holdsFile reports whether the directory dir holds fi under any name,
// looking at a bounded number of entries.
func holdsFile(dir string, fi os.FileInfo) bool {
	found, seen := false, 0
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if seen++; seen > maxProtectedScan {
			return filepath.SkipAll
		}
		if efi, err := e.Info(); err == nil && efi.Mode().IsRegular() && os.SameFile(fi, efi) {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// resolveExisting is path made absolute with the symbolic links of its
// longest existing part resolved; the rest, not created yet, is appended
// as it is.
func resolveExisting(path string) (string, error) {
	abs := absPath(path)
	rest := ""
	for cur := abs; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return filepath.Clean(path)
}
