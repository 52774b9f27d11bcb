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
	// real is Path with every symbolic link resolved when conduit
	// started (NewProtectedPath): a link swapped later does not take
	// the protection away from what conduit opened then. The path as it
	// resolves at the time of a check is protected too.
	real string
}

// NewProtectedPath protects path, resolved through symbolic links once,
// now: the store, the configuration file and the other paths are opened
// through what their links point to when conduit starts.
func NewProtectedPath(path, what string) ProtectedPath {
	p := ProtectedPath{Path: path, What: what}
	if path != "" {
		p.real, _ = resolveExisting(path)
	}
	return p
}

// roots are the real paths p stands for: the one resolved at start and
// the one its path resolves to now (the same unless a link changed).
func (p ProtectedPath) roots() []string {
	var rs []string
	if p.real != "" {
		rs = append(rs, p.real)
	}
	if now, err := resolveExisting(p.Path); err == nil && now != p.real {
		rs = append(rs, now)
	}
	return rs
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
// link). A protected path is known by its real path and its identity
// (device and inode), never by the name it was given: a store reached
// through a symbolic link is the same store.
func checkProtectedFile(path, real string, fi os.FileInfo, protected []ProtectedPath) error {
	for _, p := range protected {
		if p.Path == "" {
			continue
		}
		if real != "" && under(real, p) {
			return protectedError(path, real, p)
		}
		for _, root := range p.roots() {
			pfi, err := os.Stat(root)
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
			if linkCount(fi) > 1 && holdsFile(root, fi) {
				return protectedError(path, "", p)
			}
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
	for _, pr := range p.roots() {
		if real == pr || isBelow(real, pr) {
			return true
		}
	}
	return false
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

// holdsFile reports whether the directory dir (a real path: a walk does
// not enter a root that is a symbolic link) holds fi under any name,
// looking at a bounded number of entries. A symbolic link in dir counts
// as the file it points to: conduit reads a pipeline file through one
// (a Kubernetes ConfigMap is such links).
func holdsFile(dir string, fi os.FileInfo) bool {
	found, seen := false, 0
	_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if seen++; seen > maxProtectedScan {
			return filepath.SkipAll
		}
		var efi os.FileInfo
		if e.Type()&fs.ModeSymlink != 0 {
			efi, err = os.Stat(path)
		} else {
			efi, err = e.Info()
		}
		if err == nil && efi.Mode().IsRegular() && os.SameFile(fi, efi) {
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
