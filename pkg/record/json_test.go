package record

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAppendJSONShape(t *testing.T) {
	r := Record{
		Position:  Position("42"),
		Operation: OperationUpdate,
		Metadata:  Metadata{"opencdc.version": "v1", "b": "x<y"},
		Key:       RawData("k1"),
		Payload: Change{
			Before: RawData("old"),
			After: StructuredData{
				"id": 42, "name": "ann", "ok": true, "score": 1.5, "none": nil,
				"at":     time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
				"nested": map[string]any{"list": []any{1, "two"}},
			},
		},
	}
	got, err := AppendJSON(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"position":"NDI=","operation":"update","metadata":{"b":"x\u003cy","opencdc.version":"v1"},` +
		`"key":"azE=","payload":{"before":"b2xk","after":{"at":"2026-01-02T03:04:05.000000006Z","id":42,` +
		`"name":"ann","nested":{"list":[1,"two"]},"none":null,"ok":true,"score":1.5}}}`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if !json.Valid(got) {
		t.Fatal("output is not valid JSON")
	}
}

func TestAppendJSONAbsentData(t *testing.T) {
	r := Record{Position: Position("1"), Operation: OperationDelete}
	got, err := AppendJSON(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"position":"MQ==","operation":"delete","metadata":null,"key":null,"payload":{"before":null,"after":null}}`
	if string(got) != want {
		t.Fatalf("got %s", got)
	}
}

func TestAppendJSONRejectsNonFiniteNumbers(t *testing.T) {
	r := Record{Position: Position("1"), Operation: OperationCreate,
		Payload: Change{After: StructuredData{"x": math.NaN()}}}
	_, err := AppendJSON(nil, &r)
	if err == nil || !strings.Contains(err.Error(), "payload.after") || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("got %v, want an error naming payload.after and field x", err)
	}
}

// TestAppendStringMatchesEncodingJSON checks the hand-written string encoder
// against the standard library on awkward input.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	inputs := []string{"", "plain", "quote\"back\\slash", "ctl\x00\x01\x1f", "nl\n\r\t", "html<>&",
		"utf8 é ✓ 🚀", "bad \xff\xfe utf8", "sep\u2028\u2029", strings.Repeat("x", 1000)}
	for _, s := range inputs {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("hello\x00\"<>")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestParseJSONRoundTrip(t *testing.T) {
	in := Record{
		Position:  Position("offset:7"),
		Operation: OperationSnapshot,
		Metadata:  Metadata{"file.path": "/tmp/x"},
		Key:       RawData{0, 1, 2, 255},
		Payload:   Change{After: StructuredData{"id": 7, "name": "x"}},
	}
	line, err := AppendJSON(nil, &in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseJSON(line)
	if err != nil {
		t.Fatal(err)
	}
	// JSON numbers come back as float64.
	in.Payload.After = StructuredData{"id": float64(7), "name": "x"}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the record:\n in %#v\nout %#v", in, out)
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct{ name, line, want string }{
		{name: "not json", line: "nope", want: "decode OpenCDC record"},
		{name: "bad operation", line: `{"operation":"upsert"}`, want: "operation"},
		{name: "bad key", line: `{"operation":"create","key":12}`, want: "key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseJSON([]byte(tt.line))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestCloneIsDeep(t *testing.T) {
	r := Record{Position: Position("1"), Metadata: Metadata{"a": "1"},
		Payload: Change{After: StructuredData{"m": map[string]any{"x": 1}}}}
	c := r.Clone()
	c.Position[0] = '9'
	c.Metadata["a"] = "2"
	c.Payload.After.(StructuredData)["m"].(map[string]any)["x"] = 2
	if string(r.Position) != "1" || r.Metadata["a"] != "1" || r.Payload.After.(StructuredData)["m"].(map[string]any)["x"] != 1 {
		t.Fatalf("changing the clone changed the original: %#v", r)
	}
}

func TestOperationNames(t *testing.T) {
	for op := OperationCreate; op <= OperationSnapshot; op++ {
		back, err := ParseOperation(op.String())
		if err != nil || back != op {
			t.Fatalf("%v does not round-trip: %v %v", op, back, err)
		}
	}
	if Operation(0).String() != "Operation(0)" {
		t.Fatal("the zero operation must not look valid")
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	r := Record{
		Position:  Position("123456"),
		Operation: OperationCreate,
		Metadata:  Metadata{MetadataReadAt: "1763640000000000000", MetadataVersion: "v1", MetadataSourceConnectorID: "src"},
		Key:       RawData("123456"),
		Payload:   Change{After: StructuredData{"id": int64(123456), "name": "lorem-ipsum"}},
	}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendJSON(buf[:0], &r); err != nil {
			b.Fatal(err)
		}
	}
}
