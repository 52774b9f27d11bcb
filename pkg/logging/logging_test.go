package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestFormatsAndLevels(t *testing.T) {
	var buf bytes.Buffer
	log, err := New("info", FormatJSON, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("shown", zap.String("pipeline_id", "p1"))
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil {
		t.Fatalf("json format wrote %q: %v", buf.String(), err)
	}
	if line["msg"] != "shown" || line["pipeline_id"] != "p1" || line["level"] != "info" {
		t.Fatalf("unexpected json line %v", line)
	}

	buf.Reset()
	log, err = New("debug", FormatCLI, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("for people", zap.String("pipeline_id", "p2"))
	if out := buf.String(); !strings.Contains(out, "DEBUG") || !strings.Contains(out, "for people") || !strings.Contains(out, `"pipeline_id": "p2"`) {
		t.Fatalf("cli format wrote %q", out)
	}
}

func TestRejectsBadSettings(t *testing.T) {
	if _, err := New("loud", FormatCLI, nil); err == nil || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("bad level: %v", err)
	}
	if _, err := New("info", "xml", nil); err == nil || !strings.Contains(err.Error(), "log.format") {
		t.Fatalf("bad format: %v", err)
	}
}

// Time fields carry their date: a next attempt may be days away.
func TestCLITimesCarryTheDate(t *testing.T) {
	var buf bytes.Buffer
	log, err := New("info", FormatCLI, &buf)
	if err != nil {
		t.Fatal(err)
	}
	next := time.Date(2027, 11, 23, 8, 30, 0, 0, time.UTC)
	log.Info("pipeline recovering", zap.Time("next_attempt_at", next))
	if out := buf.String(); !strings.Contains(out, `"next_attempt_at": "2027-11-23T08:30:00.000Z"`) {
		t.Fatalf("cli format wrote %q, want the next attempt with its date", out)
	}
}
