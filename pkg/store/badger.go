package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"go.uber.org/zap"
)

const (
	// defaultGCInterval is how often the value log is garbage collected. Our
	// values are small and live in the LSM tree, so the value log rarely has
	// anything to reclaim; a slow tick keeps the cost near zero.
	defaultGCInterval = 5 * time.Minute
	// defaultWALInterval is how often the inventory learns of a new
	// write-ahead log (one per 8 MiB memtable), so that losing the newest
	// one after a crash is noticed.
	defaultWALInterval = time.Second
	// gcDiscardRatio is Badger's recommended ratio: rewrite a value log file
	// when half of it is garbage, for a lifetime write amplification of 2.
	gcDiscardRatio = 0.5
	// valueThreshold is Badger's value threshold: a value shorter than it
	// stays in the LSM tree (the write-ahead log, then tables), a longer
	// one goes to the value log. It is Badger's maximum (1 MiB), and the
	// store refuses values that are not shorter (MaxValueBytes), so
	// nothing is ever written to the value log. See MaxValueBytes for why.
	valueThreshold = MaxValueBytes + 1
	// badgerLockFile is where Badger writes the pid of the process holding
	// the directory lock; we read it to name the other process.
	badgerLockFile = "LOCK"
)

// Badger is the durable Store, an embedded Badger database. Every write that
// returns nil has been synced to disk, but for CommitUnsynced's.
//
// Open it once per process with OpenBadger and share it; a second open of the
// same directory fails with ErrInUse.
type Badger struct {
	db     *badger.DB
	path   string
	logger *zap.Logger
	space  *spaceGuard
	// closeNeeds is the free space Badger's Close needs to flush the
	// memtables.
	closeNeeds uint64
	// inventory is what the inventory file says while the store is open;
	// only the GC goroutine changes it after open.
	inventory inventory

	gate opGate
	// writeMu orders the writes with the syncs that make them durable
	// (see update): Badger syncs only its newest write-ahead log and
	// value log file, so no other write may move those on between a
	// write and its sync.
	writeMu sync.Mutex
	// wal is the id of the write-ahead log Badger writes to (see
	// advanceWAL); guarded by writeMu.
	wal uint32

	stopGC chan struct{}
	gcDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

var _ Store = (*Badger)(nil)

// OpenBadger opens (creating if needed) the Badger database in the directory
// path. It fails with an error wrapping ErrInUse when another process, or an
// earlier OpenBadger in this one, holds the directory; wrapping ErrNoSpace
// when its filesystem has too little free space to write safely; wrapping
// ErrCorrupt when its files are damaged or inconsistent; and naming the
// file when one is not writable. None of these changes a file.
//
// ctx only guards the start: Badger's open (replaying its write-ahead log)
// cannot be interrupted.
func OpenBadger(ctx context.Context, path string, logger *zap.Logger) (*Badger, error) {
	return openBadger(ctx, path, logger, openConfig{})
}

// openConfig holds what tests replace; the zero value is production.
type openConfig struct {
	gcInterval time.Duration
	freeSpace  freeSpaceFunc
	now        func() time.Time
	// reserve overrides spaceReserve when non-zero.
	reserve uint64
	// descriptorsLeft overrides fdlimit.Left.
	descriptorsLeft func() (int, error)
	// walInterval overrides how often the inventory's highest write-ahead
	// log is brought up to date.
	walInterval time.Duration
}

func openBadger(ctx context.Context, path string, logger *zap.Logger, oc openConfig) (*Badger, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if oc.gcInterval == 0 {
		oc.gcInterval = defaultGCInterval
	}
	if oc.walInterval == 0 {
		oc.walInterval = defaultWALInterval
	}
	if oc.freeSpace == nil {
		oc.freeSpace = statfsFree
	}
	if oc.now == nil {
		oc.now = time.Now
	}
	if path == "" {
		return nil, errors.New("open badger database: path is empty")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	logger = logger.Named("store")

	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("open badger database at %s: %w", path, err)
	}

	opts := badgerOptions(path, logger)
	guard := &spaceGuard{path: path, reserve: oc.reserve, free: oc.freeSpace, now: oc.now, logger: logger,
		descriptors: newDescriptorGuard(path, oc.now, logger)}
	if oc.descriptorsLeft != nil {
		guard.descriptors.left = oc.descriptorsLeft
	}
	if guard.reserve == 0 {
		guard.reserve = spaceReserve(opts)
	}
	inv, err := checkBeforeOpen(path, opts, guard, logger)
	if err != nil {
		return nil, err
	}

	db, err := openRecovered(opts)
	if err != nil {
		if isLockHeld(err) {
			logger.Debug("badger directory lock is held", zap.String("path", path), zap.Error(err))
			return nil, newInUseError(path)
		}
		if isNoSpace(err) {
			return nil, newNoSpaceError(path, 0, 0)
		}
		// %v, not %w: Badger's errors must not become part of our API.
		return nil, fmt.Errorf("open badger database at %s: %v", path, err)
	}

	b := &Badger{
		db:        db,
		path:      path,
		logger:    logger,
		space:     guard,
		inventory: inv,
		// Each memtable becomes a table of at most its size.
		closeNeeds: uint64(opts.NumMemtables)*uint64(opts.MemTableSize) + spaceCheckBytes,
		stopGC:     make(chan struct{}),
		gcDone:     make(chan struct{}),
	}
	// The write-ahead log Badger opened for new writes: its blocks
	// allocated before anything is written to it, the next one prepared.
	wals := &walAllocator{dir: path, size: 2 * opts.MemTableSize, logger: logger}
	if err := wals.start(); err != nil {
		_ = db.Close()
		if errors.Is(err, ErrNoSpace) {
			return nil, err
		}
		return nil, fmt.Errorf("open badger database at %s: %w", path, err)
	}
	guard.mu.Lock()
	guard.wals = wals
	guard.mu.Unlock()
	if err := b.recordWALs(); err != nil {
		_ = db.Close()
		return nil, err
	}
	files, err := listStoreFiles(path)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open badger database at %s: %w", path, err)
	}
	b.wal = files.highestWAL()
	go b.runGC(oc.gcInterval, oc.walInterval)
	return b, nil
}

