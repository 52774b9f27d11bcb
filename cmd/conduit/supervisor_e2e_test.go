package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// logLine is one JSON log line of the real binary.
type logLine struct {
	Msg           string    `json:"msg"`
	Time          time.Time `json:"time"`
	PipelineID    string    `json:"pipeline_id"`
	Event         string    `json:"event"`
	Status        string    `json:"status"`
	Attempt       int       `json:"attempt"`
	Delay         string    `json:"delay"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	Reason        string    `json:"reason"`
	Code          int       `json:"code"`
	Class         string    `json:"class"`
	Error         string    `json:"error"`
	Component     string    `json:"component"`
	Level         string    `json:"level"`
	Rule          string    `json:"rule"`
	Strategy      string    `json:"strategy"`
	ClassifiedBy  string    `json:"classified_by"`
}

// events returns the supervisor's event lines for pipeline id.
func events(t *testing.T, p *process, id string) []logLine {
	t.Helper()
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Event != "" && l.PipelineID == id {
			out = append(out, l)
		}
	}
	return out
}

// waitForEvent waits until the process logged the n-th event of kind for
// pipeline id and returns it.
func waitForEvent(t *testing.T, p *process, id, kind string, n int) logLine {
	t.Helper()
	var found logLine
	eventually(t, pollInterval, func() bool {
		seen := 0
		for _, e := range events(t, p, id) {
			if e.Event == kind {
				seen++
				if seen == n {
					found = e
					return true
				}
			}
		}
		return false
	}, func() string {
		return fmt.Sprintf("no %s event #%d for %s; output:\n%s", kind, n, id, p.stderr.String())
	})
	return found
}

func chaosPipeline(id, source, destination, recovery string) string {
	return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: %s
    connectors:
      - id: src
        type: source
        plugin: builtin:chaos
        settings:
          format.options.id: int
          rate: 500
%s
      - id: dst
        type: destination
        plugin: builtin:chaos
        settings:
          path: ./out.jsonl
%s
    error-recovery:
%s
`, id, indent(source, 10), indent(destination, 10), indent(recovery, 6))
}

func indent(s string, n int) string {
	if s == "" {
		return ""
	}
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = pad + strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

func stopProcess(t *testing.T, p *process) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGINT; output:\n%s", code, p.stderr.String())
	}
}

func TestTransientFaultRecoversAndResetsFailCount(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("blip",
		"fail.on: read\nfail.after: 20\nfail.count: 2\nfail.code: 503",
		"",
		"min-delay: 100ms\nmax-delay: 1s"))
	p := w.start("run")
	first := waitForEvent(t, p, "blip", "recovering", 1)
	if first.Attempt != 1 || first.Delay != "100ms" || first.Code != 503 || first.Class != "transient" ||
		first.Component != "src" || first.Level != "warn" || !strings.Contains(first.Error, "chaos: injected failure") {
		t.Fatalf("first recovering event %+v", first)
	}
	second := waitForEvent(t, p, "blip", "recovering", 2)
	if second.Attempt != 2 || second.Delay != "200ms" {
		t.Fatalf("second failure while on probation: attempt %d delay %s, want 2 and 200ms (still one episode)", second.Attempt, second.Delay)
	}
	recovered := waitForEvent(t, p, "blip", "recovered", 1)
	if recovered.Reason != "record" || recovered.Status != "running" || recovered.Level != "info" {
		t.Fatalf("recovered %+v", recovered)
	}
	// No flicker: between the first fault and the recovery the pipeline
	// never claimed to be running.
	for _, e := range events(t, p, "blip") {
		if e.Event == "running" && e.Time.After(first.Time) && e.Time.Before(recovered.Time) {
			t.Fatalf("running event during the recovery episode: %+v", e)
		}
	}
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 100)
	stopProcess(t, p)
	checkSequence(t, ids(t, filepath.Join(w.dir, "out.jsonl")), 16*1024)
}

