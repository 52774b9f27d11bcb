package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Records a dead-letter rule takes are an audited decision: dead-lettered
// events with the rule, the positions, the error and the count (grouped,
// not one per record), a log line, and a metric per pipeline and rule.
func TestDeadLetteredRecordsAreAuditedAndCounted(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: rows
    connectors:
      - id: src
        type: source
        plugin: builtin:chaos
        settings:
          format.options.id: int
          rate: 2000
      - id: dst
        type: destination
        plugin: builtin:chaos
        settings:
          path: ./out.jsonl
          fail.on: write
          fail.after: 20
          fail.every: 2
          fail.count: 200
          fail.code: 503
          fail.message: deadlock detected on row
          fail.record: true
    dead-letter-queue:
      plugin: builtin:file
      settings: {path: ./dlq.jsonl}
      window-size: 0
    error-recovery:
      rules:
        - name: poison-rows
          match: {codes: ["503"], message: "deadlock"}
          action: dead-letter
`)
	w.write("conduit.yml", "log:\n  format: json\n  level: info\n")
	p := w.start("run")
	address := apiAddress(t, p)
	dlq := filepath.Join(w.dir, "dlq.jsonl")
	eventually(t, pollInterval, func() bool {
		b, _ := os.ReadFile(dlq)
		return strings.Count(string(b), "\n") >= 200
	}, func() string { return "fewer than 200 records in the dead-letter queue; output:\n" + p.stderr.String() })
	// The metric counts every record the rule took, per pipeline and rule.
	var metric string
	eventually(t, pollInterval, func() bool {
		resp, err := http.Get("http://" + address + "/metrics")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		metric = grepLines(string(body), "conduit_records_dead_lettered_total{")
		return strings.Contains(metric, `conduit_records_dead_lettered_total{pipeline_id="rows",rule="poison-rows"} 200`)
	}, func() string { return "the metric does not count the 200 records: " + metric })
	// Stopped, the run writes the events of the records taken since the
	// last one.
	w.mustPipelines(address, "stop", "rows")
	b, _ := os.ReadFile(dlq)
	inQueue := strings.Count(string(b), "\n")
	if !strings.Contains(p.stderr.String(), `"msg":"records sent to the dead-letter queue","pipeline_id":"rows","rule":"poison-rows"`) {
		t.Errorf("no log line says records were sent to the dead-letter queue")
	}
	if desc := w.mustPipelines(address, "describe", "rows"); !strings.Contains(desc, fmt.Sprintf("Dead-lettered:     %d records by its rules or quarantine", inQueue)) ||
		!strings.Contains(desc, "by poison-rows") {
		t.Errorf("describe does not show the dead-lettered records:\n%s", desc)
	}
	out := w.mustPipelines(address, "events", "rows", "--kind", "dead-lettered", "-o", "json")
	total, events := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
			Count   string `json:"count"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Rule    string `json:"rule"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		if e.Kind != "dead-lettered" || e.Error.Rule != "poison-rows" || e.Error.Code != 503 || !strings.Contains(e.Error.Message, "deadlock detected on row") ||
			!strings.Contains(e.Message, `by rule "poison-rows"`) || !strings.Contains(e.Message, "position") {
			t.Fatalf("dead-lettered event %s: want the rule, the code, the error and the positions", line)
		}
		n := 0
		if err := json.Unmarshal([]byte(e.Count), &n); err != nil || n < 1 {
			t.Fatalf("dead-lettered event %s: count %q", line, e.Count)
		}
		total += n
		events++
	}
	if total != inQueue {
		t.Errorf("dead-lettered events count %d records, want the %d in the queue", total, inQueue)
	}
	if events >= 200 {
		t.Errorf("%d dead-lettered events for 200 records: not grouped", events)
	}
	stopProcess(t, p)
}
