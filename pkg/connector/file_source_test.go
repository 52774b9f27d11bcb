package connector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
)

// fileSourceHarness drives a file source whose end-of-file polling is
// controlled by the test: atEOF receives a value each time Read starts
// waiting, and tick lets it poll once.
type fileSourceHarness struct {
	src   *fileSource
	path  string
	atEOF chan time.Duration
	tick  chan time.Time
}

func newFileSourceHarness(t *testing.T, content, pos string) *fileSourceHarness {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewFileSource(Config{PipelineID: "p1", ConnectorID: "file-1", Settings: map[string]string{"path": path}})
	if err != nil {
		t.Fatal(err)
	}
	h := &fileSourceHarness{
		src:   s.(*fileSource),
		path:  path,
		atEOF: make(chan time.Duration, 1),
		tick:  make(chan time.Time),
	}
	h.src.after = func(d time.Duration) <-chan time.Time {
		h.atEOF <- d
		return h.tick
	}
	var p record.Position
	if pos != "" {
		p = record.Position(pos)
	}
	if err := h.src.Open(context.Background(), p); err != nil {
		t.Fatalf("Open(%q): %v", pos, err)
	}
	t.Cleanup(func() { _ = h.src.Teardown(context.Background()) })
	return h
}

func (h *fileSourceHarness) appendText(t *testing.T, s string) {
	t.Helper()
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// readAsync starts a Read and returns its result channel.
func (h *fileSourceHarness) readAsync(ctx context.Context, size int) <-chan readResult {
	out := make(chan readResult, 1)
	go func() {
		batch := make([]record.Record, size)
		n, err := h.src.Read(ctx, batch)
		out <- readResult{batch[:n], err}
	}()
	return out
}

type readResult struct {
	recs []record.Record
	err  error
}

type line struct{ payload, key, pos string }

func lines(recs []record.Record) []line {
	out := make([]line, len(recs))
	for i, r := range recs {
		out[i] = line{string(r.Payload.After.Bytes()), keyText(r), string(r.Position)}
	}
	return out
}

func TestFileSourceReadsLines(t *testing.T) {
	tests := []struct {
		name    string
		content string
		pos     string
		batch   int
		want    [][]line // per Read
	}{
		{
			name:    "all in one batch",
			content: "alpha\nbeta\n\ngamma\n",
			batch:   10,
			want:    [][]line{{{"alpha", "0", "6"}, {"beta", "6", "11"}, {"", "11", "12"}, {"gamma", "12", "18"}}},
		},
		{
			name:    "batch size limits",
			content: "a\nb\nc\n",
			batch:   2,
			want:    [][]line{{{"a", "0", "2"}, {"b", "2", "4"}}, {{"c", "4", "6"}}},
		},
		{
			name:    "resume from a position",
			content: "alpha\nbeta\ngamma\n",
			pos:     "6",
			batch:   10,
			want:    [][]line{{{"beta", "6", "11"}, {"gamma", "11", "17"}}},
		},
		{
			name:    "crlf",
			content: "a\r\nb\n",
			batch:   10,
			want:    [][]line{{{"a", "0", "3"}, {"b", "3", "5"}}},
		},
		{
			name:    "partial last line held back",
			content: "a\nb",
			batch:   10,
			want:    [][]line{{{"a", "0", "2"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFileSourceHarness(t, tt.content, tt.pos)
			for i, want := range tt.want {
				recs := readN(t, h.src, tt.batch)
				if got := lines(recs); !slices.Equal(got, want) {
					t.Fatalf("read %d = %v, want %v", i, got, want)
				}
				for _, r := range recs {
					if r.Operation != record.OperationCreate || r.Payload.Before != nil {
						t.Errorf("record %s: operation %v, before %v; want create without before", r.Position, r.Operation, r.Payload.Before)
					}
					if r.Metadata[record.MetadataFilePath] != h.path ||
						r.Metadata[record.MetadataSourceConnectorID] != "p1:file-1" ||
						r.Metadata[record.MetadataReadAt] == "" || len(r.Metadata) != 3 {
						t.Errorf("record %s: metadata %v", r.Position, r.Metadata)
					}
				}
			}
			// Then it waits at the end of the file.
			ctx, cancel := context.WithCancel(context.Background())
			res := h.readAsync(ctx, tt.batch)
			if d := <-h.atEOF; d != filePollInterval {
				t.Errorf("poll interval = %v, want %v", d, filePollInterval)
			}
			cancel()
			if r := <-res; !errors.Is(r.err, context.Canceled) || len(r.recs) != 0 {
				t.Fatalf("Read after the end = %v, %v; want context.Canceled", lines(r.recs), r.err)
			}
		})
	}
}

func TestFileSourceFollowsAppends(t *testing.T) {
	h := newFileSourceHarness(t, "one\ntw", "")
	if got := lines(readN(t, h.src, 10)); !slices.Equal(got, []line{{"one", "0", "4"}}) {
		t.Fatalf("first read = %v", got)
	}

	res := h.readAsync(context.Background(), 10)
	<-h.atEOF // blocked at the end, "tw" held back
	h.appendText(t, "o\nthr")
	h.tick <- time.Time{}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := lines(r.recs); !slices.Equal(got, []line{{"two", "4", "8"}}) {
		t.Fatalf("after append = %v", got)
	}

	// An append without a newline is not enough.
	res = h.readAsync(context.Background(), 10)
	<-h.atEOF
	h.appendText(t, "ee")
	h.tick <- time.Time{}
	<-h.atEOF // polled, still no complete line
	h.appendText(t, "\nfour\n")
	h.tick <- time.Time{}
	r = <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := lines(r.recs); !slices.Equal(got, []line{{"three", "8", "14"}, {"four", "14", "19"}}) {
		t.Fatalf("after second append = %v", got)
	}

	// Reopening at the last position continues there.
	if err := h.src.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.appendText(t, "five\n")
	if err := h.src.Open(context.Background(), r.recs[1].Position); err != nil {
		t.Fatal(err)
	}
	if got := lines(readN(t, h.src, 10)); !slices.Equal(got, []line{{"five", "19", "24"}}) {
		t.Fatalf("after reopen = %v", got)
	}
}

func TestFileSourceRecordsOwnTheirBytes(t *testing.T) {
	h := newFileSourceHarness(t, "aaaa\nbbbb\n", "")
	first := readN(t, h.src, 1)[0]
	second := readN(t, h.src, 1)[0]
	first.Payload.After.(record.RawData)[0] = 'X'
	first.Key.(record.RawData)[0] = 'X'
	if string(first.Position) != "5" || string(second.Payload.After.Bytes()) != "bbbb" {
		t.Errorf("records share bytes: first position %q, second payload %q", first.Position, second.Payload.After.Bytes())
	}
}

func TestFileSourceLongLines(t *testing.T) {
	// Each case starts with a tiny buffer so that lines force it to grow.
	t.Run("grows the buffer", func(t *testing.T) {
		long := strings.Repeat("x", 3000)
		h := newFileSourceHarness(t, long+"\nshort\n", "")
		h.src.buf = make([]byte, 16)
		if got := lines(readN(t, h.src, 1)); !slices.Equal(got, []line{{long, "0", "3001"}}) {
			t.Fatalf("got %d records, first %d bytes", len(got), len(got[0].payload))
		}
		if got := lines(readN(t, h.src, 1)); !slices.Equal(got, []line{{"short", "3001", "3007"}}) {
			t.Fatalf("after the long line: %v", got)
		}
	})
	t.Run("too long", func(t *testing.T) {
		h := newFileSourceHarness(t, "ok\n"+strings.Repeat("x", 40)+"\n", "")
		h.src.maxLine, h.src.buf = 32, make([]byte, 8)
		if got := lines(readN(t, h.src, 10)); !slices.Equal(got, []line{{"ok", "0", "3"}}) {
			t.Fatalf("first read = %v", got)
		}
		_, err := h.src.Read(context.Background(), make([]record.Record, 10))
		if err == nil || !strings.Contains(err.Error(), h.path) || !strings.Contains(err.Error(), "offset 3") ||
			!strings.Contains(err.Error(), "longer than 32 bytes") {
			t.Fatalf("error = %v, want one naming the path, the offset and the limit", err)
		}
		// Reading again cannot make the line shorter: fatal.
		if c := cerrors.Classify(err); c.Class != cerrors.ClassFatal || c.Code != cerrors.CodePayloadTooLarge {
			t.Fatalf("classified %v %d, want fatal 413", c.Class, c.Code)
		}
	})
	t.Run("exactly the limit", func(t *testing.T) {
		h := newFileSourceHarness(t, strings.Repeat("x", 32)+"\n", "")
		h.src.maxLine, h.src.buf = 32, make([]byte, 8)
		if recs := readN(t, h.src, 10); len(recs[0].Payload.After.Bytes()) != 32 {
			t.Fatalf("got %q", recs[0].Payload.After.Bytes())
		}
	})
}

func TestFileSourceFileChanges(t *testing.T) {
	t.Run("truncated", func(t *testing.T) {
		h := newFileSourceHarness(t, "alpha\nbeta\n", "")
		readN(t, h.src, 10)
		if err := os.Truncate(h.path, 3); err != nil {
			t.Fatal(err)
		}
		_, err := h.src.Read(context.Background(), make([]record.Record, 10))
		if err == nil || !strings.Contains(err.Error(), h.path) || !strings.Contains(err.Error(), "truncated") ||
			!strings.Contains(err.Error(), "has 3 bytes") || !strings.Contains(err.Error(), "11 were read") {
			t.Fatalf("error = %v, want one naming the path and both offsets", err)
		}
	})
	t.Run("replaced", func(t *testing.T) {
		h := newFileSourceHarness(t, "alpha\n", "")
		readN(t, h.src, 10)
		other := h.path + ".new"
		if err := os.WriteFile(other, []byte("something else entirely\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(other, h.path); err != nil {
			t.Fatal(err)
		}
		_, err := h.src.Read(context.Background(), make([]record.Record, 10))
		if err == nil || !strings.Contains(err.Error(), "replaced") || !strings.Contains(err.Error(), h.path) {
			t.Fatalf("error = %v, want one saying the file was replaced", err)
		}
	})
}

func TestFileSourceOpenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		pos  string
		want []string
	}{
		{"missing file", filepath.Join(dir, "missing.txt"), "", []string{"missing.txt", "no such file"}},
		{"directory", dir, "", []string{dir, "not a regular file"}},
		{"bad position", file, "abc", []string{file, `position "abc"`}},
		{"negative position", file, "-4", []string{`position "-4"`}},
		{"position beyond the end", file, "10", []string{file, "position 10 is beyond the end", "4 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := NewFileSource(Config{Settings: map[string]string{"path": tt.path}})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Teardown(context.Background())
			var pos record.Position
			if tt.pos != "" {
				pos = record.Position(tt.pos)
			}
			err = src.Open(context.Background(), pos)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("Open error = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestFileSourceReadBeforeOpen(t *testing.T) {
	src, err := NewFileSource(Config{Settings: map[string]string{"path": "/x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Read(context.Background(), make([]record.Record, 1)); !errors.Is(err, errReadBeforeOpen) {
		t.Fatalf("Read before Open = %v", err)
	}
	if err := src.Teardown(context.Background()); err != nil {
		t.Fatalf("Teardown without Open = %v", err)
	}
}

func TestFileSourceManyLines(t *testing.T) {
	var b strings.Builder
	const n = 50_000
	for i := range n {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	h := newFileSourceHarness(t, b.String(), "")
	got := 0
	var lastPos string
	for got < n {
		recs := readN(t, h.src, 1024)
		for _, r := range recs {
			if want := "line " + strconv.Itoa(got); string(r.Payload.After.Bytes()) != want {
				t.Fatalf("record %d = %q, want %q", got, r.Payload.After.Bytes(), want)
			}
			got++
		}
		lastPos = string(recs[len(recs)-1].Position)
	}
	if lastPos != strconv.Itoa(b.Len()) {
		t.Errorf("last position = %s, want the file size %d", lastPos, b.Len())
	}
}

func TestFileSourceReusesMetadata(t *testing.T) {
	h := newFileSourceHarness(t, "a\nb\n", "")
	md := record.Metadata{"processor.added": "x"}
	batch := []record.Record{{Metadata: md}}
	if _, err := h.src.Read(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if !sameMap(md, batch[0].Metadata) {
		t.Error("metadata map was not reused")
	}
	if _, ok := md["processor.added"]; ok || len(md) != 3 {
		t.Errorf("metadata = %v, want exactly the 3 source keys", md)
	}
}

func BenchmarkFileSourceRead(b *testing.B) {
	var content []byte
	for i := range 100_000 {
		content = append(content, `{"id":`...)
		content = strconv.AppendInt(content, int64(i), 10)
		content = append(content, `,"name":"some text of a typical length"}`+"\n"...)
	}
	path := filepath.Join(b.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		b.Fatal(err)
	}
	src, err := NewFileSource(Config{Settings: map[string]string{"path": path}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Open(ctx, nil); err != nil {
		b.Fatal(err)
	}
	batch := make([]record.Record, 1024)
	b.ReportAllocs()
	records, inFile := 0, 0
	for b.Loop() {
		if inFile == 100_000 {
			// Start over instead of waiting at the end of the file.
			b.StopTimer()
			src.Teardown(ctx)
			if err := src.Open(ctx, nil); err != nil {
				b.Fatal(err)
			}
			inFile = 0
			b.StartTimer()
		}
		n, err := src.Read(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		records += n
		inFile += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}
