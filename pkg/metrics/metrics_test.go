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
	}, func() []string { return []string{"orders-db", "billing-api", "", "billing-api"} })
	t0 := time.Unix(1_700_000_000, 0)
	p1 := m.Pipeline("p1", lifecycle.StatusRunning, t0)
	m.Pipeline("p2", lifecycle.StatusStopped, t0.Add(-time.Hour))
	m.PipelineEvent(p1, auditlog.Event{PipelineID: "p1", Kind: auditlog.KindFault, StatusBefore: lifecycle.StatusRunning,
		StatusAfter: lifecycle.StatusRunning, Time: t0.Add(time.Second), ErrorClass: "transient", ErrorRule: "rate-limits", Action: "restart"})
	m.PipelineEvent(p1, auditlog.Event{PipelineID: "p1", Kind: auditlog.KindRecovering, StatusBefore: lifecycle.StatusRunning, StatusAfter: lifecycle.StatusRecovering, Time: t0.Add(10 * time.Second)})
	m.PipelineEvent(p1, auditlog.Event{PipelineID: "p1", Kind: auditlog.KindRestarted, StatusBefore: lifecycle.StatusRecovering, StatusAfter: lifecycle.StatusRecovering, Time: t0.Add(20 * time.Second)})
	if out := scrape(t, m); !strings.Contains(out, `conduit_pipeline_status_since_timestamp_seconds{pipeline_id="p1"} 1.70000001e+09`) {
		t.Errorf("a restart within recovering moved since, or recovering did not set it:\n%s", grepLines(out, "since"))
	}
	m.PipelineEvent(p1, auditlog.Event{PipelineID: "p1", Kind: auditlog.KindFault, StatusBefore: lifecycle.StatusRecovering,
		StatusAfter: lifecycle.StatusRecovering, Time: t0.Add(30 * time.Second), ErrorClass: "fatal", Action: "degrade"})
	m.PipelineEvent(p1, auditlog.Event{PipelineID: "p1", Kind: auditlog.KindDegraded, StatusBefore: lifecycle.StatusRecovering, StatusAfter: lifecycle.StatusDegraded, Time: t0.Add(40 * time.Second)})
	m.CountEvent("dedup-skipped")
	// A second registration returns the same series and keeps their state.
	if again := m.Pipeline("p1", lifecycle.StatusStopped, t0); again != p1 {
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
		`conduit_dependency_breaker_open{dependency="billing-api"} 0`,
		`conduit_dependency_breaker_held_pipelines{dependency="billing-api"} 0`,
		`conduit_pipeline_status_since_timestamp_seconds{pipeline_id="p1"} 1.70000004e+09`,
		`conduit_pipeline_status_since_timestamp_seconds{pipeline_id="p2"} 1.6999964e+09`,
		`go_goroutines`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	// A dependency both declared and open is exported once.
	if n := strings.Count(out, `conduit_dependency_breaker_open{dependency="orders-db"}`); n != 1 {
		t.Errorf("orders-db's breaker exported %d times", n)
	}
	if n := strings.Count(out, `conduit_dependency_breaker_open{dependency="billing-api"}`); n != 1 {
		t.Errorf("billing-api's breaker exported %d times", n)
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Failed store writes are counted by reason, each reason exported at zero
// before its first failure (as are the decisions of the errors' classes);
// the audit log's figures are read on each scrape.
func TestWriteFailuresAndAuditFigures(t *testing.T) {
	m := New(nil)
	held, failed := 0, uint64(0)
	m.WatchAuditLog(func() AuditFigures { return AuditFigures{Held: held, Failed: failed} })
	out := scrape(t, m)
	for _, want := range []string{
		`conduit_recovery_decisions_total{action="restart",rule="none"} 0`,
		`conduit_recovery_decisions_total{action="degrade",rule="none"} 0`,
		`conduit_store_write_failures_total{reason="error"} 0`,
		`conduit_store_write_failures_total{reason="refused"} 0`,
		`conduit_store_write_failures_total{reason="fenced"} 0`,
		`conduit_store_write_failures_total{reason="disowned"} 0`,
		`conduit_audit_events_held 0`,
		`conduit_audit_write_failures_total 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("before any failure the scrape lacks %s", want)
		}
	}
	m.StoreWriteFailed(WriteError, 3)
	m.StoreWriteFailed(WriteRefused, 2)
	m.StoreWriteFailed(WriteError, 1)
	held, failed = 5, 7
	out = scrape(t, m)
	for _, want := range []string{
		`conduit_store_write_failures_total{reason="error"} 4`,
		`conduit_store_write_failures_total{reason="refused"} 2`,
		`conduit_store_write_failures_total{reason="fenced"} 0`,
		`conduit_audit_events_held 5`,
		`conduit_audit_write_failures_total 7`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s:\n%s", want, out)
		}
	}
}

func TestTwoInstancesDoNotShareState(t *testing.T) {
	a, b := New(nil), New(nil)
	a.Pipeline("only-a", lifecycle.StatusDegraded, time.Now())
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
		handles[i] = m.Pipeline(fmt.Sprintf("p%02d", i), lifecycle.StatusRunning, time.Now())
	}
	var wg sync.WaitGroup
	for _, h := range handles {
		wg.Go(func() {
			for range 20 {
				m.PipelineEvent(h, auditlog.Event{Kind: auditlog.KindRestarted, StatusBefore: lifecycle.StatusRecovering, StatusAfter: lifecycle.StatusRecovering})
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
	// A pipeline's dead-letter rules are exported before they take a
	// record.
	m.DeadLetterRules("p3", []string{"bad-rows"})
	if body := scrape(t, m); !strings.Contains(body, `conduit_records_dead_lettered_total{pipeline_id="p3",rule="bad-rows"} 0`) {
		t.Errorf("a dead-letter rule is not exported before its first record:\n%s", body)
	}
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
