package connector

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/writeguard"
)

func testRecord(pos string, after record.Data) record.Record {
	return record.Record{
		Position:  record.Position(pos),
		Operation: record.OperationCreate,
		Metadata:  record.Metadata{"k": "v", record.MetadataVersion: "v1"},
		Key:       record.RawData("key-" + pos),
		Payload:   record.Change{After: after},
	}
}

func openFileDestination(t *testing.T, settings map[string]string) Destination {
	t.Helper()
	d, err := NewFileDestination(Config{Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Open(context.Background()); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return d
}

func readRecords(t *testing.T, path string) []record.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Errorf("file does not end with a newline: %q", data)
	}
	var out []record.Record
	for l := range bytes.SplitSeq(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'}) {
		if len(l) == 0 {
			continue
		}
		r, err := record.ParseJSON(l)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

func TestFileDestinationWritesAndAppends(t *testing.T) {
	for _, sync := range []string{"false", "true"} {
		t.Run("sync="+sync, func(t *testing.T) {
			// The directory does not exist yet.
			path := filepath.Join(t.TempDir(), "nested", "dir", "out.jsonl")
			ctx := context.Background()
			first := []record.Record{
				testRecord("1", record.StructuredData{"id": 1, "name": "a\nb"}),
				testRecord("2", record.RawData("raw\x00bytes")),
			}
			second := []record.Record{testRecord("3", nil)}
			second[0].Operation = record.OperationDelete
			second[0].Payload.Before = record.StructuredData{"id": 3}

			d := openFileDestination(t, map[string]string{"path": path, "sync": sync})
			if n, err := d.Write(ctx, first); n != 2 || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if err := d.Teardown(ctx); err != nil {
				t.Fatalf("Teardown: %v", err)
			}
			// A new run appends.
			d = openFileDestination(t, map[string]string{"path": path, "sync": sync})
			if n, err := d.Write(ctx, second); n != 1 || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if err := d.Teardown(ctx); err != nil {
				t.Fatalf("Teardown: %v", err)
			}

			got := readRecords(t, path)
			want := append(append([]record.Record{}, first...), second...)
			want[0].Payload.After = record.StructuredData{"id": float64(1), "name": "a\nb"} // JSON numbers
			want[2].Payload.Before = record.StructuredData{"id": float64(3)}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("file holds\n%+v\nwant\n%+v", got, want)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm&^0o644 != 0 {
				t.Errorf("file mode = %v, want at most 0644", perm)
			}
		})
	}
}

func TestFileDestinationPartialFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	d := openFileDestination(t, map[string]string{"path": path})
	defer d.Teardown(context.Background())
	batch := []record.Record{
		testRecord("p1", record.RawData("ok")),
		testRecord("p2", record.RawData("ok")),
		testRecord("p3", record.StructuredData{"score": math.NaN()}),
		testRecord("p4", record.RawData("never attempted")),
	}
	n, err := d.Write(context.Background(), batch)
	if n != 2 {
		t.Errorf("Write returned n = %d, want 2", n)
	}
	for _, w := range []string{"record 2", `position "p3"`, `payload.after: field "score"`, path} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error = %v, want it to contain %q", err, w)
		}
	}
	got := readRecords(t, path)
	if len(got) != 2 || string(got[1].Position) != "p2" {
		t.Fatalf("file holds %d records (%v), want p1 and p2", len(got), got)
	}
	// The destination stays usable.
	if n, err := d.Write(context.Background(), batch[3:]); n != 1 || err != nil {
		t.Fatalf("Write after a failure = %d, %v", n, err)
	}
	if got := readRecords(t, path); len(got) != 3 {
		t.Errorf("file holds %d records, want 3", len(got))
	}
}

func TestFileDestinationOpenError(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The parent "directory" is a file.
	path := filepath.Join(blocker, "out.jsonl")
	d, err := NewFileDestination(Config{Settings: map[string]string{"path": path}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Open(context.Background()); err == nil || !strings.Contains(err.Error(), blocker) {
		t.Fatalf("Open = %v, want an error naming %s", err, blocker)
	}
	if err := d.Teardown(context.Background()); err != nil {
		t.Errorf("Teardown after a failed Open = %v", err)
	}
	if _, err := d.Write(context.Background(), []record.Record{testRecord("1", nil)}); err == nil {
		t.Error("Write without Open succeeded")
	}
}

// A path that is a directory (or a block device, or a socket) is the same
// on every restart: the error is fatal.
func TestFileDestinationAtADirectoryIsFatal(t *testing.T) {
	dir := t.TempDir()
	d, err := NewFileDestination(Config{Settings: map[string]string{"path": dir}})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Open(context.Background())
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("Open = %v, want is a directory", err)
	}
	if c := cerrors.Classify(err); c.Class != cerrors.ClassFatal {
		t.Fatalf("classified %v, want fatal", c.Class)
	}
}

func BenchmarkFileDestinationWrite(b *testing.B) {
	src, err := NewGeneratorSource(Config{ConnectorID: "bench", Settings: map[string]string{
		"format.options.id":   "int",
		"format.options.name": "string",
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Open(ctx, nil); err != nil {
		b.Fatal(err)
	}
	batch := make([]record.Record, 1024)
	if _, err := src.Read(ctx, batch); err != nil {
		b.Fatal(err)
	}
	d, err := NewFileDestination(Config{Settings: map[string]string{"path": filepath.Join(b.TempDir(), "out.jsonl")}})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer d.Teardown(ctx)
	b.ReportAllocs()
	records := 0
	for b.Loop() {
		n, err := d.Write(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		records += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

// A write guard that refuses after the encoding: nothing of the batch
// reaches the file, and the error is the guard's, transient.
func TestFileDestinationChecksTheWriteGuardBeforeWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	d := openFileDestination(t, map[string]string{"path": path})
	defer d.Teardown(context.Background())
	lost := errors.New("the lease may have expired")
	refuse := false
	ctx := writeguard.With(context.Background(), func() error {
		if refuse {
			return lost
		}
		return nil
	})
	if n, err := d.Write(ctx, []record.Record{testRecord("1", record.RawData("a"))}); n != 1 || err != nil {
		t.Fatalf("Write allowed = %d, %v", n, err)
	}
	refuse = true
	n, err := d.Write(ctx, []record.Record{testRecord("2", record.RawData("b")), testRecord("3", record.RawData("c"))})
	if n != 0 || !errors.Is(err, lost) || cerrors.Classify(err).Class != cerrors.ClassTransient || !strings.Contains(err.Error(), path) {
		t.Fatalf("Write refused = %d, %v; want 0 and the guard's error, transient, naming the file", n, err)
	}
	if got := readRecords(t, path); len(got) != 1 || string(got[0].Position) != "1" {
		t.Fatalf("file holds %+v, want only the record written before the refusal", got)
	}
}
