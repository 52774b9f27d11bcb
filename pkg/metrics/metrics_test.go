package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/conduitry/conduit/lifecycle"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestMetricsFollowEventsAndRecords(t *testing.T) {
	m := New(func(emit func(string, RecordCounts)) {
		emit("p1", RecordCounts{Read: 10, Written: 8, Filtered: 1, Nacked: 1})
	})
	m.SetStatus("p1", lifecycle.StatusRunning)
	m.PipelineEvent(lifecycle.Event{PipelineID: "p1", Kind: lifecycle.EventFault, From: lifecycle.StatusRunning,
		To: lifecycle.StatusRunning, Error: &lifecycle.ErrorInfo{Class: "transient"}})
	m.PipelineEvent(lifecycle.Event{PipelineID: "p1", Kind: lifecycle.EventRecovering, From: lifecycle.StatusRunning, To: lifecycle.StatusRecovering})
	m.PipelineEvent(lifecycle.Event{PipelineID: "p1", Kind: lifecycle.EventRestarted, From: lifecycle.StatusRecovering, To: lifecycle.StatusRecovering})
	m.CountEvent("dedup-skipped")

	out := scrape(t, m)
	for _, want := range []string{
		`conduit_pipeline_status{pipeline_id="p1",status="recovering"} 1`,
		`conduit_pipeline_status{pipeline_id="p1",status="running"} 0`,
		`conduit_pipeline_restarts_total{pipeline_id="p1"} 1`,
		`conduit_pipeline_faults_total{class="transient",pipeline_id="p1"} 1`,
		`conduit_audit_events_total{kind="recovering"} 1`,
		`conduit_audit_events_total{kind="dedup-skipped"} 1`,
		`conduit_pipeline_records_read_total{pipeline_id="p1"} 10`,
		`conduit_pipeline_records_written_total{pipeline_id="p1"} 8`,
		`conduit_pipeline_records_filtered_total{pipeline_id="p1"} 1`,
		`conduit_pipeline_dlq_nacks_total{pipeline_id="p1"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

func TestTwoInstancesDoNotShareState(t *testing.T) {
	a, b := New(nil), New(nil)
	a.SetStatus("only-a", lifecycle.StatusDegraded)
	if strings.Contains(scrape(t, b), "only-a") {
		t.Fatal("metrics leaked between instances: there must be no global registry")
	}
}
