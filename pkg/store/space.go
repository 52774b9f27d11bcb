package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
)

// Badger writes its write-ahead log, value log and tables through memory
// mappings of files it first extends with ftruncate, which leaves them
// sparse. When the filesystem cannot back a page at the moment Badger copies
// into it, the kernel raises SIGBUS and the Go runtime ends the process: no
// error, no recover. So the store never lets the free space drop below what
// Badger may still write on its own, and refuses writes before that.
const (
	// spaceCheckInterval is how old the last free-space reading may be
	// before a write measures again, so that space taken by other processes
	// is noticed; while writes are refused it is also how often they look
	// whether space came back.
	spaceCheckInterval = 250 * time.Millisecond
	// spaceCheckBytes is how much the store writes between two readings at
	// most, so that a burst cannot outrun the last one.
	spaceCheckBytes = 1 << 20
	// entryOverhead is what one entry costs on disk beyond its key and value:
	// Badger's header (at most 22 bytes), CRC and version.
	entryOverhead = 48
	// probeFile is created and removed in the database directory to check
	// that the process may write there. Badger ignores files it does not
	// know.
	probeFile = ".conduit-write-probe"
)

// freeSpaceFunc returns how many bytes of the filesystem holding path this
// process may still use. Tests replace it to fake a full disk.
type freeSpaceFunc func(path string) (uint64, error)

// spaceReserve is the free space below which the store refuses writes (and
// refuses to open): what Badger may write by itself after the last write we
// let through. Writes already taken land in the write-ahead log (counted as
// they come); then the memtables are flushed to level 0 tables, and level 0
// is compacted into the base level, whose new tables are written before the
// old ones are deleted.
func spaceReserve(opt badger.Options) uint64 {
	flush := uint64(opt.NumMemtables) * uint64(opt.MemTableSize)
	level0 := uint64(opt.NumLevelZeroTables) * uint64(opt.MemTableSize)
	return flush + level0 + uint64(opt.BaseLevelSize) + spaceCheckBytes
}

// spaceGuard admits writes while the filesystem has more free space than
// the reserve. It measures at most every spaceCheckInterval or every
// spaceCheckBytes admitted, so a write costs no system call.
type spaceGuard struct {
	path    string
	reserve uint64
	free    freeSpaceFunc
	now     func() time.Time
	logger  *zap.Logger
	// descriptors keeps the store's file descriptor reserve; nil checks
	// nothing.
	descriptors *descriptorGuard
	// wals prepares the next write-ahead log with its blocks allocated;
	// nil (before Badger is open, and in tests) prepares nothing.
	wals *walAllocator

	mu sync.Mutex
	// checkedAt is when free space was last measured; zero forces a check.
	checkedAt time.Time
	// headroom is what may still be written above the reserve by the last
	// reading, sinceCheck what was admitted since.
	headroom   uint64
	sinceCheck uint64
	// short is the refusal while the last reading was under the reserve.
	short error
	// unknown is set once a reading failed, so the warning is logged once.
	unknown bool
}