// checkBeforeOpen refuses what Badger would crash on, or silently lose data
// on: a directory or file it cannot write, too little free space (on open
// Badger flushes the write-ahead logs it replayed, through memory mappings),
// damaged files, a store that is not as conduit left it. The lock is checked
// first so that a second process gets ErrInUse, not a complaint about files
// the first one is writing. Once the store passed, it moves proven leftover
// tables out of Badger's way and records in the inventory that the store is
// open (not cleanly closed), which it returns.
func checkBeforeOpen(path string, opts badger.Options, guard *spaceGuard, logger *zap.Logger) (inventory, error) {
	if lockHeldByOther(path) {
		return inventory{}, newInUseError(path)
	}
	if err := checkWritable(path); err != nil {
		return inventory{}, err
	}
	// Measured here rather than through guard.admit, whose log line speaks
	// of refused writes; the error says it all.
	if free, err := guard.free(path); err == nil && free < guard.reserve {
		return inventory{}, newNoSpaceError(path, free, guard.reserve)
	}
	inv, found, err := readInventory(path)
	if err != nil {
		return inventory{}, err
	}
	var last *inventory
	if found {
		last = &inv
	}
	leftovers, err := checkFiles(path, opts, last, logger)
	if err == nil && lockHeldByOther(path) {
		err = newInUseError(path)
	}
	if err != nil {
		// A process that started at the same moment may have taken the
		// lock since, and its writes look like damage to the checks.
		if lockHeldByOther(path) {
			return inventory{}, newInUseError(path)
		}
		return inventory{}, err
	}
	if err := setAside(path, leftovers, logger); err != nil {
		return inventory{}, err
	}
	if err := removePreparedWALs(path); err != nil {
		return inventory{}, err
	}
	// From here until a clean Close, the store may change in any way Badger
	// changes it; only the highest write-ahead log is tracked.
	open := inventory{HighestWAL: inv.HighestWAL}
	if err := writeInventory(path, open); err != nil {
		return inventory{}, fmt.Errorf("open badger database at %s: %w", path, err)
	}
	return open, nil
}

