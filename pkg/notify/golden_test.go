package notify

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"
)

// TestEntryGolden pins the outbox's on-disk format: an entry written by
// this version must read back, and one written by an earlier conduit of
// the same version must still read.
func TestEntryGolden(t *testing.T) {
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	want := entry{Version: entryVersion, Target: "ops-slack", Kind: KindDegraded, Severity: "critical", Time: at,
		Pipeline: "orders", Summary: "pipeline orders degraded (fatal error): password authentication failed (pg-dest)",
		Hint: "the error is one a restart does not fix", Event: &Event{Sequence: 42, Time: at, PipelineID: "orders",
			Kind: "degraded", StatusBefore: "recovering", StatusAfter: "degraded", ErrorCode: 401, ErrorClass: "fatal",
			ErrorMessage: "password authentication failed", Component: "pg-dest", Reason: "fatal error"}}
	golden, err := os.ReadFile("testdata/entry.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := encodeEntry(want)
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	if string(bytes.TrimSpace(golden)) != indented.String() {
		t.Errorf("encoded entry differs from testdata/entry.golden.json (a format change needs a new version):\n%s", indented.String())
	}
	read, err := decodeEntry([]byte("k"), golden)
	if err != nil {
		t.Fatal(err)
	}
	read.key = nil
	if !reflect.DeepEqual(read, want) {
		t.Errorf("golden reads as %+v, want %+v", read, want)
	}
	if _, err := decodeEntry([]byte("k"), bytes.Replace(golden, []byte(`"version": 1`), []byte(`"version": 2`), 1)); err == nil {
		t.Error("an entry of a newer version was read")
	}
}
