package connector

import (
	"context"
	"os"
	"path/filepath"
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
