package record

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

func sampleRecords() []Record {
	at := time.Date(2026, 11, 20, 12, 0, 0, 5, time.UTC)
	return []Record{
		{
			Position: Position("1"), Operation: OperationCreate,
			Metadata: Metadata{"opencdc.version": "v1", "a": ""},
			Key:      RawData("k1"),
			Payload: Change{After: StructuredData{"id": int64(-7), "n": uint64(1 << 63), "f": 1.5, "s": "x\x00y",
				"b": []byte{0, 1}, "t": at, "ok": true, "no": false, "nil": nil,
				"m": map[string]any{"deep": []any{int64(1), "two", map[string]any{}}}}},
		},
		{Position: Position("2"), Operation: OperationDelete, Payload: Change{Before: RawData("")}},
		{Position: nil, Operation: OperationSnapshot},
	}
}

func TestBatchRoundTrip(t *testing.T) {
	in := sampleRecords()
	data, err := AppendBatch(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Record, len(in))
	n, err := DecodeBatch(data, len(in), out)
	if err != nil || n != len(in) {
		t.Fatalf("decoded %d, %v", n, err)
	}
	for i := range in {
		want, err1 := AppendJSON(nil, &in[i])
		got, err2 := AppendJSON(nil, &out[i])
		if err1 != nil || err2 != nil || string(want) != string(got) {
			t.Errorf("record %d changed:\n got %s\nwant %s", i, got, want)
		}
	}
	if b, ok := out[1].Payload.Before.(RawData); !ok || b == nil || len(b) != 0 {
		t.Errorf("empty raw data became %#v, want empty, not absent", out[1].Payload.Before)
	}
}

// A decoder hands a repeated value out again; it must never hand out a
// stale one when the value changes, across records and across batches.
func TestBatchDecoderRepeatsOnlyEqualValues(t *testing.T) {
	long := string(make([]byte, maxRepeated+1))
	values := []string{"a", "a", "b", "", "", "a", long, long, "a"}
	var d BatchDecoder
	out := make([]Record, len(values))
	for round := range 2 {
		in := make([]Record, len(values))
		for i, v := range values {
			in[i] = Record{Position: Position(strconv.Itoa(i)), Operation: OperationCreate,
				Metadata: Metadata{"m": v, "name": v},
				Payload:  Change{After: StructuredData{"name": v, "m": int64(i)}}}
		}
		data, err := AppendBatch(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Decode(data, len(in), out); err != nil {
			t.Fatal(err)
		}
		for i, v := range values {
			after := out[i].Payload.After.(StructuredData)
			if out[i].Metadata["m"] != v || out[i].Metadata["name"] != v || after["name"] != v || after["m"] != int64(i) {
				t.Fatalf("round %d record %d: metadata %q, payload %v; want %q and m=%d", round, i, out[i].Metadata, after, v, i)
			}
		}
	}
}

// Metadata that repeats from record to record (connector id, version, a
// batch's read time) costs no allocation once the decoder has seen it.
func TestBatchDecoderDoesNotAllocateRepeatedMetadata(t *testing.T) {
	in := make([]Record, 256)
	for i := range in {
		in[i] = Record{Position: Position(strconv.Itoa(i)), Operation: OperationCreate,
			Metadata: Metadata{MetadataReadAt: "1763640000000000000", MetadataVersion: "v1", MetadataSourceConnectorID: "src"},
			Payload:  Change{After: StructuredData{"kind": "order"}}}
	}
	data, err := AppendBatch(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	var d BatchDecoder
	out := make([]Record, len(in))
	if _, err := d.Decode(data, len(in), out); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := d.Decode(data, len(in), out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("decoding %d records with repeated metadata allocated %.0f times, want 0", len(in), allocs)
	}
}

func TestDecodeBatchRejectsMalformedInput(t *testing.T) {
	good, _ := AppendBatch(nil, sampleRecords()[:1])
	tests := []struct {
		name  string
		data  []byte
		count int
	}{
		{name: "empty", data: nil, count: 1},
		{name: "wrong version", data: append([]byte{9}, good[1:]...), count: 1},
		{name: "truncated", data: good[:len(good)-3], count: 1},
		{name: "trailing bytes", data: append(append([]byte{}, good...), 0), count: 1},
		{name: "more records than sent", data: good, count: 2},
		{name: "huge length", data: []byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f}, count: 1},
		{name: "bad operation", data: []byte{1, 0, 0, 0, 0, 0, 0}, count: 1},
		{name: "count beyond buffer", data: good, count: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := make([]Record, 2)
			if _, err := DecodeBatch(tt.data, tt.count, out); !errors.Is(err, ErrBadBatch) {
				t.Fatalf("got %v, want ErrBadBatch", err)
			}
		})
	}
}

func TestAppendBatchRejectsUnsupportedValues(t *testing.T) {
	_, err := AppendBatch(nil, []Record{{Position: Position("9"), Operation: OperationCreate,
		Payload: Change{After: StructuredData{"c": make(chan int)}}}})
	if err == nil {
		t.Fatal("a channel value was encoded")
	}
}

func FuzzDecodeBatch(f *testing.F) {
	good, _ := AppendBatch(nil, sampleRecords())
	f.Add(good, 3)
	f.Add([]byte{1}, 0)
	f.Fuzz(func(t *testing.T, data []byte, count int) {
		if count < 0 || count > 64 {
			return
		}
		out := make([]Record, 64)
		n, err := DecodeBatch(data, count, out)
		if err == nil && n != count {
			t.Fatalf("no error but %d of %d records", n, count)
		}
		if err == nil {
			// What decodes must encode again.
			if _, err := AppendBatch(nil, out[:n]); err != nil {
				t.Fatalf("decoded records do not encode: %v", err)
			}
		}
	})
}

// benchRecords is a batch as a source reads it: positions, keys and
// payload values differ from record to record, metadata mostly repeats.
func benchRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		seq := strconv.Itoa(123456 + i)
		recs[i] = Record{
			Position: Position(seq), Operation: OperationCreate,
			Metadata: Metadata{MetadataReadAt: "1763640000000000000", MetadataVersion: "v1", MetadataSourceConnectorID: "src"},
			Key:      RawData(seq),
			Payload:  Change{After: StructuredData{"id": int64(123456 + i), "name": "lorem-ipsum-" + seq, "kind": "order"}},
		}
	}
	return recs
}

func BenchmarkAppendBatch(b *testing.B) {
	recs := benchRecords(1024)
	buf := make([]byte, 0, 256<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendBatch(buf[:0], recs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

func BenchmarkDecodeBatch(b *testing.B) {
	recs := benchRecords(1024)
	data, _ := AppendBatch(nil, recs)
	out := make([]Record, len(recs))
	var d BatchDecoder
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(data, len(recs), out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

func TestNodeIDJoinsIDsAsConduitDoes(t *testing.T) {
	tests := []struct {
		name     string
		pipeline string
		ids      []string
		want     string
	}{
		{name: "connector", pipeline: "orders", ids: []string{"pg"}, want: "orders:pg"},
		{name: "connector's processor", pipeline: "orders", ids: []string{"pg", "rename"}, want: "orders:pg:rename"},
		{name: "pipeline's processor", pipeline: "orders", ids: []string{"", "rename"}, want: "orders:rename"},
		{name: "no pipeline", ids: []string{"gen"}, want: "gen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NodeID(tt.pipeline, tt.ids...); got != tt.want {
				t.Fatalf("NodeID(%q, %q) = %q, want %q", tt.pipeline, tt.ids, got, tt.want)
			}
		})
	}
}
