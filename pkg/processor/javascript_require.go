package processor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/dop251/goja_nodejs/require"
)

// moduleLoader is where custom.javascript's require() reads modules: only
// from dir (processors.javascript.require-path), and not at all when dir
// is empty. Under Conduit require reads any file the process can read,
// which lets a pipeline file - which the API can also write - read
// conduit's secrets.
//
// name is the path require resolved: relative to the directory of the
// module that asked (the script's is dir itself), so "./lib" and "lib"
// (through node_modules) arrive as "lib", "lib.js", "node_modules/lib/..."
// and so on. Absolute paths and paths that climb out with ".." are
// refused; the file is opened with os.Root, which also refuses a symbolic
// link (at any step) that leads out of dir. A missing file is
// ModuleFileDoesNotExistError, so that require goes on to the next
// candidate (lib.js after lib) as it does for files anywhere.
func moduleLoader(dir string) require.SourceLoader {
	return func(name string) ([]byte, error) {
		if dir == "" {
			return nil, fmt.Errorf("require(%q) refused: processors.javascript.require-path is not set, so scripts may not read files; set it to the directory that holds the modules", name)
		}
		clean := path.Clean(name)
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("require(%q) refused: modules are read only from processors.javascript.require-path (%s), by a path relative to it", name, dir)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, fmt.Errorf("require(%q): processors.javascript.require-path: %w", name, err)
		}
		defer root.Close()
		fi, err := root.Stat(clean)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, require.ModuleFileDoesNotExistError
		case err != nil:
			return nil, fmt.Errorf("require(%q) refused: %w (modules are read only from processors.javascript.require-path, %s)", name, err, dir)
		case fi.IsDir():
			return nil, require.ModuleFileDoesNotExistError
		case !fi.Mode().IsRegular():
			return nil, fmt.Errorf("require(%q) refused: not a regular file", name)
		}
		b, err := root.ReadFile(clean)
		if err != nil {
			return nil, fmt.Errorf("require(%q): %w", name, err)
		}
		return b, nil
	}
}
