package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// An idle pipeline that came back - its destination failed one open, its
// source has nothing to read - is running again after its probation, not
// recovering for the whole max-retries-window; its fail count stays until
// that window passes.
func TestIdleRestartIsRunningAfterProbation(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: idle
    connectors:
      - id: src
        type: source
        plugin: builtin:file
        settings:
          path: ./in.txt
      - id: dst
        type: destination
        plugin: builtin:chaos
        settings:
          path: ./out.jsonl
          fail.on: open
          fail.count: 1
          fail.code: 503
    error-recovery:
      min-delay: 100ms
      probation: 1s
      max-retries-window: 1h
`)
	w.write("in.txt", "")
	w.write("conduit.yml", "log:\n  format: json\n  level: info\n")
	p := w.start("run")
	address := apiAddress(t, p)
	waitForEvent(t, p, "idle", "restarted", 1)
	e := waitForEvent(t, p, "idle", "recovered", 1)
	if e.Reason != "probation" || e.Status != "running" || !strings.Contains(e.Msg, "1s probation") {
		t.Fatalf("recovered event %+v, want running by probation", e)
	}
	var described struct {
		Pipeline struct {
			Status    string `json:"status"`
			FailCount int    `json:"fail_count"`
			Probation bool   `json:"probation"`
		} `json:"pipeline"`
	}
	out := w.mustPipelines(address, "describe", "idle", "-o", "json")
	if err := json.Unmarshal([]byte(out), &described); err != nil {
		t.Fatalf("describe -o json: %v\n%s", err, out)
	}
	if d := described.Pipeline; d.Status != "PIPELINE_STATUS_RUNNING" || d.Probation || d.FailCount != 1 {
		t.Fatalf("described %+v, want running, off probation, fail count 1 until the healthy window\n%s", d, out)
	}
	if text := w.mustPipelines(address, "describe", "idle"); !strings.Contains(text, "Probation") || !strings.Contains(text, "1s (pipeline)") {
		t.Errorf("describe does not show the probation key:\n%s", text)
	}
	stopProcess(t, p)
}