// openRecovered is badger.Open with its panics (those in the calling
// goroutine) turned into errors. Panics in the goroutines Badger starts
// cannot be caught; checkBeforeOpen rules out the causes we know.
func openRecovered(opts badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("badger panicked while opening: %v", r)
		}
	}()
	return badger.Open(opts)
}

// badgerOptions chooses Badger's options for our workload: small, frequent,
// synced writes (positions, dedup entries, audit events, pipeline state) in a
// process that must stay well under 300 MiB RSS while the engine moves
// records. Badger's defaults target a large database server (64 MiB x 5
// memtables, a 256 MiB block cache, 1 GiB value log files), which alone would
// blow that budget.
func badgerOptions(path string, logger *zap.Logger) badger.Options {
	return badger.DefaultOptions(path).
		// Every write that returns nil must survive a crash: the dedup and
		// position contracts (DESIGN 3, 6) depend on it. The store syncs
		// after each write itself (see update) rather than letting Badger
		// sync every write: a write that only has to survive a crash of
		// the process (CommitUnsynced) is then done once it is in the
		// memory-mapped logs, without waiting for the disk. The runtime
		// writes through one Batcher, so commits did not share syncs
		// through Badger's write pipeline anyway.
		WithSyncWrites(false).
		// Write buffering dominates Badger's heap: each memtable is an arena
		// of MemTableSize, and flushing one builds the whole L0 table in
		// memory (2x MemTableSize, pooled). Writing 1M small keys flat out,
		// anonymous RSS peaked near 135 MiB at 8 MiB x 2 and 275 MiB at
		// 16 MiB x 3 (the defaults are 64 MiB x 5). The price: a transaction
		// may use at most 15% of a memtable, so a Commit holds ~1.2 MiB or
		// ~13k entries.
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		// No value goes to the value log (see MaxValueBytes): it is
		// written through a memory mapping conduit cannot allocate ahead.
		// A value of up to 1 MiB in an 8 MiB memtable is well within
		// Badger's limit of 15% of a memtable per transaction.
		WithValueThreshold(valueThreshold).
		// Smaller value log files are mapped in smaller pieces and can be
		// reclaimed by GC one at a time sooner.
		WithValueLogFileSize(64 << 20).
		// Values are short and mostly incompressible (positions, ids). Without
		// compression (and encryption) Badger reads blocks straight from the
		// mmapped tables, so the block cache would only duplicate them.
		WithCompression(options.None).
		WithBlockCacheSize(0).
		// Bound the memory for table indices and bloom filters; the default
		// (0) keeps all of them on the heap, growing with the database.
		WithIndexCacheSize(16 << 20).
		// We never read old versions; keeping one lets compaction drop the rest.
		WithNumVersionsToKeep(1).
		// Two is Badger's minimum for compaction to work; more only adds
		// goroutines and memory for a database this small.
		WithNumCompactors(2).
		// Badger's metrics go to the global expvar registry; we export our
		// own through Prometheus.
		WithMetricsEnabled(false).
		WithLogger(badgerLogger{logger.Sugar()})
}

// isLockHeld reports whether err is Badger failing to take its directory
// lock. Badger flattens the cause into text (y.Wrapf uses %+v, not %w), so we
// match its message, which is the same on unix, aix and windows, and keep the
// errno check for a Badger that wraps properly.
func isLockHeld(err error) bool {
	if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "another process is using this badger database") ||
		strings.Contains(msg, "cannot acquire directory lock")
}

// inUseError names the directory (and, when Badger recorded it, the pid of
// the holder) so an operator knows which process to look for.
type inUseError struct {
	path string
	pid  int
}

func newInUseError(path string) *inUseError {
	e := &inUseError{path: path}
	if abs, err := filepath.Abs(path); err == nil {
		e.path = abs
	}
	if raw, err := os.ReadFile(filepath.Join(path, badgerLockFile)); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			e.pid = pid
		}
	}
	return e
}

func (e *inUseError) Error() string {
	if e.pid > 0 {
		return fmt.Sprintf("database %s is in use by another conduit process (pid %d)", e.path, e.pid)
	}
	return fmt.Sprintf("database %s is in use by another conduit process", e.path)
}

func (e *inUseError) Unwrap() error { return ErrInUse }

