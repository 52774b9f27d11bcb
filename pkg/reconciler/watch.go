package reconciler

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// Debounce is how long the files must be quiet after a change before they
// are read again: an editor's save (write to a temporary file, rename it
// over the old one) or a `git checkout` is one change, not many.
const Debounce = 300 * time.Millisecond

// maxDelay bounds how long a stream of changes can put a reload off, so
// that a change takes effect within two seconds even while another file
// is being written to continuously.
const maxDelay = 1500 * time.Millisecond

// Watcher reports changes to the pipeline files under a path.
type Watcher struct {
	w    *fsnotify.Watcher
	log  *zap.Logger
	file string // the one file watched, when the path is a file
	root string // the directory as configured, when the path is one
	// parent is root's directory, watched for root itself being replaced:
	// a deploy that swaps a symbolic link in (`ln -s pipelines.rel2 tmp
	// && mv -T tmp pipelines`) changes no file under the old target. ""
	// when root has no parent of its own.
	parent string
	// real is what root resolves to, whose tree is watched; "" while it
	// is gone. Only Run's goroutine uses it after NewWatcher.
	real     string
	realInfo os.FileInfo
	// recheck asks Run to resolve root again (SIGHUP).
	recheck chan struct{}
}

// rootPoll is how often a removed pipelines directory is looked for: a
// directory that was removed (rm -rf, a checkout) cannot be watched until
// it is back.
const rootPoll = time.Second

// NewWatcher watches path: a directory with its subdirectories (those
// created later too; dot-directories are skipped, as the loader skips
// them), or a single file, through its directory. A directory that is a
// symbolic link is watched where it points, and its link is watched for
// being pointed elsewhere. Changes made once it returns are seen.
func NewWatcher(path string, log *zap.Logger) (*Watcher, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	wa := &Watcher{w: w, log: log, recheck: make(chan struct{}, 1)}
	if st.IsDir() {
		wa.root = filepath.Clean(path)
		if parent := filepath.Dir(wa.root); parent != wa.root {
			wa.parent = parent
		}
		wa.real, err = filepath.EvalSymlinks(wa.root)
		if err == nil {
			wa.realInfo, err = os.Stat(wa.real)
		}
		if err == nil {
			err = addTree(w, wa.real, log)
		}
		if err == nil && wa.parent != "" {
			if perr := w.Add(wa.parent); perr != nil {
				// Changes under the directory are still seen; a link
				// swapped in is seen at the next SIGHUP.
				log.Warn("cannot watch the directory above the pipeline files for the pipelines directory being replaced",
					zap.String("path", wa.parent), zap.Error(perr))
				wa.parent = ""
			}
		}
	} else {
		wa.file = filepath.Clean(path)
		err = w.Add(filepath.Dir(wa.file))
	}
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	return wa, nil
}

// Recheck asks the watcher to resolve the pipelines directory again, as
// when it sees it replaced: after SIGHUP, a link swapped in while nothing
// could see it is watched. It does not wait.
func (wa *Watcher) Recheck() {
	select {
	case wa.recheck <- struct{}{}:
	default:
	}
}

