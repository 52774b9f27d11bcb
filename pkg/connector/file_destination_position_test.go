package connector

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
)

// lastPosition opens a run on path and returns what it reports.
func lastPosition(t *testing.T, path string, state State) (string, bool) {
	t.Helper()
	d, _ := fileDestRun(t, path, state)
	defer crash(t, d)
	pos, ok, err := d.LastPosition(context.Background())
	if err != nil {
		t.Fatalf("LastPosition: %v", err)
	}
	if pos == nil {
		return "<nil>", ok
	}
	return string(pos), ok
}

func TestFileDestinationReportsItsLastLine(t *testing.T) {
	t.Run("empty file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		if got, ok := lastPosition(t, path, &memState{}); got != "<nil>" || !ok {
			t.Fatalf("got %s %v, want nothing held", got, ok)
		}
	})
	t.Run("records", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		state := &memState{}
		d, _ := fileDestRun(t, path, state)
		writeRecords(t, d, "1", "2", "offset:4096")
		crash(t, d)
		if got, ok := lastPosition(t, path, state); got != "offset:4096" || !ok {
			t.Fatalf("got %s %v, want offset:4096", got, ok)
		}
	})
	t.Run("torn last line", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		state := &memState{}
		d, _ := fileDestRun(t, path, state)
		writeRecords(t, d, "1", "2")
		appendBytes(t, path, `{"position":"Mw==","operation":"cre`)
		crash(t, d)
		// Open cuts the torn line of record 3: the last record held is 2.
		if got, ok := lastPosition(t, path, state); got != "2" || !ok {
			t.Fatalf("got %s %v, want 2", got, ok)
		}
	})
	t.Run("foreign line after the records", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		state := &memState{}
		d, _ := fileDestRun(t, path, state)
		writeRecords(t, d, "1")
		if err := d.Teardown(context.Background()); err != nil {
			t.Fatal(err)
		}
		appendBytes(t, path, "written by someone else\n")
		// Not a line it wrote: it reports holding nothing it can name, so
		// the engine writes its last intents again rather than skip them.
		if got, ok := lastPosition(t, path, state); got != "<nil>" || !ok {
			t.Fatalf("got %s %v, want nil", got, ok)
		}
	})
	t.Run("a last line longer than the search", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		state := &memState{}
		d, _ := fileDestRun(t, path, state)
		writeRecords(t, d, "1")
		crash(t, d)
		d, _ = fileDestRun(t, path, state)
		defer crash(t, d)
		pos, ok, err := d.LastPosition(context.Background())
		if string(pos) != "1" || !ok || err != nil {
			t.Fatalf("within the search: %q %v %v, want 1", pos, ok, err)
		}
		// The same line, searched over fewer bytes than it holds: its start
		// is not found, and no position is named.
		d.maxLastLine = 16
		if pos, ok, err := d.LastPosition(context.Background()); pos != nil || !ok || err != nil {
			t.Fatalf("beyond the search: %q %v %v, want nil", pos, ok, err)
		}
	})
	t.Run("not a regular file", func(t *testing.T) {
		d, err := NewFileDestination(Config{Settings: map[string]string{"path": os.DevNull}})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer d.Teardown(context.Background())
		if _, ok, err := d.(PositionReporter).LastPosition(context.Background()); ok || err != nil {
			t.Fatalf("LastPosition on %s = ok %v, err %v; want it cannot tell", os.DevNull, ok, err)
		}
	})
}

// TestFileDestinationReportsItsLastLinesSource: in a pipeline of several
// sources, the source of the last line tells which source's position it
// is.
func TestFileDestinationReportsItsLastLinesSource(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	state := &memState{}
	d, _ := fileDestRun(t, path, state)
	recs := []record.Record{testRecord("7", record.RawData("a")), testRecord("7", record.RawData("b"))}
	recs[0].Metadata = record.Metadata{record.MetadataSourceConnectorID: "p:gen-a"}
	recs[1].Metadata = record.Metadata{record.MetadataSourceConnectorID: "p:gen-b", "other": `"quoted"`}
	if n, err := d.Write(ctx, recs); n != 2 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	crash(t, d)
	d, _ = fileDestRun(t, path, state)
	if src, err := d.LastSource(ctx); src != "p:gen-b" || err != nil {
		t.Fatalf("LastSource = %q, %v; want p:gen-b", src, err)
	}
	writeRecords(t, d, "8") // no metadata
	if src, err := d.LastSource(ctx); src != "" || err != nil {
		t.Fatalf("LastSource of a line without metadata = %q, %v; want none", src, err)
	}
	crash(t, d)
}

// The file destination says whether its lines are on the disk when Write
// returns: only with the sync setting. The engine keeps its dedup entries
// as durable as that.
func TestFileDestinationSaysWhetherItSyncs(t *testing.T) {
	for _, sync := range []string{"false", "true"} {
		d, err := NewFileDestination(Config{Settings: map[string]string{"path": filepath.Join(t.TempDir(), "out.jsonl"), "sync": sync}})
		if err != nil {
			t.Fatal(err)
		}
		sr, ok := d.(SyncReporter)
		if !ok {
			t.Fatal("the file destination does not say whether it syncs")
		}
		if got := sr.SyncsWrites(); got != (sync == "true") {
			t.Errorf("sync: %s: SyncsWrites %v", sync, got)
		}
	}
}

