package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The files init and pipelines init create are written without following
// a symbolic link at their own path: a link planted where conduit.yml or a
// pipeline file goes (in a shared directory such as /tmp, by another user)
// would otherwise make init, perhaps run as root with --force, overwrite
// whatever file it points to. A file is written to a new temporary file
// beside it, synced, and renamed over the path, so it is never half
// written and a link swapped in at the last moment is replaced, not
// followed. Directories on the way may be links (a release directory
// behind pipelines), except a link in a directory every user may write
// to, which anyone could have planted.

// initFile is a file init writes.
type initFile struct {
	path    string
	content []byte
}

// checkInitTarget refuses path when it is a symbolic link, not a regular
// file, or (without overwrite) a file that exists; and when a directory on
// its way is a link another user could have planted.
func checkInitTarget(path string, overwrite bool) error {
	if link, err := plantedLink(filepath.Dir(path)); err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	} else if link != "" {
		target, _ := os.Readlink(link)
		return fmt.Errorf("%s is a symbolic link (to %s) in a directory every user may write to: init does not write through it, "+
			"since whoever planted it chooses where the files go; remove it, or give init a directory of your own", link, target)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("check %s: %w", path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return fmt.Errorf("%s is a symbolic link (to %s): init does not write through one, even with --force; remove the link first", path, target)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s exists and is not a regular file (%s); init writes only regular files", path, fi.Mode().Type())
	case !overwrite:
		return fmt.Errorf("%s already exists; use --force to overwrite it", path)
	}
	return nil
}

// writeInitFiles checks every file first, so that a refusal writes
// nothing, then writes them; it returns the paths written, in order,
// through written.
func writeInitFiles(files []initFile, overwrite bool, written func(path string)) error {
	for _, f := range files {
		if err := checkInitTarget(f.path, overwrite); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(f.path), err)
		}
		if err := checkInitTarget(f.path, overwrite); err != nil {
			return err // changed since the first look
		}
		if err := replaceFile(f.path, f.content); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
		written(f.path)
	}
	return nil
}

// plantedLink returns the first symbolic link on the way to dir (dir
// included) that lies in a directory every user may write to, "" when
// there is none. Components that do not exist yet end the walk: init
// creates them.
func plantedLink(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	cur := filepath.VolumeName(abs) + string(filepath.Separator)
	rest := abs[len(cur):]
	for _, name := range strings.Split(rest, string(filepath.Separator)) {
		if name == "" {
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if parent, err := os.Stat(cur); err == nil && parent.Mode().Perm()&0o002 != 0 {
			return next, nil
		}
		real, err := filepath.EvalSymlinks(next)
		if err != nil {
			return "", nil // a dangling link: creating below it fails
		}
		cur = real
	}
	return "", nil
}