// Get returns a copy of the value of key, or ErrNotFound.
func (b *Badger) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := b.begin(ctx, key); err != nil {
		return nil, err
	}
	defer b.gate.leave()

	var val []byte
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	if err == nil && val == nil {
		// An empty value comes back nil from Badger; return it as empty so
		// callers never mistake "found, empty" for "no value".
		val = []byte{}
	}
	if err != nil {
		return nil, b.translate("get", key, err)
	}
	return val, nil
}

// Commit applies ops in one synced transaction. It reads only the keys
// of ops with an Expect, under writeMu as every write of the store: no
// other write can come between the check and the commit.
func (b *Badger) Commit(ctx context.Context, ops []Op) error {
	return b.commit(ctx, ops, true)
}

// CommitUnsynced is Commit without the sync: it returns once the
// transaction is in Badger's memory-mapped logs, in the operating system's
// page cache. It survives a crash of the process (a SIGKILL) as a synced
// one does, but not a crash of the machine unless a sync came after it:
// the next synced commit to the same write-ahead log, Badger's flush of
// that log into a table, or a clean close.
func (b *Badger) CommitUnsynced(ctx context.Context, ops []Op) error {
	return b.commit(ctx, ops, false)
}

func (b *Badger) commit(ctx context.Context, ops []Op, durable bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	if !b.gate.enter() {
		return ErrClosed
	}
	defer b.gate.leave()
	var size uint64
	for _, op := range ops {
		if err := checkWrite(op); err != nil {
			return err
		}
		size += entrySize(op.Key, op.Value)
	}
	if err := b.space.admit(size); err != nil {
		return err
	}
	// Badger holds on to keys and values only until the commit returns, so
	// the caller's slices need no copy.
	err := b.update(func(txn *badger.Txn) error {
		for _, op := range ops {
			if op.Expect != nil {
				if err := expectHolds(txn, op); err != nil {
					return err
				}
			}
		}
		for _, op := range ops {
			var err error
			if op.Delete {
				err = txn.Delete(op.Key)
			} else {
				err = txn.Set(op.Key, op.Value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}, durable)
	if errors.Is(err, ErrConflict) {
		return err
	}
	if err != nil {
		return b.translate("commit", nil, err)
	}
	return nil
}

// expectHolds returns ErrConflict unless op's key holds what its Expect
// says in txn.
func expectHolds(txn *badger.Txn, op Op) error {
	item, err := txn.Get(op.Key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		if op.Expect.holds(nil, false) {
			return nil
		}
		return conflictError(op.Key)
	}
	if err != nil {
		return err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return err
	}
	if op.Expect.holds(v, true) {
		return nil
	}
	return conflictError(op.Key)
}

// update runs fn in one Badger transaction and, when durable, makes it
// durable (with the earlier writes of its write-ahead log) before it
// returns.
//
// A write lands in one write-ahead log (Badger moves to a new one before a
// write, never in the middle of one), the one advanceWAL follows under
// writeMu, which every write of the store takes (value log GC, Badger's
// only write of its own, too: see valueLogGC). No write puts a value in
// the value log (MaxValueBytes), so the write-ahead log holds all of it. A
// write without sync is made durable by the next synced one's sync when
// it is in the same log, or when Badger flushes its log into a table;
// either way it survives the process's crash at once.
func (b *Badger) update(fn func(*badger.Txn) error, durable bool) error {
	b.writeMu.Lock()
	if err := b.db.Update(fn); err != nil {
		b.writeMu.Unlock()
		return err
	}
	b.advanceWAL()
	if !durable {
		b.writeMu.Unlock()
		return nil
	}
	wal := b.walPath(b.wal)
	if _, err := os.Stat(wal); err != nil {
		// advanceWAL lost track of the log (it cannot tell a file Badger
		// has not created yet): Badger's Sync knows its files, with
		// writeMu held until it is done.
		defer b.writeMu.Unlock()
		if err := b.db.Sync(); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		return nil
	}
	b.writeMu.Unlock()
	// The log is synced by its name, so later writes need not wait for
	// the sync (an unsynced commit meanwhile is not held up by it) and
	// may move Badger to a new log meanwhile. A log that is gone was
	// flushed into a table, which Badger syncs before it deletes the log.
	// Badger writes a value shorter than valueThreshold (every value the
	// store takes) to the write-ahead log only, so that file is enough: Badger's Sync would also sync the
	// value log, and on ext4 the fsync of an unchanged file still flushes
	// the device's cache, which on a busy disk took tens of milliseconds.
	f, err := os.Open(wal)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync the write-ahead log: %w", err)
	}
	defer f.Close()
	if err := syncData(f); err != nil {
		return fmt.Errorf("sync the write-ahead log: %w", err)
	}
	return nil
}

// advanceWAL follows Badger to its next write-ahead log: Badger moves to
// a new log (the next id) before a write when the memtable is full, and
// the file has a size once Badger took it (one conduit prepared ahead is
// empty until then). Called under writeMu after each write.
func (b *Badger) advanceWAL() {
	for {
		fi, err := os.Stat(b.walPath(b.wal + 1))
		if err != nil || fi.Size() == 0 {
			return
		}
		b.wal++
	}
}

// walPath is the file of Badger's write-ahead log id (Badger names them
// so).
func (b *Badger) walPath(id uint32) string {
	return filepath.Join(b.path, fmt.Sprintf("%05d.mem", id))
}

// syncFiles fsyncs the store's files of the given extensions (".mem",
// ".vlog"). A file Badger deleted meanwhile holds nothing to sync.
func (b *Badger) syncFiles(exts ...string) error {
	entries, err := os.ReadDir(b.path)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !slices.Contains(exts, filepath.Ext(e.Name())) {
			continue
		}
		f, err := os.Open(filepath.Join(b.path, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = f.Sync()
			_ = f.Close()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sync %s: %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// Scan calls fn for every key with prefix, in key order, on a consistent
// snapshot: writes made while scanning (also by fn) are not seen.
func (b *Badger) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return b.iterate(ctx, "scan", prefix, nil, false, fn)
}

// ScanFrom is Scan from the first key >= start; see Store.ScanFrom.
func (b *Badger) ScanFrom(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	return b.iterate(ctx, "scan", prefix, start, false, fn)
}

// ScanReverse is Scan backwards from the last key <= start; see
// Store.ScanReverse.
func (b *Badger) ScanReverse(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	return b.iterate(ctx, "reverse scan", prefix, start, true, fn)
}

// sharedPrefix is the longest prefix a and b have in common.
func sharedPrefix(a, b []byte) []byte {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

// iterate is the one loop behind the scans. Forward, it seeks to the larger
// of prefix and start. Backward, Badger's Seek finds the largest key <= the
// one given, so it seeks to start or, unbounded, to the first key after the
// prefix (skipped if it exists).
func (b *Badger) iterate(ctx context.Context, op string, prefix, start []byte, reverse bool, fn func(key, value []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !b.gate.enter() {
		return ErrClosed
	}
	defer b.gate.leave()

	seek := prefix
	// pastPrefix: the seek is to the first key after the prefix, which is
	// skipped if it exists (skip), or, when there is none, to the end.
	pastPrefix := false
	var skip []byte
	switch {
	case !reverse:
		if bytes.Compare(start, prefix) > 0 {
			seek = start
		}
	case len(start) > 0 && bytes.HasPrefix(start, prefix):
		seek = start
	case len(start) > 0 && bytes.Compare(start, prefix) < 0:
		return nil // every key with the prefix is above start
	default:
		// Unbounded, or bounded above the whole prefix.
		seek = prefixEnd(prefix)
		skip = seek
		pastPrefix = true
	}

	// stopErr is an error that must reach the caller untouched: fn's own, or
	// the context's.
	var stopErr error
	err := b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		// Values are read in place inside item.Value below, valid for the
		// duration of fn; prefetching would copy every value first.
		opts.PrefetchValues = false
		opts.Reverse = reverse
		// Lets Badger skip tables whose key range misses the prefix: the
		// iterator otherwise opens every table, and a read right after a
		// burst of writes (many level-0 tables not yet compacted) pays for
		// all of them. When seeking past the prefix, the part the prefix
		// shares with the key there: Valid() must still accept that key,
		// which is stepped over.
		opts.Prefix = prefix
		if pastPrefix {
			opts.Prefix = sharedPrefix(prefix, seek)
		}
		it := txn.NewIterator(opts)
		defer it.Close()

		// A nil seek in reverse (no key follows the prefix) rewinds to the
		// last key of the database.
		it.Seek(seek)
		if skip != nil && it.Valid() && bytes.Equal(it.Item().Key(), skip) {
			it.Next()
		}
		done := ctx.Done()
		for ; it.ValidForPrefix(prefix); it.Next() {
			select {
			case <-done:
				stopErr = ctx.Err()
				return stopErr
			default:
			}
			item := it.Item()
			err := item.Value(func(val []byte) error {
				stopErr = fn(item.Key(), val)
				return stopErr
			})
			if stopErr != nil {
				return stopErr
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if stopErr != nil {
		return stopErr
	}
	if err != nil {
		return b.translate(op, prefix, err)
	}
	return nil
}

// Close stops value log GC, waits for operations in flight and closes the
// database, releasing the directory lock. It must not be called from inside
// a Scan callback of the same store.
func (b *Badger) Close() error {
	b.closeOnce.Do(func() {
		b.gate.closeAndWait()
		close(b.stopGC)
		<-b.gcDone
		// Badger's Close writes the memtables into tables through memory
		// mappings; on a filesystem another process filled, that copy ends
		// the process with SIGBUS. Without room for it, the store is left
		// as a crash leaves it: every write that returned nil is in the
		// synced write-ahead log, which the next open replays. The
		// directory lock goes with the process.
		if free, err := b.space.free(b.path); err == nil && free < b.closeNeeds {
			b.logger.Warn("too little free space to close the database cleanly: it is left as after a crash, and the next start replays its write-ahead log (nothing is lost)",
				zap.String("path", b.path), zap.String("free", formatBytes(free)), zap.String("needed", formatBytes(b.closeNeeds)))
			// Commits made without a sync are in the logs too; synced,
			// they also survive a crash of the machine after this stop.
			if err := b.db.Sync(); err != nil {
				b.closeErr = fmt.Errorf("sync badger database at %s: %v", b.path, err)
			}
			return
		}
		if err := b.db.Close(); err != nil {
			b.closeErr = fmt.Errorf("close badger database at %s: %v", b.path, err)
			return
		}
		// The prepared write-ahead log is conduit's own and empty; Badger
		// numbers its logs from 1 again after a clean close.
		err := removePreparedWALs(b.path)
		// Only now is the directory as the next open must find it.
		inv, ierr := takeInventory(b.path)
		err = errors.Join(err, ierr)
		if err == nil {
			err = writeInventory(b.path, inv)
		}
		if err != nil {
			// The store is closed and whole; the next open only checks
			// it as after a crash.
			b.logger.Warn("could not record the store's files after closing it; the next start checks it as after a crash", zap.Error(err))
		}
	})
	return b.closeErr
}

// begin does the checks common to single-key operations and enters the gate;
// on nil the caller must call b.gate.leave.
func (b *Badger) begin(ctx context.Context, key []byte) error {
	if err := checkOp(ctx, key); err != nil {
		return err
	}
	if !b.gate.enter() {
		return ErrClosed
	}
	return nil
}

// runGC reclaims value log space in the background until Close.
func (b *Badger) runGC(interval, walInterval time.Duration) {
	defer close(b.gcDone)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	walTicker := time.NewTicker(walInterval)
	defer walTicker.Stop()
	walRecordFailing := false // warn once per spell of failures
	for {
		select {
		case <-b.stopGC:
			return
		case <-walTicker.C:
			err := b.recordWALs()
			if err != nil && !walRecordFailing {
				b.logger.Warn("could not record the store's write-ahead logs; after a crash, a missing one may go unnoticed", zap.Error(err))
			}
			walRecordFailing = err != nil
			continue
		case <-ticker.C:
		}
		if b.space.refusing() {
			// GC rewrites live values before it frees a file: writes the
			// disk may not have room for.
			continue
		}
		// One call rewrites at most one file; keep going while it finds work.
		for {
			select {
			case <-b.stopGC:
				return
			default:
			}
			err := b.valueLogGC()
			if err == nil {
				continue
			}
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				b.logger.Warn("value log GC failed", zap.Error(err))
			}
			break
		}
	}
}

// valueLogGC rewrites at most one value log file. Badger writes the
// values it moves without a sync (the store does not let Badger sync, see
// update) and then deletes the old file: a crash of the machine could then
// lose values that were durable. So the file is kept until the moved
// values are synced: an open iterator makes Badger defer the deletion
// until the last iterator closes. Writes wait meanwhile (writeMu), so that
// the moved values are in logs the sync reaches; a GC that finds nothing
// to rewrite returns at once.
func (b *Badger) valueLogGC() error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	txn := b.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{})
	defer it.Close()
	err := b.db.RunValueLogGC(gcDiscardRatio)
	b.advanceWAL()
	if err != nil {
		return err
	}
	if err := b.db.Sync(); err != nil {
		return fmt.Errorf("sync after value log GC: %w", err)
	}
	// The moved values may have filled a write-ahead log or a value log
	// file, which Badger's Sync no longer reaches.
	return b.syncFiles(".mem", ".vlog")
}

// recordWALs brings the inventory's highest write-ahead log up to date.
// Badger deletes a write-ahead log only after its data is in a table listed
// in the MANIFEST, so after a crash the one recorded here must still be
// there. It runs in open and then in the GC goroutine only.
func (b *Badger) recordWALs() error {
	files, err := listStoreFiles(b.path)
	if err != nil {
		return err
	}
	top := files.highestWAL()
	if top <= b.inventory.HighestWAL {
		return nil
	}
	next := b.inventory
	next.HighestWAL = top
	if err := writeInventory(b.path, next); err != nil {
		return err
	}
	b.inventory = next
	return nil
}

// translate is the package's translate, with the operating system running
// out of space (which the guard should have prevented) named as such.
func (b *Badger) translate(op string, key []byte, err error) error {
	if isNoSpace(err) {
		return newNoSpaceError(b.path, 0, 0)
	}
	return translate(op, key, err)
}

// entrySize is what one write of key and value costs in the write-ahead log.
func entrySize(key, value []byte) uint64 {
	return uint64(len(key) + len(value) + entryOverhead)
}

// translate turns a Badger error into this package's vocabulary. Other errors
// are flattened with %v so that no Badger sentinel becomes part of our API.
func translate(op string, key []byte, err error) error {
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		// Bare, not wrapped: a miss is the common case on the dedup path and
		// should not allocate.
		return ErrNotFound
	case errors.Is(err, badger.ErrDBClosed):
		return ErrClosed
	case errors.Is(err, badger.ErrTxnTooBig):
		return fmt.Errorf("%s: %w", op, ErrTxnTooBig)
	case key != nil:
		return fmt.Errorf("%s %q: %v", op, key, err)
	default:
		return fmt.Errorf("%s: %v", op, err)
	}
}

// opGate lets Close wait for operations in flight without a read-write lock:
// an RWMutex would deadlock when a Scan callback calls Get while Close waits.
// Here a nested call made during Close just gets ErrClosed.
type opGate struct {
	mu       sync.Mutex
	closed   bool
	inflight int
	idle     chan struct{} // closed when the last operation leaves after close
}

// enter registers an operation; false means the store is closed.
func (g *opGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.inflight++
	return true
}

// leave ends an operation started by a successful enter.
func (g *opGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if g.inflight == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// closeAndWait refuses new operations and waits for those in flight. It is
// called once (under Badger.closeOnce).
func (g *opGate) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	if g.inflight == 0 {
		g.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	g.idle = idle
	g.mu.Unlock()
	<-idle
}

// badgerLogger sends Badger's log lines to zap. Badger is chatty at Info
// (every open, flush and compaction), which is debug detail for our users.
type badgerLogger struct {
	l *zap.SugaredLogger
}

func (l badgerLogger) Errorf(f string, v ...any) { l.l.Errorf(trimNewline(f), v...) }

func (l badgerLogger) Warningf(f string, v ...any) { l.l.Warnf(trimNewline(f), v...) }

func (l badgerLogger) Infof(f string, v ...any) { l.l.Debugf(trimNewline(f), v...) }

func (l badgerLogger) Debugf(f string, v ...any) { l.l.Debugf(trimNewline(f), v...) }

// trimNewline drops the trailing newline Badger puts on most formats, which
// would otherwise end up inside zap's message field.
func trimNewline(f string) string { return strings.TrimRight(f, "\n") }
