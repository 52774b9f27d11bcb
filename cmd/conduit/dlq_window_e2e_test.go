package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// A pipeline the dead-letter queue's window stopped says so - its
// degraded reason, last error and events - instead of a generic fatal
// error naming only the last record's error.
func TestDeadLetterWindowOverflowIsTheDegradedReason(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: win
    connectors:
      - id: src
        type: source
        plugin: builtin:chaos
        settings:
          format.options.id: int
          rate: 500
      - id: dst
        type: destination
        plugin: builtin:chaos
        settings:
          path: ./out.jsonl
          fail.on: write
          fail.after: 20
          fail.every: 3
          fail.count: 1000
          fail.code: 400
          fail.message: row rejected
          fail.record: true
    dead-letter-queue:
      plugin: builtin:file
      settings: {path: ./dlq.jsonl}
      window-size: 10
      window-nack-threshold: 1
`)
	w.write("conduit.yml", "log:\n  format: json\n  level: info\n")
	p := w.start("run")
	address := apiAddress(t, p)
	e := waitForEvent(t, p, "win", "degraded", 1)
	const cause = "dead-letter queue window overflowed: 2 nacks in the last 10 records (window-size 10, window-nack-threshold 1); last nacked record: "
	if e.Reason != "dead-letter queue window overflowed" || !strings.HasPrefix(e.Error, cause) || !strings.Contains(e.Error, "row rejected") {
		t.Fatalf("degraded event %+v, want the window as reason and cause, the record's error as detail", e)
	}
	var described struct {
		Pipeline struct {
			DegradedReason string `json:"degraded_reason"`
			LastError      struct {
				Message string `json:"message"`
			} `json:"last_error"`
		} `json:"pipeline"`
	}
	out := w.mustPipelines(address, "describe", "win", "-o", "json")
	if err := json.Unmarshal([]byte(out), &described); err != nil {
		t.Fatalf("describe -o json: %v\n%s", err, out)
	}
	if d := described.Pipeline; d.DegradedReason != "dead-letter queue window overflowed" || !strings.HasPrefix(d.LastError.Message, cause) {
		t.Fatalf("described %+v, want the window as reason and last error", d)
	}
	stopProcess(t, p)
}
