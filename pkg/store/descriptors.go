package store

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/fdlimit"
)

// ErrNoDescriptors is wrapped by the error of a write refused because the
// process has too few file descriptors left for the store.
var ErrNoDescriptors = errors.New("too few file descriptors left for the database")

// Badger opens files as it goes: a new memtable, a flushed table, a new
// value log file, compaction outputs. When it cannot (EMFILE), it leaves
// itself without a memtable and the next write ends the process through an
// assertion. So the store keeps descriptors in reserve: while fewer than
// StoreDescriptorReserve are left, it refuses writes; the pipelines whose
// writes fail go recovering and close their connectors, which gives
// descriptors back.
const StoreDescriptorReserve = 16

// descriptorCheckInterval is how old the last count may be before a write
// counts again: counting reads the process's descriptor table. Writes also
// count again every spaceCheckBytes: Badger opens a file (a new memtable)
// only after several times that much was written.
const descriptorCheckInterval = 250 * time.Millisecond

// descriptorRecheckShort is how old the count may be while writes are
// refused for lack of descriptors.
const descriptorRecheckShort = 10 * time.Millisecond

// descriptorGuard refuses writes while the descriptors left are under the
// reserve. It counts at most every descriptorCheckInterval or
// spaceCheckBytes written.
type descriptorGuard struct {
	path   string
	left   func() (int, error)
	now    func() time.Time
	logger *zap.Logger

	mu         sync.Mutex
	checkedAt  time.Time
	sinceCheck uint64
	short      error
	unknown    bool
}

func newDescriptorGuard(path string, now func() time.Time, logger *zap.Logger) *descriptorGuard {
	return &descriptorGuard{path: path, left: fdlimit.Left, now: now, logger: logger}
}

// admit accounts for a write of n bytes and returns the refusal in effect,
// counting again when the last count is stale.
func (g *descriptorGuard) admit(n uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.sinceCheck += n
	// While short, count again much sooner: the dip is usually pipelines
	// opening connectors all at once, over in milliseconds, and every
	// write refused meanwhile (an audit event, a state) has to wait.
	interval := descriptorCheckInterval
	if g.short != nil {
		interval = descriptorRecheckShort
	}
	if now.Sub(g.checkedAt) < interval && !g.checkedAt.IsZero() && (g.short != nil || g.sinceCheck <= spaceCheckBytes) {
		return g.short
	}
	g.checkedAt, g.sinceCheck = now, 0
	left, err := g.left()
	if err != nil {
		if !g.unknown {
			g.unknown = true
			g.logger.Warn("cannot count the open file descriptors; the database's reserve is not kept",
				zap.String("path", g.path), zap.Error(err))
		}
		g.short = nil
		return nil
	}
	if left < StoreDescriptorReserve {
		if g.short == nil {
			g.logger.Error("too few file descriptors left: database writes are refused until pipelines give some back (raise `ulimit -n`)",
				zap.String("path", g.path), zap.Int("left", left), zap.Int("reserve", StoreDescriptorReserve))
		}
		g.short = cerrors.WithCode(fmt.Errorf("database %s: %w: %d left, %d kept in reserve; raise the open file limit (ulimit -n)",
			g.path, ErrNoDescriptors, left, StoreDescriptorReserve), cerrors.CodeUnavailable)
		return g.short
	}
	if g.short != nil {
		g.logger.Info("file descriptors for the database are back: writes resume", zap.String("path", g.path), zap.Int("left", left))
	}
	g.short = nil
	return nil
}
