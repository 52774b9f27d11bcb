package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"
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
	m.WatchRestarts(func() (int, time.Time, time.Time) { return 2, time.Unix(1_700_000_000, 0), time.Unix(1_700_000_100, 0) })
	m.WatchBreakers(func() []lifecycle.BreakerState {
		return []lifecycle.BreakerState{{Dependency: "orders-db", Open: true, Held: []string{"a", "b"}}}
	})
	p1 := m.Pipeline("p1", lifecycle.StatusRunning)
	m.Pipeline("p2", lifecycle.StatusStopped)
	m.PipelineEvent(p1, lifecycle.Event{PipelineID: "p1", Kind: auditlog.KindFault, From: lifecycle.StatusRunning,
		To: lifecycle.StatusRunning, Error: &lifecycle.ErrorInfo{Class: "transient", Rule: "rate-limits"}, Action: "restart"})
	m.PipelineEvent(p1, lifecycle.Event{PipelineID: "p1", Kind: auditlog.KindRecovering, From: lifecycle.StatusRunning, To: lifecycle.StatusRecovering})
	m.PipelineEvent(p1, lifecycle.Event{PipelineID: "p1", Kind: auditlog.KindRestarted, From: lifecycle.StatusRecovering, To: lifecycle.StatusRecovering})
	m.PipelineEvent(p1, lifecycle.Event{PipelineID: "p1", Kind: auditlog.KindFault, From: lifecycle.StatusRecovering,
		To: lifecycle.StatusRecovering, Error: &lifecycle.ErrorInfo{Class: "fatal"}, Action: "degrade"})
	m.PipelineEvent(p1, lifecycle.Event{PipelineID: "p1", Kind: auditlog.KindDegraded, From: lifecycle.StatusRecovering, To: lifecycle.StatusDegraded})
	m.CountEvent("dedup-skipped")
	// A second registration returns the same series and keeps their state.
	if again := m.Pipeline("p1", lifecycle.StatusStopped); again != p1 {
		t.Fatal("registering a pipeline twice gave two handles")
	}

	out := scrape(t, m)
	for _, want := range []string{
		`conduit_pipeline_status{pipeline_id="p1",status="degraded"} 1`,
		`conduit_pipeline_status{pipeline_id="p1",status="recovering"} 0`,
		`conduit_pipeline_status{pipeline_id="p1",status="running"} 0`,
		`conduit_pipeline_status{pipeline_id="p1",status="stopped"} 0`,
		`conduit_pipeline_status{pipeline_id="p2",status="stopped"} 1`,
		`conduit_pipeline_status{pipeline_id="p2",status="running"} 0`,
		`conduit_pipeline_restarts_total{pipeline_id="p1"} 1`,
		`conduit_pipeline_restarts_total{pipeline_id="p2"} 0`,
		`conduit_pipeline_faults_total{class="transient",pipeline_id="p1"} 1`,
		`conduit_pipeline_faults_total{class="fatal",pipeline_id="p1"} 1`,
		`conduit_pipeline_faults_total{class="fatal",pipeline_id="p2"} 0`,
		`conduit_audit_events_total{kind="recovering"} 1`,
		`conduit_audit_events_total{kind="fault"} 2`,
		`conduit_audit_events_total{kind="dedup-skipped"} 1`,
		`conduit_pipeline_records_read_total{pipeline_id="p1"} 10`,
		`conduit_pipeline_records_written_total{pipeline_id="p1"} 8`,
		`conduit_pipeline_records_filtered_total{pipeline_id="p1"} 1`,
		`conduit_pipeline_dlq_nacks_total{pipeline_id="p1"} 1`,
		`conduit_recovery_decisions_total{action="restart",rule="rate-limits"} 1`,
		`conduit_recovery_decisions_total{action="degrade",rule="none"} 1`,
		`conduit_pending_restarts 2`,
		`conduit_next_restart_timestamp_seconds 1.7e+09`,
		`conduit_last_restart_timestamp_seconds 1.7000001e+09`,
		`conduit_dependency_breaker_open{dependency="orders-db"} 1`,
		`conduit_dependency_breaker_held_pipelines{dependency="orders-db"} 2`,
		`go_goroutines`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

func TestTwoInstancesDoNotShareState(t *testing.T) {
	a, b := New(nil), New(nil)
	a.Pipeline("only-a", lifecycle.StatusDegraded)
	if strings.Contains(scrape(t, b), "only-a") {
		t.Fatal("metrics leaked between instances: there must be no global registry")
	}
}

// TestPipelineEventsDoNotWaitForEachOther updates many pipelines from many
// goroutines at once, as a fault storm does; with -race it also shows the
// handles are safe to update while Prometheus scrapes.
func TestPipelineEventsDoNotWaitForEachOther(t *testing.T) {
	m := New(nil)
	const pipelines = 50
	handles := make([]*Pipeline, pipelines)
	for i := range handles {
		handles[i] = m.Pipeline(fmt.Sprintf("p%02d", i), lifecycle.StatusRunning)
	}
	var wg sync.WaitGroup
	for _, h := range handles {
		wg.Go(func() {
			for range 20 {
				m.PipelineEvent(h, lifecycle.Event{Kind: auditlog.KindRestarted, From: lifecycle.StatusRecovering, To: lifecycle.StatusRecovering})
			}
		})
	}
	wg.Go(func() { scrape(t, m) })
	wg.Wait()
	out := scrape(t, m)
	if got := strings.Count(out, "conduit_pipeline_restarts_total{pipeline_id="); got != pipelines {
		t.Fatalf("%d restart series, want %d", got, pipelines)
	}
	for _, want := range []string{`conduit_pipeline_restarts_total{pipeline_id="p07"} 20`, `conduit_audit_events_total{kind="restarted"} 1000`} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// Dead-lettered records are counted per pipeline and rule, and a pipeline
// that is gone takes its series with it.
func TestDeadLetteredCountsPerPipelineAndRule(t *testing.T) {
	m := New(nil)
	m.DeadLettered("p1", "poison-rows", 3)
	m.DeadLettered("p1", "poison-rows", 2)
	m.DeadLettered("p1", "quarantine", 1)
	m.DeadLettered("p2", "poison-rows", 7)
	body := scrape(t, m)
	for _, want := range []string{
		`conduit_records_dead_lettered_total{pipeline_id="p1",rule="poison-rows"} 5`,
		`conduit_records_dead_lettered_total{pipeline_id="p1",rule="quarantine"} 1`,
		`conduit_records_dead_lettered_total{pipeline_id="p2",rule="poison-rows"} 7`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	m.ForgetPipeline("p1")
	if body := scrape(t, m); strings.Contains(body, `pipeline_id="p1"`) || !strings.Contains(body, `pipeline_id="p2"`) {
		t.Errorf("after forgetting p1:\n%s", body)
	}
}