// admit accounts for a write of n bytes, or refuses it with an error
// wrapping ErrNoSpace.
func (g *spaceGuard) admit(n uint64) error {
	if g.descriptors != nil {
		if err := g.descriptors.admit(n); err != nil {
			return err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	stale := now.Sub(g.checkedAt) >= spaceCheckInterval
	if !stale && g.short == nil && g.sinceCheck+n > spaceCheckBytes {
		stale = true
	}
	if stale {
		g.check(now)
	}
	if g.short != nil {
		return g.short
	}
	if n > g.headroom {
		// Not sticky: smaller writes may still fit.
		return newNoSpaceError(g.path, g.headroom+g.reserve, n+g.reserve)
	}
	g.headroom -= n
	g.sinceCheck += n
	return nil
}

// Writable returns the error writes get now (wrapping ErrNoSpace or
// ErrNoDescriptors) or nil.
// It costs what a write's check costs, so callers may ask before every
// action that must be followed by a write, such as the dedup entry that
// follows a destination's write.
func (b *Badger) Writable() error { return b.space.admit(0) }

// refusing reports whether the last reading was under the reserve.
func (g *spaceGuard) refusing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.short != nil
}

// check measures free space; g.mu is held.
func (g *spaceGuard) check(now time.Time) {
	g.checkedAt = now
	g.sinceCheck = 0
	free, err := g.free(g.path)
	if err != nil {
		// Not knowing is no reason to stop every pipeline; the store writes
		// as it did before it measured.
		if !g.unknown {
			g.unknown = true
			g.logger.Warn("cannot measure the free space of the database's filesystem; writes are not held back when it runs low",
				zap.String("path", g.path), zap.Error(err))
		}
		g.short = nil
		g.headroom = spaceCheckBytes
		if err := g.prepareWAL(); err != nil {
			g.short = err
			g.headroom = 0
		}
		return
	}
	if free < g.reserve {
		if g.short == nil {
			g.logger.Error("no space left for the database: writes are refused until space is freed",
				zap.String("path", g.path), zap.String("free", formatBytes(free)), zap.String("needed", formatBytes(g.reserve)))
		}
		g.short = newNoSpaceError(g.path, free, g.reserve)
		g.headroom = 0
		return
	}
	if err := g.prepareWAL(); err != nil {
		if g.short == nil {
			g.logger.Error("no space left for the database's next write-ahead log: writes are refused until space is freed",
				zap.String("path", g.path), zap.Error(err))
		}
		g.short = err
		g.headroom = 0
		return
	}
	if g.short != nil {
		g.logger.Info("space for the database is back: writes resume",
			zap.String("path", g.path), zap.String("free", formatBytes(free)))
	}
	g.short = nil
	g.headroom = free - g.reserve
}

// prepareWAL has the next write-ahead log prepared; g.mu is held. Any
// failure refuses writes: without it, the next memtable Badger starts is a
// sparse mapping a full disk turns into SIGBUS.
func (g *spaceGuard) prepareWAL() error {
	if g.wals == nil {
		return nil
	}
	err := g.wals.ensure()
	if err != nil && !errors.Is(err, ErrNoSpace) {
		g.logger.Warn("could not prepare the next write-ahead log", zap.String("path", g.path), zap.Error(err))
	}
	return err
}

// noSpaceError names the directory and the numbers; free and need are zero
// when Badger itself ran into ENOSPC and nothing was measured.
type noSpaceError struct {
	path       string
	free, need uint64
}

// newNoSpaceError returns the error with code 507 (insufficient storage,
// transient) attached, so that a pipeline run failing on it is restarted
// once space is back.
func newNoSpaceError(path string, free, need uint64) error {
	return cerrors.WithCode(&noSpaceError{path: path, free: free, need: need}, cerrors.CodeInsufficientSpace)
}

func (e *noSpaceError) Error() string {
	if e.need == 0 {
		return fmt.Sprintf("database %s: no space left on device", e.path)
	}
	return fmt.Sprintf("database %s: no space left on device: %s free, the database needs %s free to write safely",
		e.path, formatBytes(e.free), formatBytes(e.need))
}

func (e *noSpaceError) Unwrap() error { return ErrNoSpace }

// isNoSpace reports whether err (possibly flattened into text by Badger) is
// the operating system's ENOSPC.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(strings.ToLower(err.Error()), "no space left on device")
}

// checkWritable fails when the process cannot create a file in dir or open
// one of its files for writing. Badger ends the process (log.Fatal, which
// no recover catches) on some of those, the DISCARD file for one.
func checkWritable(dir string) error {
	probe := filepath.Join(dir, probeFile)
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return notWritable(dir, err)
	}
	_, werr := f.Write([]byte{0})
	cerr := f.Close()
	rerr := os.Remove(probe)
	if err := errors.Join(werr, cerr, rerr); err != nil {
		if isNoSpace(err) {
			return newNoSpaceError(dir, 0, 0)
		}
		return notWritable(dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return notWritable(dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, e.Name()), os.O_RDWR, 0)
		if err != nil {
			return notWritable(dir, err)
		}
		_ = f.Close()
	}
	return nil
}

func notWritable(dir string, err error) error {
	hint := ""
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		hint = "; conduit needs to read and write every file in it"
	}
	return fmt.Errorf("database directory %s is not writable: %w%s", dir, err, hint)
}

// formatBytes writes n in MiB (or KiB, for small numbers) for log lines and
// errors people read.
func formatBytes(n uint64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