// Run calls changed after the files change, until ctx is done: once the
// changes have been quiet for Debounce, and at the latest maxDelay after
// the first. It closes the watcher when it returns.
func (wa *Watcher) Run(ctx context.Context, changed func()) {
	w, file := wa.w, wa.file
	defer w.Close()
	var (
		quiet, deadline *time.Timer
		quietC, limitC  <-chan time.Time
		// poll runs while the watched directory is gone.
		poll  *time.Ticker
		pollC <-chan time.Time
	)
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	stop := func(t *time.Timer) {
		if t != nil {
			t.Stop()
		}
	}
	defer func() { stop(quiet); stop(deadline) }()
	fire := func() {
		stop(quiet)
		stop(deadline)
		quiet, deadline, quietC, limitC = nil, nil, nil, nil
		changed()
	}
	schedule := func() {
		if quiet == nil {
			quiet, deadline = time.NewTimer(Debounce), time.NewTimer(maxDelay)
			quietC, limitC = quiet.C, deadline.C
		} else {
			quiet.Reset(Debounce)
		}
	}
	// resolve follows root again and watches what it is now; a change
	// of target (or the directory gone or back) is a change of the files.
	resolve := func() {
		switch wa.resolve() {
		case rootGone:
			if poll == nil {
				poll = time.NewTicker(rootPoll)
				pollC = poll.C
			}
			schedule()
		case rootMoved:
			if poll != nil {
				poll.Stop()
				poll, pollC = nil, nil
			}
			schedule()
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events, not the files: read them all.
			wa.log.Warn("watching the pipeline files", zap.Error(err))
			fire()
		case <-wa.recheck:
			if wa.root != "" {
				resolve()
			}
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			name := filepath.Clean(ev.Name)
			if wa.root != "" && (name == wa.root || (wa.real != "" && name == wa.real)) {
				resolve()
				continue
			}
			if wa.parent != "" && filepath.Dir(name) == wa.parent && !wa.inTree(name) {
				continue // a neighbour of the pipelines directory
			}
			if !relevant(ev, file) {
				continue
			}
			if ev.Has(fsnotify.Create) && file == "" {
				if st, err := os.Stat(ev.Name); err == nil && st.IsDir() {
					if err := addTree(w, ev.Name, wa.log); err != nil {
						wa.log.Warn("watching a new directory of pipeline files", zap.String("path", ev.Name), zap.Error(err))
					}
				}
			}
			schedule()
		case <-pollC:
			if wa.resolve() == rootMoved {
				poll.Stop()
				poll, pollC = nil, nil
				fire()
			}
		case <-quietC:
			fire()
		case <-limitC:
			fire()
		}
	}
}

// inTree reports whether name lies in the watched tree (the parent may be
// the tree's own directory when root is a link to a neighbour).
func (wa *Watcher) inTree(name string) bool {
	return wa.real != "" && filepath.Dir(name) == wa.real
}

// rootChange is what resolving the pipelines directory again found.
type rootChange int

const (
	rootSame  rootChange = iota + 1 // what is watched, or still gone
	rootMoved                       // another directory (or back after being gone): watched now
	rootGone                        // not there (a dangling link, removed)
)

// resolve follows root again. When it names another directory than the
// one watched, the old tree's watches are dropped and the new tree is
// watched.
func (wa *Watcher) resolve() rootChange {
	real, err := filepath.EvalSymlinks(wa.root)
	var st os.FileInfo
	if err == nil {
		if st, err = os.Stat(real); err == nil && !st.IsDir() {
			err = errors.New("not a directory")
		}
	}
	// The same path may be another directory (removed and made again
	// before the removal was seen): identity decides.
	if err == nil && real == wa.real && wa.realInfo != nil && os.SameFile(st, wa.realInfo) {
		return rootSame
	}
	if err != nil && wa.real == "" {
		return rootSame // still gone
	}
	wa.dropTree()
	if err == nil {
		err = addTree(wa.w, real, wa.log)
	}
	if err != nil {
		if wa.real != "" {
			wa.log.Warn("the pipelines directory was removed; its pipelines keep running, and changes are watched again once it is back",
				zap.String("path", wa.root), zap.Error(err))
		}
		wa.real, wa.realInfo = "", nil
		return rootGone
	}
	if real != wa.root {
		wa.log.Info("watching the pipelines directory where its link points now", zap.String("path", wa.root), zap.String("target", real))
	} else {
		wa.log.Info("the pipelines directory is back; watching it again", zap.String("path", wa.root))
	}
	wa.real, wa.realInfo = real, st
	return rootMoved
}

// dropTree stops watching the tree under the old target; the parent stays
// watched.
func (wa *Watcher) dropTree() {
	for _, p := range wa.w.WatchList() {
		if p != wa.parent {
			_ = wa.w.Remove(p)
		}
	}
}

// relevant says whether ev can change what the files define: a YAML file
// or a directory (created, removed or renamed), not an editor's swap or
// backup file.
func relevant(ev fsnotify.Event, file string) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	if file != "" {
		return filepath.Clean(ev.Name) == file
	}
	base := filepath.Base(ev.Name)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(base)) {
	case ".yml", ".yaml":
		return true
	case "":
		return true // maybe a directory; a removed one cannot be told
	}
	return false
}

func addTree(w *fsnotify.Watcher, root string, log *zap.Logger) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone meanwhile
			}
			log.Warn("cannot watch a directory of pipeline files", zap.String("path", path), zap.Error(err))
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		return w.Add(path)
	})
}
