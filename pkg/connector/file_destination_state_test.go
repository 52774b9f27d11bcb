package connector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/pkg/record"
)

// memState is a connector State in memory, shared by the runs of a test as
// the runtime's store-backed one is shared by the runs of a pipeline.
type memState struct {
	data    []byte
	saves   int
	loadErr error
}

func (s *memState) Load(context.Context) ([]byte, error) {
	if s.loadErr != nil {
		return nil, s.loadErr
	}
	return bytes.Clone(s.data), nil
}

func (s *memState) Save(_ context.Context, v []byte) error {
	s.data = bytes.Clone(v)
	s.saves++
	return nil
}

// fileDestRun opens a file destination on path with state (nil: none) and
// a log the test reads.
func fileDestRun(t *testing.T, path string, state State) (*fileDestination, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := Config{Settings: map[string]string{"path": path}, Logger: zap.New(core)}
	if state != nil {
		cfg.State = state
	}
	d, err := NewFileDestination(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Open(context.Background()); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return d.(*fileDestination), logs
}

func writeRecords(t *testing.T, d Destination, positions ...string) {
	t.Helper()
	batch := make([]record.Record, len(positions))
	for i, p := range positions {
		batch[i] = testRecord(p, record.RawData("data-"+p))
	}
	if n, err := d.Write(context.Background(), batch); n != len(batch) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
}

// crash ends a run the way a killed process does: no Teardown, so nothing
// is recorded and nothing synced.
func crash(t *testing.T, d *fileDestination) {
	t.Helper()
	if err := d.f.Close(); err != nil {
		t.Fatal(err)
	}
	d.f = nil
}

func appendBytes(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// wantFile checks that path holds prefix exactly, then the records with
// the positions, one per line, and nothing else.
func wantFile(t *testing.T, path string, prefix []byte, positions ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, prefix) {
		t.Fatalf("file holds %q, want it to start with the %d bytes %q", data, len(prefix), prefix)
	}
	rest := string(data[len(prefix):])
	if !strings.HasSuffix(rest, "\n") && len(positions) > 0 {
		t.Fatalf("the records %q do not end with a newline", rest)
	}
	lines := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
	if len(positions) == 0 {
		lines = nil
	}
	if len(lines) != len(positions) {
		t.Fatalf("after the %d bytes kept the file holds %q, want the records %v", len(prefix), rest, positions)
	}
	for i, l := range lines {
		r, err := record.ParseJSON([]byte(l))
		if err != nil || string(r.Position) != positions[i] {
			t.Errorf("line %d is %q (%v), want the record at position %s", i+1, l, err, positions[i])
		}
	}
}

// TestFileDestinationKeepsBytesItDidNotWrite: whatever is in the file
// before the destination writes to it stays there byte for byte, with or
// without a state, including a last line without its newline.
func TestFileDestinationKeepsBytesItDidNotWrite(t *testing.T) {
	binary := make([]byte, 4096)
	for i := range binary {
		binary[i] = byte(i*7 + i/256) // includes newlines, ends with none
	}
	binary[len(binary)-1] = 0xff
	tests := []struct {
		name    string
		content []byte
		sep     bool // a newline goes between the content and the records
	}{
		{name: "text without a trailing newline", content: []byte("first line\nlast line"), sep: true},
		{name: "one line without a newline", content: []byte(`{"b":`), sep: true},
		{name: "a torn JSON line of unknown origin", content: []byte("{\"a\":1}\n{\"b\":"), sep: true},
		{name: "binary", content: binary, sep: true},
		{name: "text with a trailing newline", content: []byte("a\nb\n")},
	}
	for _, tt := range tests {
		for _, withState := range []bool{false, true} {
			name := tt.name + "/no state"
			if withState {
				name = tt.name + "/empty state"
			}
			t.Run(name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "out.jsonl")
				if err := os.WriteFile(path, tt.content, 0o644); err != nil {
					t.Fatal(err)
				}
				var state State
				if withState {
					state = &memState{}
				}
				d, logs := fileDestRun(t, path, state)
				writeRecords(t, d, "1", "2")
				if err := d.Teardown(context.Background()); err != nil {
					t.Fatal(err)
				}
				prefix := tt.content
				if tt.sep {
					prefix = append(bytes.Clone(tt.content), '\n')
				}
				wantFile(t, path, prefix, "1", "2")
				warned := logs.FilterMessageSnippet("does not end with a newline").FilterField(zap.String("path", path)).Len()
				if tt.sep && warned != 1 {
					t.Errorf("%d warnings naming the path about the missing newline, want 1", warned)
				}
				if !tt.sep && warned != 0 {
					t.Errorf("warned about a missing newline for a file that has one")
				}
				if got := logs.FilterMessageSnippet("cutting off").Len(); got != 0 {
					t.Errorf("logged %d cuts, want none", got)
				}
			})
		}
	}
}

