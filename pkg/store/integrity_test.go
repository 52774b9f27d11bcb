package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// storeWithTable builds a closed database in a new directory whose keys
// live in a table file (Close flushes the memtable) and returns the
// directory and the table's path.
func storeWithTable(t *testing.T) (dir, sst string) {
	t.Helper()
	dir = t.TempDir()
	s, err := OpenBadger(context.Background(), dir, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]Op, 0, 1000)
	for i := range 1000 {
		ops = append(ops, Op{Key: fmt.Appendf(nil, "%s%04d", PrefixPosition, i), Value: []byte(strings.Repeat("v", 100))})
	}
	if err := s.Commit(context.Background(), ops); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) != 1 {
		t.Fatalf("want one table file after Close, got %v", tables)
	}
	return dir, tables[0]
}

func TestBadgerOpenRefusesDamagedFiles(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(t *testing.T, dir, sst string)
		wantMsg string
	}{
		{
			name:    "MANIFEST deleted",
			damage:  func(t *testing.T, dir, _ string) { mustRemove(t, filepath.Join(dir, manifestFile)) },
			wantMsg: "MANIFEST is missing",
		},
		{
			name:    "MANIFEST truncated to 0",
			damage:  func(t *testing.T, dir, _ string) { mustTruncate(t, filepath.Join(dir, manifestFile), 0) },
			wantMsg: "MANIFEST is empty",
		},
		{
			name: "MANIFEST garbage",
			damage: func(t *testing.T, dir, _ string) {
				mustWriteAt(t, filepath.Join(dir, manifestFile), 0, []byte("garbage!"))
			},
			wantMsg: "MANIFEST is unreadable",
		},
		{
			name: "table footer: checksum length out of range",
			damage: func(t *testing.T, _, sst string) {
				mustWriteAt(t, sst, fileSize(t, sst)-4, []byte{0xff, 0xff, 0xff, 0x00})
			},
			wantMsg: "checksum length",
		},
		{
			name:    "table footer: index length out of range",
			damage:  func(t *testing.T, _, sst string) { corruptIndexLen(t, sst) },
			wantMsg: "index length",
		},
		{
			name:    "table truncated",
			damage:  func(t *testing.T, _, sst string) { mustTruncate(t, sst, fileSize(t, sst)/2) },
			wantMsg: "table",
		},
		{
			name:    "table block bit flip",
			damage:  func(t *testing.T, _, sst string) { flipByte(t, sst, 100) },
			wantMsg: "checksum mismatch",
		},
		{
			name:    "KEYREGISTRY cut inside its sanity text",
			damage:  func(t *testing.T, dir, _ string) { mustTruncate(t, filepath.Join(dir, keyRegistryFile), 20) },
			wantMsg: "KEYREGISTRY is damaged or cut short (20 bytes",
		},
		{
			name:    "KEYREGISTRY cut to its IV",
			damage:  func(t *testing.T, dir, _ string) { mustTruncate(t, filepath.Join(dir, keyRegistryFile), 16) },
			wantMsg: "KEYREGISTRY is damaged or cut short (16 bytes",
		},
		{
			name:    "KEYREGISTRY empty",
			damage:  func(t *testing.T, dir, _ string) { mustTruncate(t, filepath.Join(dir, keyRegistryFile), 0) },
			wantMsg: "KEYREGISTRY is damaged or cut short (0 bytes",
		},
		{
			name: "KEYREGISTRY sanity text changed",
			damage: func(t *testing.T, dir, _ string) {
				mustWriteAt(t, filepath.Join(dir, keyRegistryFile), 16, []byte("Hello Bodger"))
			},
			wantMsg: "KEYREGISTRY is damaged or cut short (28 bytes",
		},
		{
			name:    "table missing",
			damage:  func(t *testing.T, _, sst string) { mustRemove(t, sst) },
			wantMsg: "listed in MANIFEST is missing",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, sst := storeWithTable(t)
			tt.damage(t, dir, sst)
			before := listDir(t, dir)

			s, err := OpenBadger(context.Background(), dir, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
			if err == nil {
				_ = s.Close()
				t.Fatal("OpenBadger of a damaged database succeeded")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("got %v, want an error wrapping ErrCorrupt", err)
			}
			for _, want := range []string{"database " + dir + " is corrupted", tt.wantMsg, "restore the whole directory from a backup"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			// Nothing was deleted or changed.
			if after := listDir(t, dir); after != before {
				t.Errorf("the refused open changed the directory:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestBadgerOpenWithoutManifestOrData(t *testing.T) {
	// A directory with no data files and no inventory opens whether a
	// MANIFEST is there or not: a new database, or one that never flushed
	// a table.
	dir := t.TempDir()
	s := openTestBadger(t, dir)
	mustSet(t, s, "k", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"*.sst", "*.vlog", manifestFile, inventoryFile} {
		matches, _ := filepath.Glob(filepath.Join(dir, name))
		for _, m := range matches {
			mustRemove(t, m)
		}
	}
	s = openTestBadger(t, dir)
	mustSet(t, s, "k2", "v")
}

func TestBadgerWarnsWhenReplayDropsALogTail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestBadger(t, dir)
	mustSet(t, s, "first", "v1")
	mustSet(t, s, "last", "v2")

	// A copy of the files while the database is open is what a crash
	// leaves behind: the write-ahead log, not yet flushed to a table.
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	wals := nonEmptyWALs(t, crashed)
	if len(wals) != 1 {
		t.Fatalf("want one write-ahead log in the copy, got %v", wals)
	}
	// Damage the last transaction (the write of "last").
	replay, err := logTail(wals[0])
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, wals[0], replay.tail-1)

	core, logs := observer.New(zapcore.WarnLevel)
	s2, err := OpenBadger(ctx, crashed, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	wantValue(t, s2, "first", "v1")
	wantMissing(t, s2, "last")

	warned := logs.FilterMessageSnippet("write-ahead log replay stops before its end").All()
	if len(warned) != 1 {
		t.Fatalf("want one warning about the dropped tail, got %v", logs.All())
	}
	if got := warned[0].ContextMap()["path"]; got != wals[0] {
		t.Errorf("warning names %v, want %s", got, wals[0])
	}
}

func TestBadgerNoReplayWarningAfterCleanWrites(t *testing.T) {
	dir := t.TempDir()
	s := openTestBadger(t, dir)
	mustSet(t, s, "a", "v")
	crashed := t.TempDir()
	copyDir(t, dir, crashed)

	core, logs := observer.New(zapcore.WarnLevel)
	s2, err := OpenBadger(context.Background(), crashed, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	wantValue(t, s2, "a", "v")
	if n := logs.Len(); n != 0 {
		t.Errorf("want no warnings, got %v", logs.All())
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func mustTruncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func mustWriteAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// corruptIndexLen sets the index length in a table's footer (just before
// the checksum) to more than the file holds.
func corruptIndexLen(t *testing.T, sst string) {
	t.Helper()
	data, err := os.ReadFile(sst)
	if err != nil {
		t.Fatal(err)
	}
	n := len(data)
	chkLen := int(data[n-4])<<24 | int(data[n-3])<<16 | int(data[n-2])<<8 | int(data[n-1])
	mustWriteAt(t, sst, int64(n-4-chkLen-4), []byte{0x7f, 0xff, 0xff, 0xff})
}

func listDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%d ", e.Name(), info.Size())
	}
	return b.String()
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == badgerLockFile {
			continue
		}
		src, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		_ = src.Close()
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// crashedStoreWithTable is storeWithTable, reopened and copied while open:
// what a crash leaves behind (the inventory says the store was open),
// with one more write in the write-ahead log.
func crashedStoreWithTable(t *testing.T) (dir, sst string) {
	t.Helper()
	closed, _ := storeWithTable(t)
	s := openTestBadger(t, closed)
	mustSet(t, s, "after-reopen", "v")
	dir = t.TempDir()
	copyDir(t, closed, dir)
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) != 1 {
		t.Fatalf("want one table file in the crashed copy, got %v", tables)
	}
	return dir, tables[0]
}

func TestBadgerOpenRefusesAStoreNotAsConduitLeftIt(t *testing.T) {
	tests := []struct {
		name    string
		crashed bool
		damage  func(t *testing.T, dir, sst string)
		wantMsg string
	}{
		{
			name:    "clean stop, MANIFEST cut to its header",
			damage:  func(t *testing.T, dir, _ string) { mustTruncate(t, filepath.Join(dir, manifestFile), 8) },
			wantMsg: "MANIFEST does not list table file(s) 000001.sst",
		},
		{
			name: "clean stop, MANIFEST cut by one byte",
			damage: func(t *testing.T, dir, _ string) {
				m := filepath.Join(dir, manifestFile)
				mustTruncate(t, m, fileSize(t, m)-1)
			},
			wantMsg: "MANIFEST does not list table file(s) 000001.sst",
		},
		{
			name: "clean stop, a table added (partial restore)",
			damage: func(t *testing.T, dir, sst string) {
				copyFile(t, sst, filepath.Join(dir, "000009.sst"))
			},
			wantMsg: "table 000009.sst was not part of the store conduit stopped",
		},
		{
			name:    "crash, MANIFEST cut to its header",
			crashed: true,
			damage:  func(t *testing.T, dir, _ string) { mustTruncate(t, filepath.Join(dir, manifestFile), 8) },
			wantMsg: "MANIFEST does not list table file(s) 000001.sst, which hold data found nowhere else",
		},
		{
			name:    "crash, write-ahead log deleted",
			crashed: true,
			damage: func(t *testing.T, dir, _ string) {
				wals, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
				for _, w := range wals {
					mustRemove(t, w)
				}
			},
			wantMsg: "write-ahead log 00001.mem is missing",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dir, sst string
			if tt.crashed {
				dir, sst = crashedStoreWithTable(t)
			} else {
				dir, sst = storeWithTable(t)
			}
			tt.damage(t, dir, sst)
			before := listDir(t, dir)

			s, err := OpenBadger(context.Background(), dir, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
			if err == nil {
				_ = s.Close()
				t.Fatal("OpenBadger of a damaged database succeeded")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("got %v, want an error wrapping ErrCorrupt", err)
			}
			for _, want := range []string{"database " + dir + " is corrupted", tt.wantMsg, "restore the whole directory from a backup"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if after := listDir(t, dir); after != before {
				t.Errorf("the refused open changed the directory:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestBadgerSetsAsideALeftoverTableAfterACrash(t *testing.T) {
	// A compaction a crash interrupted leaves its output unlisted while its
	// inputs are still listed: a copy of a listed table under a newer id is
	// that, as far as versions tell. Badger would delete it; it is moved
	// aside and the data is all there.
	dir, sst := crashedStoreWithTable(t)
	copyFile(t, sst, filepath.Join(dir, "000007.sst"))

	core, logs := observer.New(zapcore.WarnLevel)
	s, err := OpenBadger(context.Background(), dir, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := os.Stat(filepath.Join(dir, setAsideDir, "000007.sst")); err != nil {
		t.Fatalf("leftover table not set aside: %v", err)
	}
	if n := logs.FilterMessageSnippet("set aside").Len(); n != 1 {
		t.Errorf("%d warnings about the table set aside, want 1: %v", n, logs.All())
	}
	wantValue(t, s, "after-reopen", "v")
	wantValue(t, s, string(PrefixPosition)+"0999", strings.Repeat("v", 100))
}

func TestBadgerReopensAfterCleanStopAndCrash(t *testing.T) {
	// The inventory must not refuse a store as conduit left it: clean stop,
	// reopen, crash copy, reopen, clean stop, reopen.
	dir, _ := crashedStoreWithTable(t)
	s := openTestBadger(t, dir)
	wantValue(t, s, "after-reopen", "v")
	mustSet(t, s, "third", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestBadger(t, dir)
	wantValue(t, s, "third", "v")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// nonEmptyWALs lists the write-ahead logs in dir Badger wrote, not the
// empty one conduit prepares for the next memtable.
func nonEmptyWALs(t *testing.T, dir string) []string {
	t.Helper()
	all, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	var wals []string
	for _, w := range all {
		if fileSize(t, w) > 0 {
			wals = append(wals, w)
		}
	}
	return wals
}
