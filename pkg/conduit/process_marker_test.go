package conduit

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files in testdata/")

// The process marker's bytes are pinned: a change of its format needs a
// new version, and the markers older builds left behind still decode.
func TestProcessMarkerFormat(t *testing.T) {
	marker := processMarker{Version: processMarkerVersion, PID: 4242, Host: "db-1",
		StartedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	encoded, err := json.Marshal(marker)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "process-marker.golden.json")
	if *updateGolden {
		if err := os.WriteFile(golden, append(encoded, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(append(encoded, '\n'), want) {
		t.Fatalf("the process marker encodes as\n%s\nthe golden file has\n%s", encoded, want)
	}
	for name, text := range map[string]string{
		"this version": string(want),
		"version 0":    `{"pid":4242,"host":"db-1","startedAt":"2026-11-29T10:00:00Z"}`,
	} {
		var got processMarker
		if err := json.Unmarshal([]byte(text), &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got.Version = marker.Version
		if got != marker {
			t.Errorf("%s decodes as %+v, want %+v", name, got, marker)
		}
	}
}
