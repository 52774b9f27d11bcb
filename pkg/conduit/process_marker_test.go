package conduit

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/golden"
)

// The process marker's bytes are pinned: a change of its format needs a
// new version, and the markers older builds left behind still decode.
func TestProcessMarkerFormat(t *testing.T) {
	marker := processMarker{Version: processMarkerVersion, PID: 4242, Host: "db-1",
		StartedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	encoded, err := json.Marshal(marker)
	if err != nil {
		t.Fatal(err)
	}
	want := golden.File(t, "process-marker.golden.json", append(encoded, '\n'))
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