// TestFileDestinationRepairsItsOwnTornLine: a run that dies in the middle
// of a write leaves a partial line after the offset it recorded; the next
// run cuts exactly that off, and nothing before it.
func TestFileDestinationRepairsItsOwnTornLine(t *testing.T) {
	tests := []struct {
		name    string
		foreign string // in the file before the first run
		torn    string // the partial line the crash leaves
		records bool   // the first run wrote records before the crash
	}{
		{name: "new file", torn: `{"position":"NA`, records: true},
		{name: "after foreign lines", foreign: "x\ny\n", torn: `{"position":"NA`, records: true},
		{name: "after a foreign line without newline", foreign: "x\ny", torn: `{"position":"NA`, records: true},
		{name: "torn first write after a foreign line without newline", foreign: "x\ny", torn: `{"posi`},
		{name: "torn first write in a new file", torn: `{"posi`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			if err := os.WriteFile(path, []byte(tt.foreign), 0o644); err != nil {
				t.Fatal(err)
			}
			state := &memState{}
			d, _ := fileDestRun(t, path, state)
			var written []string
			if tt.records {
				writeRecords(t, d, "1", "2")
				written = []string{"1", "2"}
			}
			appendBytes(t, path, tt.torn)
			crash(t, d)

			d, logs := fileDestRun(t, path, state)
			writeRecords(t, d, "3")
			if err := d.Teardown(context.Background()); err != nil {
				t.Fatal(err)
			}
			prefix := tt.foreign
			if prefix != "" && !strings.HasSuffix(prefix, "\n") {
				prefix += "\n"
			}
			wantFile(t, path, []byte(prefix), append(written, "3")...)
			cuts := logs.FilterMessageSnippet("cutting off a partial last line").All()
			if len(cuts) != 1 || cuts[0].ContextMap()["bytes"] != int64(len(tt.torn)) {
				t.Errorf("cut log entries %v, want one cutting %d bytes", cuts, len(tt.torn))
			}
		})
	}
}

// A partial line someone else appended after a crash is not this
// destination's, although the run before did not stop cleanly: it is kept.
func TestFileDestinationKeepsAForeignLineAfterACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	state := &memState{}
	d, _ := fileDestRun(t, path, state)
	writeRecords(t, d, "1")
	crash(t, d)
	appendBytes(t, path, "theirs")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, logs := fileDestRun(t, path, state)
	writeRecords(t, d, "2")
	if err := d.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, append(before, '\n'), "2")
	if logs.FilterMessageSnippet("cutting off").Len() != 0 {
		t.Fatal("a line this destination did not write was cut")
	}
}

// TestFileDestinationDoesNotCutAfterACleanStop: after a run that stopped
// cleanly, a partial line someone else appended is not the destination's.
func TestFileDestinationDoesNotCutAfterACleanStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	state := &memState{}
	d, _ := fileDestRun(t, path, state)
	writeRecords(t, d, "1")
	if err := d.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendBytes(t, path, "a note someone added")
	before, _ := os.ReadFile(path)

	d, _ = fileDestRun(t, path, state)
	writeRecords(t, d, "2")
	if err := d.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, append(before, '\n'), "2")
}

// TestFileDestinationDoesNotCutAReplacedFile: the state speaks of one file;
// another file at the same path (rotated, restored from a backup) is not
// the destination's, even after a crash.
func TestFileDestinationDoesNotCutAReplacedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	state := &memState{}
	d, _ := fileDestRun(t, path, state)
	writeRecords(t, d, "1", "2")
	crash(t, d)

	// Created while the old file still exists, so it cannot reuse its inode.
	other := []byte("another file's line\nand its last line")
	if err := os.WriteFile(filepath.Join(dir, "new"), other, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "new"), path); err != nil {
		t.Fatal(err)
	}
	d, logs := fileDestRun(t, path, state)
	writeRecords(t, d, "3")
	if err := d.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, append(bytes.Clone(other), '\n'), "3")
	if got := logs.FilterMessageSnippet("cutting off").Len(); got != 0 {
		t.Errorf("logged %d cuts of a file the destination did not write", got)
	}
}

// TestFileDestinationRecordsBeforeWriting: the state names the file and
// the offset before the first write, and says so only once per open (no
// durable write per batch); Teardown records the clean stop.
func TestFileDestinationRecordsBeforeWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(path, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := &memState{}
	d, _ := fileDestRun(t, path, state)
	var st fileDestState
	if err := json.Unmarshal(state.data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Version != 1 || st.OwnedFrom != 2 || st.Stopped || st.Ino == 0 || !sameIdentity(t, path, st.fileIdentity) {
		t.Errorf("state after Open = %+v (%s)", st, state.data)
	}
	for i := range 10 {
		writeRecords(t, d, string(rune('a'+i)))
	}
	if state.saves != 1 {
		t.Errorf("%d saves after Open and 10 writes, want 1", state.saves)
	}
	if err := d.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(state.data, &st); err != nil || !st.Stopped || st.OwnedFrom != 2 {
		t.Errorf("state after Teardown = %s, %v; want stopped from 2", state.data, err)
	}
}

func sameIdentity(t *testing.T, path string, id fileIdentity) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	got, ok := identityOf(f, fi)
	return ok && got == id
}

func TestFileDestinationStateErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := NewFileDestination(Config{Settings: map[string]string{"path": path}, State: &memState{loadErr: errors.New("store is closed")}})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Open(context.Background())
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "store is closed") {
		t.Fatalf("Open with a failing state = %v, want an error naming the path and the cause", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "x" {
		t.Errorf("file holds %q after a failed Open, want it unchanged", got)
	}

	// An unreadable state is as good as none: nothing is cut.
	d2, _ := fileDestRun(t, path, &memState{data: []byte("{not json")})
	writeRecords(t, d2, "1")
	if err := d2.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, []byte("x\n"), "1")
}

// TestFileDestinationStateGolden pins the persisted state's JSON: as
// states were written before the clean stop's offset was recorded, and
// as they are written now.
func TestFileDestinationStateGolden(t *testing.T) {
	stoppedAt := int64(8192)
	for _, tt := range []struct {
		file string
		want fileDestState
	}{
		{"file_destination_state.json", fileDestState{Version: 1, fileIdentity: fileIdentity{Dev: 2049, Ino: 1234567, Birth: 1732390000123456789},
			OwnedFrom: 4096, Stopped: true}},
		{"file_destination_state_stopped_at.json", fileDestState{Version: 1, fileIdentity: fileIdentity{Dev: 2049, Ino: 1234567, Birth: 1732390000123456789},
			OwnedFrom: 4096, Stopped: true, StoppedAt: &stoppedAt}},
	} {
		golden, err := os.ReadFile(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		var st fileDestState
		if err := json.Unmarshal(golden, &st); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(st, tt.want) {
			t.Errorf("%s decodes to %+v, want %+v", tt.file, st, tt.want)
		}
		got, err := json.Marshal(tt.want)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != strings.TrimSpace(string(golden)) {
			t.Errorf("state encodes to\n%s\nwant %s:\n%s", got, tt.file, golden)
		}
	}
}

func TestFileDestinationRefusesWhatItCannotAppendTo(t *testing.T) {
	dir := t.TempDir()
	d, err := NewFileDestination(Config{Settings: map[string]string{"path": dir}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Open(context.Background()); err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "directory") {
		t.Errorf("Open of a directory = %v, want an error naming it", err)
	}
	for _, tt := range []struct {
		mode fs.FileMode
		want string // "" for allowed
	}{
		{mode: 0o644},
		{mode: fs.ModeDevice | fs.ModeCharDevice | 0o620}, // /dev/stdout on a terminal
		{mode: fs.ModeNamedPipe | 0o600},                  // /dev/stdout in a pipe
		{mode: fs.ModeDevice | 0o660, want: "block device"},
		{mode: fs.ModeSocket | 0o755, want: "unix socket"},
	} {
		err := checkAppendable(fakeFileInfo{mode: tt.mode})
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("checkAppendable(%v) = %v, want %q", tt.mode, err, tt.want)
		}
	}
	// A character device keeps working, and nothing is recorded for it.
	state := &memState{}
	nd, _ := fileDestRun(t, os.DevNull, state)
	writeRecords(t, nd, "1")
	if err := nd.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if state.saves != 0 {
		t.Errorf("%d saves for %s, want none", state.saves, os.DevNull)
	}
}

type fakeFileInfo struct{ mode fs.FileMode }

func (f fakeFileInfo) Name() string       { return "f" }
func (f fakeFileInfo) Size() int64        { return 0 }
func (f fakeFileInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeFileInfo) ModTime() time.Time { return time.Time{} }
func (f fakeFileInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeFileInfo) Sys() any           { return nil }

// TestFileDestinationDropsItsPartialWrite: when a write stops in the middle
// of a line (a full disk), the partial line is removed at once, so the next
// write does not glue its first record to it.
func TestFileDestinationDropsItsPartialWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	d, _ := fileDestRun(t, path, &memState{})
	writeRecords(t, d, "1")
	// What a short write leaves: part of a line, counted in size.
	partial := `{"position":"Mg`
	appendBytes(t, path, partial)
	d.size += int64(len(partial))
	d.dropPartialLine(int64(len(partial)))
	if d.broken != nil {
		t.Fatalf("broken: %v", d.broken)
	}
	writeRecords(t, d, "2")
	if err := d.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, nil, "1", "2")

	// Someone else appended too: nothing is cut, and writes stop.
	d, _ = fileDestRun(t, path, &memState{})
	appendBytes(t, path, "theirs"+partial)
	d.size += int64(len(partial))
	d.dropPartialLine(int64(len(partial)))
	if d.broken == nil || !strings.Contains(d.broken.Error(), path) {
		t.Fatalf("broken = %v, want an error naming the path", d.broken)
	}
	if _, err := d.Write(context.Background(), []record.Record{testRecord("3", nil)}); err == nil {
		t.Error("Write after an unrepaired partial write succeeded")
	}
	_ = d.Teardown(context.Background())
}
