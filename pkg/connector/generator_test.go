package connector

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/record"
)

// newGenerator builds and opens a generator on a fake clock.
func newGenerator(t *testing.T, settings map[string]string, pos string) (*generatorSource, *clocktest.Clock) {
	t.Helper()
	src, err := NewGeneratorSource(Config{PipelineID: "p1", ConnectorID: "gen-1", Settings: settings})
	if err != nil {
		t.Fatalf("NewGeneratorSource: %v", err)
	}
	g := src.(*generatorSource)
	clock := newFakeClock()
	g.now, g.after = clock.Now, clock.After
	var p record.Position
	if pos != "" {
		p = record.Position(pos)
	}
	if err := g.Open(context.Background(), p); err != nil {
		t.Fatalf("Open(%q): %v", pos, err)
	}
	return g, clock
}

func readN(t *testing.T, src Source, size int) []record.Record {
	t.Helper()
	batch := make([]record.Record, size)
	n, err := src.Read(context.Background(), batch)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if n < 1 || n > size {
		t.Fatalf("Read returned n = %d for a batch of %d", n, size)
	}
	return batch[:n]
}

func TestGeneratorSequenceAndResume(t *testing.T) {
	tests := []struct {
		name     string
		pos      string
		wantKeys []string
	}{
		{name: "from the start", pos: "", wantKeys: []string{"1", "2", "3"}},
		{name: "resume after 7", pos: "7", wantKeys: []string{"8", "9", "10"}},
		{name: "resume after 0", pos: "0", wantKeys: []string{"1", "2", "3"}},
		{name: "resume after 99", pos: "99", wantKeys: []string{"100", "101", "102"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, clock := newGenerator(t, map[string]string{"format.options.id": "int"}, tt.pos)
			recs := readN(t, g, 3)
			if got := positions(recs); !slices.Equal(got, tt.wantKeys) {
				t.Errorf("positions = %v, want %v", got, tt.wantKeys)
			}
			for i, r := range recs {
				if keyText(r) != tt.wantKeys[i] {
					t.Errorf("record %d key = %q, want %q", i, keyText(r), tt.wantKeys[i])
				}
				if _, raw := r.Key.(record.RawData); !raw {
					t.Errorf("record %d key is %T, want RawData", i, r.Key)
				}
				wantID, _ := strconv.Atoi(tt.wantKeys[i])
				if id := r.Payload.After.(record.StructuredData)["id"]; id != wantID {
					t.Errorf("record %d id = %v (%T), want %d", i, id, id, wantID)
				}
				if r.Operation != record.OperationCreate {
					t.Errorf("record %d operation = %v, want create", i, r.Operation)
				}
				// What Conduit's generator and runtime set: no opencdc.version,
				// the source named "pipeline:connector".
				wantMD := record.Metadata{
					record.MetadataReadAt:            strconv.FormatInt(clock.Now().UnixNano(), 10),
					record.MetadataCreatedAt:         strconv.FormatInt(clock.Now().UnixNano(), 10),
					record.MetadataSourceConnectorID: "p1:gen-1",
				}
				if !mapsEqual(r.Metadata, wantMD) {
					t.Errorf("record %d metadata = %v, want %v", i, r.Metadata, wantMD)
				}
			}
			// The next batch continues the sequence.
			next := readN(t, g, 1)
			want, _ := strconv.Atoi(tt.wantKeys[2])
			if got := string(next[0].Position); got != strconv.Itoa(want+1) {
				t.Errorf("next position = %q, want %d", got, want+1)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestGeneratorBadPosition(t *testing.T) {
	for _, pos := range []string{"abc", "-1", "1.5", "7 "} {
		t.Run(pos, func(t *testing.T) {
			src, err := NewGeneratorSource(Config{Settings: map[string]string{"format.options.id": "int"}})
			if err != nil {
				t.Fatal(err)
			}
			err = src.Open(context.Background(), record.Position(pos))
			if err == nil || !strings.Contains(err.Error(), strconv.Quote(pos)) {
				t.Fatalf("Open(%q) error = %v, want one naming the position", pos, err)
			}
		})
	}
}

func TestGeneratorReadBeforeOpen(t *testing.T) {
	src, err := NewGeneratorSource(Config{Settings: map[string]string{"format.options.id": "int"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Read(context.Background(), make([]record.Record, 1)); !errors.Is(err, errReadBeforeOpen) {
		t.Fatalf("Read before Open: %v", err)
	}
}

func TestGeneratorRecordCount(t *testing.T) {
	tests := []struct {
		name      string
		count     string
		pos       string
		batch     int
		wantBatch []string // positions of the batches before the source idles
	}{
		{name: "fresh, one batch", count: "3", batch: 10, wantBatch: []string{"1,2,3"}},
		{name: "fresh, several batches", count: "5", batch: 2, wantBatch: []string{"1,2", "3,4", "5"}},
		{name: "counted across restarts", count: "10", pos: "7", batch: 10, wantBatch: []string{"8,9,10"}},
		{name: "already done", count: "10", pos: "10", batch: 10},
		{name: "past the count", count: "10", pos: "12", batch: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newGenerator(t, map[string]string{"format.options.id": "int", "recordCount": tt.count}, tt.pos)
			for _, want := range tt.wantBatch {
				got := strings.Join(positions(readN(t, g, tt.batch)), ",")
				if got != want {
					t.Fatalf("batch = %s, want %s", got, want)
				}
			}
			// Then Read idles until ctx is done.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			n, err := g.Read(ctx, make([]record.Record, tt.batch))
			if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Read after the last record = %d, %v; want 0, deadline exceeded", n, err)
			}
		})
	}
}

func TestGeneratorOperations(t *testing.T) {
	g, _ := newGenerator(t, map[string]string{
		"format.options.id":   "int",
		"format.options.name": "string",
		"operations":          "create,update,delete,snapshot",
	}, "")
	recs := readN(t, g, 8)
	type shape struct {
		op            record.Operation
		before, after bool
	}
	want := []shape{
		{record.OperationCreate, false, true},
		{record.OperationUpdate, true, true},
		{record.OperationDelete, true, false},
		{record.OperationSnapshot, false, true},
	}
	for i, r := range recs {
		w := want[i%len(want)]
		got := shape{r.Operation, r.Payload.Before != nil, r.Payload.After != nil}
		if got != w {
			t.Errorf("record %d: %+v, want %+v", i+1, got, w)
		}
		// Before and after describe the same entity: same id.
		for _, d := range []record.Data{r.Payload.Before, r.Payload.After} {
			if d == nil {
				continue
			}
			if id := d.(record.StructuredData)["id"]; id != i+1 {
				t.Errorf("record %d: id = %v, want %d", i+1, id, i+1)
			}
		}
	}
	if recs[1].Payload.Before.(record.StructuredData)["id"] == nil {
		t.Error("update before has no id")
	}
}

func TestGeneratorFieldTypes(t *testing.T) {
	settings := map[string]string{
		"format.options.id":    "int",
		"format.options.n":     "int",
		"format.options.name":  "string",
		"format.options.ok":    "bool",
		"format.options.at":    "time",
		"format.options.took":  "duration",
		"format.options.count": "INT",
	}
	t.Run("structured", func(t *testing.T) {
		g, clock := newGenerator(t, settings, "")
		r := readN(t, g, 1)[0]
		d, ok := r.Payload.After.(record.StructuredData)
		if !ok {
			t.Fatalf("payload is %T, want StructuredData", r.Payload.After)
		}
		if len(d) != 7 {
			t.Errorf("payload has %d fields, want 7: %v", len(d), d)
		}
		if d["id"] != 1 {
			t.Errorf("id = %v", d["id"])
		}
		for _, f := range []string{"n", "count"} {
			if _, ok := d[f].(int); !ok {
				t.Errorf("%s is %T, want int", f, d[f])
			}
		}
		if s, ok := d["name"].(string); !ok || s == "" {
			t.Errorf("name = %#v, want a non-empty string", d["name"])
		}
		if _, ok := d["ok"].(bool); !ok {
			t.Errorf("ok is %T, want bool", d["ok"])
		}
		if at, ok := d["at"].(time.Time); !ok || !at.Equal(clock.Now()) {
			t.Errorf("at = %#v, want the read time %v", d["at"], clock.Now())
		}
		if took, ok := d["took"].(time.Duration); !ok || took < 0 || took >= time.Hour {
			t.Errorf("took = %#v, want a duration below 1h", d["took"])
		}
		// The record encodes to OpenCDC JSON.
		if _, err := record.AppendJSON(nil, &r); err != nil {
			t.Errorf("AppendJSON: %v", err)
		}
	})
	t.Run("raw", func(t *testing.T) {
		raw := map[string]string{"format.type": "raw"}
		for k, v := range settings {
			raw[k] = v
		}
		raw["format.options.quo\"te"] = "string" // field names are JSON-escaped
		raw["operations"] = "update"
		g, clock := newGenerator(t, raw, "41")
		r := readN(t, g, 1)[0]
		for name, d := range map[string]record.Data{"before": r.Payload.Before, "after": r.Payload.After} {
			b, ok := d.(record.RawData)
			if !ok {
				t.Fatalf("%s is %T, want RawData", name, d)
			}
			var obj map[string]any
			if err := json.Unmarshal(b, &obj); err != nil {
				t.Fatalf("%s is not JSON: %v: %s", name, err, b)
			}
			if obj["id"] != float64(42) {
				t.Errorf("%s id = %v, want 42", name, obj["id"])
			}
			if s, _ := obj["quo\"te"].(string); s == "" {
				t.Errorf("%s quo\"te = %v, want a word", name, obj["quo\"te"])
			}
			if _, ok := obj["ok"].(bool); !ok {
				t.Errorf("%s ok = %v, want bool", name, obj["ok"])
			}
			at, err := time.Parse(time.RFC3339Nano, obj["at"].(string))
			if err != nil || !at.Equal(clock.Now()) {
				t.Errorf("%s at = %v (%v), want %v", name, obj["at"], err, clock.Now())
			}
			if _, ok := obj["took"].(float64); !ok {
				t.Errorf("%s took = %v, want a number", name, obj["took"])
			}
			if len(obj) != 8 {
				t.Errorf("%s has %d fields, want 8: %s", name, len(obj), b)
			}
		}
	})
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "payload.json")
		if err := os.WriteFile(path, []byte(`{"hello":"world"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		g, _ := newGenerator(t, map[string]string{"format.type": "file", "format.options.path": path}, "")
		recs := readN(t, g, 2)
		if got := string(recs[0].Payload.After.Bytes()); got != `{"hello":"world"}` {
			t.Errorf("payload = %q", got)
		}
		// Each record owns its bytes.
		recs[0].Payload.After.(record.RawData)[0] = 'X'
		if got := string(recs[1].Payload.After.Bytes()); got != `{"hello":"world"}` {
			t.Errorf("records share payload bytes: %q", got)
		}
	})
	t.Run("file missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "missing.json")
		src, err := NewGeneratorSource(Config{Settings: map[string]string{"format.type": "file", "format.options.path": path}})
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Open(context.Background(), nil); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open error = %v, want one naming %s", err, path)
		}
	})
}

// TestGeneratorReusesBatch checks that records handed back are refilled in
// place, and that nothing of one batch is shared with another.
func TestGeneratorReusesBatch(t *testing.T) {
	g, _ := newGenerator(t, map[string]string{"format.options.id": "int", "operations": "create,update"}, "")
	batch := make([]record.Record, 4)
	if _, err := g.Read(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	md0 := batch[0].Metadata
	after0 := batch[0].Payload.After.(record.StructuredData)
	pos0 := batch[0].Position
	if _, err := g.Read(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if !sameMap(md0, batch[0].Metadata) {
		t.Error("metadata map was not reused")
	}
	if !sameMap(after0, batch[0].Payload.After.(record.StructuredData)) {
		t.Error("payload map was not reused")
	}
	if string(pos0) != "1" {
		t.Errorf("position of the first batch changed to %q: buffers are shared between batches", pos0)
	}
	if got := strings.Join(positions(batch), ","); got != "5,6,7,8" {
		t.Errorf("second batch positions = %s", got)
	}
	// Position and key do not alias.
	batch[0].Key.(record.RawData)[0] = 'X'
	if string(batch[0].Position) != "5" {
		t.Errorf("position aliases key: %q", batch[0].Position)
	}
	// Keys someone else added to a reused map do not survive.
	batch[2].Metadata["processor.added"] = "x"
	batch[2].Payload.After.(record.StructuredData)["extra"] = 1
	if _, err := g.Read(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if _, ok := batch[2].Metadata["processor.added"]; ok || len(batch[2].Metadata) != 3 {
		t.Errorf("metadata kept a foreign key: %v", batch[2].Metadata)
	}
	if after := batch[2].Payload.After.(record.StructuredData); len(after) != 1 || after["id"] != 11 {
		t.Errorf("payload = %v, want only id 11", after)
	}
	// A record of another type in the slot is simply replaced.
	batch[1].Payload = record.Change{After: record.RawData("x"), Before: record.RawData("y")}
	batch[1].Metadata = nil
	if _, err := g.Read(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if _, ok := batch[1].Payload.After.(record.StructuredData); !ok || batch[1].Metadata == nil {
		t.Errorf("slot 1 not refilled: %+v", batch[1])
	}
}

func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	var probe K
	for k := range a {
		probe = k
		break
	}
	saved := a[probe]
	delete(a, probe)
	_, stillThere := b[probe]
	a[probe] = saved
	return !stillThere
}

func TestGeneratorRate(t *testing.T) {
	g, clock := newGenerator(t, map[string]string{"format.options.id": "int", "rate": "10"}, "")
	start := clock.Now()

	// The first record is due at once, the next ones every 100ms, one per Read.
	for i := 1; i <= 5; i++ {
		recs := readN(t, g, 100)
		if len(recs) != 1 {
			t.Fatalf("read %d: %d records, want 1", i, len(recs))
		}
		wantAt := start.Add(time.Duration(i-1) * 100 * time.Millisecond)
		if got := recs[0].Metadata[record.MetadataReadAt]; got != strconv.FormatInt(wantAt.UnixNano(), 10) {
			t.Errorf("record %d read at %s, want %d", i, got, wantAt.UnixNano())
		}
	}
	if got, want := clock.Waits(), []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}

	// After 1s without reading, the 10 records that came due arrive at once.
	clock.Advance(time.Second)
	if n := len(readN(t, g, 100)); n != 10 {
		t.Errorf("after 1s: %d records, want 10", n)
	}
	// A stall of an hour is caught up for at most 1s worth.
	clock.Advance(time.Hour)
	if n := len(readN(t, g, 1000)); n != 11 {
		t.Errorf("after 1h: %d records, want 11 (1s worth, plus the one due now)", n)
	}
	// A batch smaller than what is due gets filled, the rest follows.
	clock.Advance(time.Second)
	if n := len(readN(t, g, 4)); n != 4 {
		t.Errorf("small batch: %d records, want 4", n)
	}
	if n := len(readN(t, g, 100)); n != 6 {
		t.Errorf("rest: %d records, want 6", n)
	}
}

func TestGeneratorReadTimeMapsToRate(t *testing.T) {
	g, clock := newGenerator(t, map[string]string{"format.options.id": "int", "readTime": "250ms"}, "")
	readN(t, g, 10)
	readN(t, g, 10)
	if got := clock.Waits(); !slices.Equal(got, []time.Duration{250 * time.Millisecond}) {
		t.Errorf("waits = %v, want [250ms]", got)
	}
	// rate wins over readTime.
	g, clock = newGenerator(t, map[string]string{"format.options.id": "int", "readTime": "250ms", "rate": "2"}, "")
	readN(t, g, 10)
	readN(t, g, 10)
	if got := clock.Waits(); !slices.Equal(got, []time.Duration{500 * time.Millisecond}) {
		t.Errorf("waits = %v, want [500ms]", got)
	}
}

func TestGeneratorUnlimitedFillsBatch(t *testing.T) {
	g, clock := newGenerator(t, map[string]string{"format.options.id": "int"}, "")
	if n := len(readN(t, g, 1024)); n != 1024 {
		t.Errorf("got %d records, want a full batch", n)
	}
	if w := clock.Waits(); len(w) != 0 {
		t.Errorf("unlimited generator waited: %v", w)
	}
}

func TestGeneratorBursts(t *testing.T) {
	g, clock := newGenerator(t, map[string]string{
		"format.options.id":  "int",
		"rate":               "10",
		"burst.generateTime": "1s",
		"burst.sleepTime":    "2s",
	}, "")
	start := clock.Now()
	var offsets []time.Duration
	for range 22 {
		r := readN(t, g, 100)[0]
		ns, _ := strconv.ParseInt(r.Metadata[record.MetadataReadAt], 10, 64)
		offsets = append(offsets, time.Unix(0, ns).Sub(start))
	}
	var want []time.Duration
	for burst := range 2 {
		for i := range 10 {
			want = append(want, time.Duration(burst)*3*time.Second+time.Duration(i)*100*time.Millisecond)
		}
	}
	want = append(want, 6*time.Second, 6100*time.Millisecond)
	if !slices.Equal(offsets, want) {
		t.Errorf("record times = %v\nwant %v", offsets, want)
	}
}

func TestGeneratorWaitRespectsContext(t *testing.T) {
	tests := []struct {
		name     string
		settings map[string]string
	}{
		{"rate", map[string]string{"format.options.id": "int", "rate": "0.001"}},
		{"burst pause", map[string]string{"format.options.id": "int", "burst.generateTime": "1ns", "burst.sleepTime": "1h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, clock := newGenerator(t, tt.settings, "")
			readN(t, g, 1) // the first record is due at once
			clock.Advance(time.Millisecond)
			after, waiting := blockingAfter()
			g.after = after

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := g.Read(ctx, make([]record.Record, 1))
				done <- err
			}()
			<-waiting // Read is blocked in a wait
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Read = %v, want context.Canceled", err)
			}
		})
	}
}

func TestGeneratorAckAndTeardown(t *testing.T) {
	g, _ := newGenerator(t, map[string]string{"format.options.id": "int"}, "")
	if err := g.Ack(context.Background(), []record.Position{record.Position("1"), nil, record.Position("junk")}); err != nil {
		t.Errorf("Ack: %v", err)
	}
	if err := g.Teardown(context.Background()); err != nil {
		t.Errorf("Teardown: %v", err)
	}
}

func BenchmarkGeneratorRead(b *testing.B) {
	src, err := NewGeneratorSource(Config{ConnectorID: "bench", Settings: map[string]string{
		"format.options.id":   "int",
		"format.options.name": "string",
	}})
	if err != nil {
		b.Fatal(err)
	}
	if err := src.Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	batch := make([]record.Record, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	records := 0
	for b.Loop() {
		n, err := src.Read(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		records += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}
