//go:build linux

package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
)

// allocatedBytes is how much of path's data is backed by blocks.
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func TestBadgerPreparesTheNextWriteAheadLogWithItsBlocks(t *testing.T) {
	dir := t.TempDir()
	s := openTestBadger(t, dir)
	walSize := 2 * badgerOptions(dir, zap.NewNop()).MemTableSize

	// Right after open: the log Badger writes to is allocated, the next
	// one is prepared, empty, its blocks allocated beyond its end.
	if got := allocatedBytes(t, filepath.Join(dir, "00001.mem")); got < walSize {
		t.Errorf("00001.mem has %d bytes allocated, want %d", got, walSize)
	}
	wantPrepared(t, filepath.Join(dir, "00002.mem"), walSize)

	// Fill the memtable until Badger moves on to the prepared file; the
	// store prepares the one after it.
	value := []byte(strings.Repeat("v", 1000))
	for i := 0; ; i++ {
		if err := put(context.Background(), s, fmt.Appendf(nil, "%s%08d", PrefixPosition, i), value); err != nil {
			t.Fatal(err)
		}
		if fileSize(t, filepath.Join(dir, "00002.mem")) > 0 {
			break
		}
		if i > 100_000 {
			t.Fatal("Badger never started the second write-ahead log")
		}
	}
	if got := allocatedBytes(t, filepath.Join(dir, "00002.mem")); got < walSize {
		t.Errorf("00002.mem, taken by Badger, has %d bytes allocated, want %d", got, walSize)
	}
	// Past the next space check (spaceCheckBytes), in values the store
	// takes.
	for i := range 3 {
		mustSet(t, s, fmt.Sprint("one-more-", i), strings.Repeat("x", 400<<10))
	}
	wantPrepared(t, filepath.Join(dir, "00003.mem"), walSize)

}

func TestBadgerOpensWithThePreparedWriteAheadLogACrashLeft(t *testing.T) {
	// A crash leaves the prepared file behind; the next open removes it
	// (Badger would take an empty log for a damaged one) and opens.
	dir := t.TempDir()
	s := openTestBadger(t, dir)
	mustSet(t, s, "k", "v")
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	if _, err := os.Stat(filepath.Join(crashed, "00002.mem")); err != nil {
		t.Fatalf("no prepared write-ahead log in the crashed copy: %v", err)
	}
	s2 := openTestBadger(t, crashed)
	wantValue(t, s2, "k", "v")
}

func wantPrepared(t *testing.T, path string, size int64) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("next write-ahead log not prepared: %v", err)
	}
	if info.Size() != 0 {
		t.Errorf("%s is %d bytes, want a prepared empty file", path, info.Size())
	}
	if got := allocatedBytes(t, path); got < size {
		t.Errorf("%s has %d bytes allocated, want %d", path, got, size)
	}
}
