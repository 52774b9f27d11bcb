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
	root string // the directory watched, when the path is one
}

// rootPoll is how often a removed pipelines directory is looked for: a
// directory that was removed (rm -rf, a checkout) cannot be watched until
// it is back.
const rootPoll = time.Second

// NewWatcher watches path: a directory with its subdirectories (those
// created later too; dot-directories are skipped, as the loader skips
// them), or a single file, through its directory. Changes made once it
// returns are seen.
func NewWatcher(path string, log *zap.Logger) (*Watcher, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	wa := &Watcher{w: w, log: log}
	if st.IsDir() {
		wa.root = filepath.Clean(path)
		err = addTree(w, path, log)
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

// Run calls changed after the files change, until ctx is done: once the
// changes have been quiet for Debounce, and at the latest maxDelay after
// the first. It closes the watcher when it returns.
func (wa *Watcher) Run(ctx context.Context, changed func()) {
	w, log, file := wa.w, wa.log, wa.file
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
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events, not the files: read them all.
			log.Warn("watching the pipeline files", zap.Error(err))
			fire()
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if wa.root != "" && filepath.Clean(ev.Name) == wa.root && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) && poll == nil {
				log.Warn("the pipelines directory was removed; its pipelines keep running, and changes are watched again once it is back",
					zap.String("path", wa.root))
				poll = time.NewTicker(rootPoll)
				pollC = poll.C
			}
			if !relevant(ev, file) {
				continue
			}
			if ev.Has(fsnotify.Create) && file == "" {
				if st, err := os.Stat(ev.Name); err == nil && st.IsDir() {
					if err := addTree(w, ev.Name, log); err != nil {
						log.Warn("watching a new directory of pipeline files", zap.String("path", ev.Name), zap.Error(err))
					}
				}
			}
			if quiet == nil {
				quiet, deadline = time.NewTimer(Debounce), time.NewTimer(maxDelay)
				quietC, limitC = quiet.C, deadline.C
			} else {
				quiet.Reset(Debounce)
			}
		case <-pollC:
			if st, err := os.Stat(wa.root); err != nil || !st.IsDir() {
				continue
			}
			if err := addTree(w, wa.root, log); err != nil {
				continue
			}
			poll.Stop()
			poll, pollC = nil, nil
			log.Info("the pipelines directory is back; watching it again", zap.String("path", wa.root))
			fire()
		case <-quietC:
			fire()
		case <-limitC:
			fire()
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
