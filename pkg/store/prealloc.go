package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// Badger writes its write-ahead logs (memtables) through memory mappings of
// files it extends with ftruncate, so their blocks are not allocated: when
// another process fills the filesystem between the free-space check and
// Badger's copy into the mapping, the kernel raises SIGBUS and the Go
// runtime ends the process, with no error to handle. The space guard keeps
// a reserve, which is enough when space runs out slowly, not when it goes
// all at once.
//
// walAllocator closes that gap for the write path: it creates the next
// write-ahead log file before Badger needs it, empty, with its blocks
// allocated beyond its end (fallocate with FALLOC_FL_KEEP_SIZE). Badger
// opens an existing empty file as a new one and extends it over the
// allocated blocks, so copying into the mapping never needs a block the
// filesystem no longer has. When the allocation fails for lack of space,
// the store refuses writes (code 507) until it succeeds, as for the reserve.
// Right after open, the write-ahead log Badger created is allocated in
// place, before anything is written to it.
//
// Tables, which Badger writes by itself when it flushes a memtable or
// compacts, are created with O_EXCL and cannot be prepared this way; the
// reserve is what protects them.
type walAllocator struct {
	dir  string
	size int64 // Badger's write-ahead log size: 2 x MemTableSize
	// next is the id of the file prepared (ready) or to prepare.
	next  uint32
	ready bool
	// unsupported is set when the filesystem cannot allocate ahead; the
	// store then writes as it did without it.
	unsupported bool
	logger      *zap.Logger
}

// discardFile is Badger's memory-mapped file of discard statistics.
const discardFile = "DISCARD"

// isPreparedWAL reports whether a write-ahead log file of size bytes is one
// conduit prepared and Badger has not taken yet: an empty write-ahead log file conduit created ahead of
// Badger; such a file holds nothing.
func isPreparedWAL(size int64) bool { return size == 0 }

// start allocates the write-ahead log Badger opened for new writes and
// prepares the next one. It runs after Badger's open and before the first
// write.
func (a *walAllocator) start() error {
	files, err := listStoreFiles(a.dir)
	if err != nil {
		return err
	}
	top := files.highestWAL()
	if top > 0 {
		if err := a.allocate(filepath.Join(a.dir, files.wals[top]), 0, false); err != nil {
			return err
		}
	}
	// Badger updates the discard statistics through a mapping too.
	if info, err := os.Stat(filepath.Join(a.dir, discardFile)); err == nil && info.Size() > 0 {
		if err := a.allocateSize(filepath.Join(a.dir, discardFile), info.Size()); err != nil {
			return err
		}
	}
	a.next = top + 1
	return a.ensure()
}

// ensure makes sure the next write-ahead log is prepared. It costs a stat
// when it is; it is called under the space guard's lock, at most every
// spaceCheckBytes of writes, which is well under a memtable.
func (a *walAllocator) ensure() error {
	if a.unsupported {
		return nil
	}
	if a.ready {
		info, err := os.Stat(filepath.Join(a.dir, walName(a.next)))
		if err == nil && isPreparedWAL(info.Size()) {
			return nil
		}
		// Badger took it (or flushed and deleted it since).
		a.ready = false
	}
	files, err := listStoreFiles(a.dir)
	if err != nil {
		return err
	}
	a.next = max(a.next, files.highestWAL()+1)
	path := filepath.Join(a.dir, walName(a.next))
	if info, err := os.Stat(path); err == nil && isPreparedWAL(info.Size()) {
		a.ready = true // prepared before, by start or an earlier call
		return nil
	}
	if err := a.allocate(path, os.O_CREATE|os.O_EXCL, true); err != nil {
		return err
	}
	a.ready = true
	return nil
}

// allocate allocates size bytes of blocks for the file at path; keepSize
// leaves its size as it is (0 for a prepared file). A new file (flags with
// O_CREATE) that cannot be allocated is removed again: it is conduit's own
// and empty.
func (a *walAllocator) allocate(path string, flags int, keepSize bool) error {
	return a.allocateFile(path, flags, a.size, keepSize)
}

// allocateSize allocates the blocks of the first size bytes of an existing
// file.
func (a *walAllocator) allocateSize(path string, size int64) error {
	return a.allocateFile(path, 0, size, false)
}

func (a *walAllocator) allocateFile(path string, flags int, size int64, keepSize bool) error {
	if a.unsupported {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|flags, 0o644)
	if err != nil {
		return fmt.Errorf("prepare write-ahead log %s: %w", path, err)
	}
	err = fallocate(f, size, keepSize)
	cerr := f.Close()
	if err == nil {
		err = cerr
	}
	if err == nil {
		return nil
	}
	if flags&os.O_CREATE != 0 {
		_ = os.Remove(path)
	}
	switch {
	case isNoSpace(err):
		return newNoSpaceError(a.dir, 0, uint64(size))
	case errors.Is(err, errFallocateUnsupported):
		a.unsupported = true
		a.logger.Warn("the database's filesystem cannot allocate files ahead: if another process fills it at once, a write may end the process (SIGBUS)",
			zap.String("path", a.dir), zap.Error(err))
		return nil
	default:
		return fmt.Errorf("prepare write-ahead log %s: %w", path, err)
	}
}

// removePreparedWALs removes the empty write-ahead log files a process that
// did not stop cleanly left prepared: Badger's open would take an empty
// file for a damaged one. They are conduit's own and hold nothing.
func removePreparedWALs(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".mem" || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || !isPreparedWAL(info.Size()) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("open badger database at %s: remove the empty write-ahead log %s conduit prepared: %w", dir, e.Name(), err)
		}
	}
	return nil
}