// heldSince opens a run on path and returns what it holds from offset on,
// as "position@source" per line.
func heldSince(t *testing.T, d *fileDestination, offset int64) ([]string, bool) {
	t.Helper()
	var held []string
	ok, err := d.HeldSince(context.Background(), offset, func(pos record.Position, source string) error {
		held = append(held, string(pos)+"@"+source)
		return nil
	})
	if err != nil {
		t.Fatalf("HeldSince: %v", err)
	}
	return held, ok
}

// TestFileDestinationReadsBackWhatItHolds: after a crash, the records on
// the lines from an offset on, with their sources; the torn line cut off,
// foreign lines passed over, a line longer than the read buffer read
// whole, and nothing from a file that is not the one written before.
func TestFileDestinationReadsBackWhatItHolds(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	state := &memState{}
	d, _ := fileDestRun(t, path, state)
	writeRecords(t, d, "1", "2")
	mark, ok := d.Offset()
	if !ok {
		t.Fatal("a regular file with connector state cannot say where it writes")
	}
	big := testRecord("3", record.RawData(strings.Repeat("x", 600<<10)))
	big.Metadata = record.Metadata{record.MetadataSourceConnectorID: "p:gen"}
	if n, err := d.Write(ctx, []record.Record{big}); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	appendBytes(t, path, "a line someone else wrote\n")
	d.size = fileSize(t, path)
	writeRecords(t, d, "4")
	appendBytes(t, path, `{"position":"NQ==","operation":"cre`)
	crash(t, d)

	d, _ = fileDestRun(t, path, state)
	held, ok := heldSince(t, d, mark)
	if want := []string{"3@p:gen", "4@"}; !ok || !slices.Equal(held, want) {
		t.Fatalf("held since %d = %q, %v; want %q", mark, held, ok, want)
	}
	if held, ok := heldSince(t, d, 0); !ok || len(held) != 4 {
		t.Fatalf("held since 0 = %q, %v; want the four records", held, ok)
	}
	end, _ := d.Offset()
	if held, ok := heldSince(t, d, end+100); !ok || len(held) != 0 {
		t.Fatalf("held past the end = %q, %v; want nothing", held, ok)
	}
	crash(t, d)

	// The same path, another file: what the offset meant is gone.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte{}, 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ = fileDestRun(t, path, state)
	if held, ok := heldSince(t, d, 0); ok || len(held) != 0 {
		t.Fatalf("held in a replaced file = %q, %v; want it cannot tell", held, ok)
	}
	crash(t, d)

	// A run that ended cleanly says where: a mark there means it wrote
	// nothing after it, in whatever file now is at the path; a mark before
	// it still cannot be told.
	d, _ = fileDestRun(t, path, state)
	writeRecords(t, d, "5", "6")
	stoppedAt, _ := d.Offset()
	if err := d.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".2"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte{}, 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ = fileDestRun(t, path, state)
	if held, ok := heldSince(t, d, stoppedAt); !ok || len(held) != 0 {
		t.Fatalf("held since a clean stop's end in a replaced file = %q, %v; want nothing, known", held, ok)
	}
	if held, ok := heldSince(t, d, stoppedAt-1); ok || len(held) != 0 {
		t.Fatalf("held since before a clean stop's end in a replaced file = %q, %v; want it cannot tell", held, ok)
	}
	crash(t, d)

	// Without connector state nothing says which file it wrote before.
	d, _ = fileDestRun(t, path, nil)
	if _, ok := d.Offset(); ok {
		t.Fatal("a destination without connector state says where it writes")
	}
	crash(t, d)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// watchingWrapper stands for a wrapper that only watches writes.
type watchingWrapper struct{ Destination }

func (w watchingWrapper) Unwrap() Destination { return w.Destination }

// TestAbilityLooksThroughWrappers: a wrapper with Unwrap keeps the
// abilities of the destination it wraps, however deep; one without hides
// them.
func TestAbilityLooksThroughWrappers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	d, _ := fileDestRun(t, path, &memState{})
	defer crash(t, d)
	wrapped := watchingWrapper{watchingWrapper{d}}
	if hr, ok := Ability[HoldingReporter](wrapped); !ok || hr != HoldingReporter(d) {
		t.Fatalf("HoldingReporter through two wrappers = %v, %v", hr, ok)
	}
	if _, ok := Ability[SyncReporter](wrapped); !ok {
		t.Fatal("SyncReporter lost through the wrappers")
	}
	type hiding struct{ Destination }
	if _, ok := Ability[PositionReporter](hiding{d}); ok {
		t.Fatal("a wrapper without Unwrap passed an ability on")
	}
}