func TestFatalDegradesAtOnceWithTheCause(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("picky",
		"",
		"fail.on: write\nfail.after: 10\nfail.code: 422\nfail.message: column price does not exist",
		"min-delay: 100ms"))
	p := w.start("run")
	e := waitForEvent(t, p, "picky", "degraded", 1)
	if e.Reason != "fatal error" || e.Code != 422 || e.Class != "fatal" || e.Component != "dst" || e.Level != "error" ||
		!strings.Contains(e.Error, "column price does not exist") || strings.Contains(e.Error, "could not") {
		t.Fatalf("degraded event %+v, want the original 422 error from dst", e)
	}
	for _, ev := range events(t, p, "picky") {
		if ev.Event == "recovering" {
			t.Fatalf("a fatal error was retried: %+v", ev)
		}
	}
	stopProcess(t, p)
	// The degraded pipeline stays degraded after a restart of the process.
	again := w.start("run")
	resumed := waitForEvent(t, again, "picky", "resumed", 1)
	if resumed.Status != "degraded" {
		t.Fatalf("after a process restart: %+v, want it still degraded", resumed)
	}
	stopProcess(t, again)
}

func TestRetriesExhaustedDegrades(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("down",
		"fail.on: open\nfail.format: json\nfail.code: 503",
		"",
		"min-delay: 50ms\nmax-retries: 2"))
	p := w.start("run")
	e := waitForEvent(t, p, "down", "degraded", 1)
	if e.Reason != "retries exhausted" || e.Attempt != 3 || e.Code != 503 || e.Class != "transient" {
		t.Fatalf("degraded %+v, want retries exhausted at attempt 3 with the 503 cause", e)
	}
	if n := len(filterEvents(events(t, p, "down"), "recovering")); n != 2 {
		t.Fatalf("%d restarts scheduled, want 2 (max-retries)", n)
	}
	stopProcess(t, p)
}

func TestKillWhileRecoveringWaitsForThePersistedAttempt(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("patient",
		"fail.on: read\nfail.after: 5\nfail.count: 1",
		"",
		"min-delay: 3s"))
	p := w.start("run")
	address := apiAddress(t, p)
	rec := waitForEvent(t, p, "patient", "recovering", 1)
	// State is written behind the supervisor; the audit log shows an
	// event only once the state it leads to is persisted. Kill after that.
	eventually(t, pollInterval, func() bool {
		return strings.Contains(w.mustPipelines(address, "events", "patient", "--kind", "recovering"), "recovering")
	}, func() string { return "the recovering event never showed in the audit log" })
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)

	again := w.start("run")
	resumed := waitForEvent(t, again, "patient", "resumed", 1)
	if !resumed.NextAttemptAt.Equal(rec.NextAttemptAt) {
		t.Fatalf("resumed with next attempt %s, want the persisted %s", resumed.NextAttemptAt, rec.NextAttemptAt)
	}
	restarted := waitForEvent(t, again, "patient", "restarted", 1)
	if restarted.Time.Before(rec.NextAttemptAt) {
		t.Fatalf("restarted at %s, before the persisted next attempt %s", restarted.Time, rec.NextAttemptAt)
	}
	if late := restarted.Time.Sub(rec.NextAttemptAt); late > 2*time.Second {
		t.Fatalf("restarted %s after the persisted attempt time: it started the backoff from scratch", late)
	}
	stopProcess(t, again)
}

func TestExitOnDegraded(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("fatal",
		"fail.on: read\nfail.after: 3\nfail.code: 400",
		"",
		"min-delay: 100ms"))
	w.write("conduit.yml", "log:\n  format: json\npipelines:\n  exit-on-degraded: true\n")
	p := w.start("run")
	if code := p.wait(t); code == 0 {
		t.Fatalf("exit code 0 although a pipeline degraded with exit-on-degraded; output:\n%s", p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "exit-on-degraded") {
		t.Fatalf("no message saying why it exited:\n%s", p.stderr.String())
	}

	// While pipelines only recover, it keeps running.
	w2 := newWorkspace(t, chaosPipeline("flaky",
		"fail.on: read\nfail.after: 3\nfail.count: 2",
		"",
		"min-delay: 50ms"))
	w2.write("conduit.yml", "log:\n  format: json\npipelines:\n  exit-on-degraded: true\n")
	p2 := w2.start("run")
	waitForEvent(t, p2, "flaky", "recovered", 1)
	stopProcess(t, p2)
}

func filterEvents(all []logLine, kind string) []logLine {
	var out []logLine
	for _, e := range all {
		if e.Event == kind {
			out = append(out, e)
		}
	}
	return out
}
