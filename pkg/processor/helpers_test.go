package processor

import (
	"strings"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
)

// testRecord returns a fresh record with every part filled in: a raw key,
// structured before and after with a nested object, and metadata.
func testRecord() record.Record {
	return record.Record{
		Position:  record.Position("pos-1"),
		Operation: record.OperationUpdate,
		Metadata:  record.Metadata{"table": "users", "opencdc.readAt": "1700000000"},
		Key:       record.RawData("42"),
		Payload: record.Change{
			Before: record.StructuredData{"name": "ann"},
			After: record.StructuredData{
				"name":    "bob",
				"age":     30,
				"address": map[string]any{"city": "Oslo", "zip": "0150"},
				"a.b":     "dotted",
			},
		},
	}
}

// recJSON is the record as OpenCDC JSON, to compare records whatever the Go
// types of their structured values (StructuredData or map[string]any).
func recJSON(t *testing.T, r *record.Record) string {
	t.Helper()
	b, err := record.AppendJSON(nil, r)
	if err != nil {
		t.Fatalf("AppendJSON: %v", err)
	}
	return string(b)
}

func sameRecord(t *testing.T, got, want *record.Record) {
	t.Helper()
	if g, w := recJSON(t, got), recJSON(t, want); g != w {
		t.Errorf("record\n got: %s\nwant: %s", g, w)
	}
}

// wantErr checks err against substrings; no substrings means no error.
func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if len(subs) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}
