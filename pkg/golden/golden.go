// Package golden pins the bytes of what conduit persists (states, events,
// positions, dedup entries, catalog records, markers) in files under a
// package's testdata/: a test compares a record's encoding with its golden
// file, so that a change of a format is a decision (a new version and a
// reader for the old one), never an accident. `go test ./pkg/x -update`
// rewrites the files of the tests it runs.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// File compares got with testdata/name and returns the file's bytes; the
// test fails when they differ or the file is missing. With -update, got is
// written first.
func File(t testing.TB, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		if utf8.Valid(got) && utf8.Valid(want) {
			t.Fatalf("%s: the encoding changed (a new format needs a new version and a reader for the old one):\n got %s\nwant %s", path, got, want)
		}
		t.Fatalf("%s: the encoding changed (a new format needs a new version and a reader for the old one):\n got %x\nwant %x", path, got, want)
	}
	return want
}
