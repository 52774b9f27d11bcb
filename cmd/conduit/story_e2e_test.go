package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

// auditEvents reads every kept audit event of a pipeline through the CLI.
func (w *workspace) auditEvents(address, id string) []*conduitv1.PipelineEvent {
	w.t.Helper()
	var out []*conduitv1.PipelineEvent
	for _, line := range strings.Split(strings.TrimSpace(w.mustPipelines(address, "events", id, "--limit", "1000", "-o", "json")), "\n") {
		e := &conduitv1.PipelineEvent{}
		if err := protojson.Unmarshal([]byte(line), e); err != nil {
			w.t.Fatalf("event line does not parse: %v: %s", err, line)
		}
		out = append(out, e)
	}
	return out
}

// checkChain fails unless every event's status before is the status after
// of the event before it.
func checkChain(t *testing.T, id string, events []*conduitv1.PipelineEvent) {
	t.Helper()
	var story strings.Builder
	for _, e := range events {
		fmt.Fprintf(&story, "  #%d %s %s -> %s (%s) %s\n", e.GetSequence(), e.GetKind(), e.GetStatusBefore(), e.GetStatusAfter(), e.GetReason(), e.GetMessage())
	}
	for i := 1; i < len(events); i++ {
		if before, after := events[i].GetStatusBefore(), events[i-1].GetStatusAfter(); before != after {
			t.Errorf("%s: event #%d %s starts from %s, but #%d %s left it %s; the story:\n%s", id,
				events[i].GetSequence(), events[i].GetKind(), before, events[i-1].GetSequence(), events[i-1].GetKind(), after, story.String())
			return
		}
	}
}

func countKind(events []*conduitv1.PipelineEvent, kind string) int {
	n := 0
	for _, e := range events {
		if e.GetKind() == kind {
			n++
		}
	}
	return n
}

func lastOfKind(events []*conduitv1.PipelineEvent, kind string) *conduitv1.PipelineEvent {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].GetKind() == kind {
			return events[i]
		}
	}
	return nil
}

// The audit log tells one consistent story across stop, start, force stop,
// faults, a graceful shutdown, a SIGHUP and a crash: every event starts
// from the status the one before it left, a shutdown is written down, and
// the start after it says whether conduit had stopped cleanly.
func TestAuditEventsTellOneStory(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 100))
	w.write("pipelines/blip.yml", strings.Replace(chaosPipeline("blip",
		"fail.on: read\nfail.after: 20\nfail.count: 2\nfail.code: 503", "", "min-delay: 50ms\nmax-delay: 200ms"),
		"./out.jsonl", "./blip.jsonl", 1))
	w.write("pipelines/idle.yml", strings.Replace(strings.Replace(fmt.Sprintf(generatorToFile, 10), "id: seq", "id: idle", 1),
		"status: running", "status: stopped", 1))

	p := w.start("run")
	address := apiAddress(t, p)
	waitForEvent(t, p, "seq", "running", 1)
	waitForEvent(t, p, "blip", "recovered", 1)

	w.mustPipelines(address, "stop", "seq")
	w.mustPipelines(address, "start", "seq")
	w.mustPipelines(address, "stop", "--force", "seq")
	w.mustPipelines(address, "start", "seq")

	// SIGHUP is not a reason to exit.
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, p, "SIGHUP")
	if r := tableRows(w.mustPipelines(address, "list"))["seq"]; len(r) < 2 || r[1] != "running" {
		t.Fatalf("after SIGHUP seq is %q, want running", r)
	}
	stopProcess(t, p)

	// A clean start after a clean shutdown.
	p = w.start("run")
	address = apiAddress(t, p)
	waitForEvent(t, p, "seq", "resumed", 1)
	waitForEvent(t, p, "blip", "recovered", 1)
	seq := w.auditEvents(address, "seq")
	if r := lastOfKind(seq, "resumed"); !strings.Contains(r.GetMessage(), "stopped cleanly") || r.GetStatusBefore() != conduitv1.PipelineStatus_PIPELINE_STATUS_STOPPED {
		t.Fatalf("resumed after a clean shutdown: %v", r)
	}
	if s := lastOfKind(seq, "stopped"); s.GetReason() != "shutdown" || s.GetActor() != "system" {
		t.Fatalf("the shutdown was not written down: %v", s)
	}

	// A crash.
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	p = w.start("run")
	address = apiAddress(t, p)
	waitForEvent(t, p, "seq", "resumed", 1)
	waitForLog(t, p, "had not stopped cleanly")

	for _, id := range []string{"seq", "blip", "idle"} {
		events := w.auditEvents(address, id)
		checkChain(t, id, events)
		if n := countKind(events, "created"); n != 1 {
			t.Errorf("%s: %d created events, want 1", id, n)
		}
		if n := countKind(events, "provisioned"); n != 1 {
			t.Errorf("%s: %d provisioned events over three starts of an unchanged configuration, want 1", id, n)
		}
	}
	seq = w.auditEvents(address, "seq")
	if r := lastOfKind(seq, "resumed"); !strings.Contains(r.GetMessage(), "had not stopped cleanly") || r.GetStatusBefore() != conduitv1.PipelineStatus_PIPELINE_STATUS_RUNNING {
		t.Fatalf("resumed after a crash: %v", r)
	}
	if n := countKind(seq, "degraded"); n != 1 {
		t.Errorf("seq: %d degraded events, want the one force stop", n)
	}
	stopProcess(t, p)
}

// waitForLog waits until the process logged a line containing s.
func waitForLog(t *testing.T, p *process, s string) {
	t.Helper()
	eventually(t, pollInterval, func() bool { return strings.Contains(p.stderr.String(), s) },
		func() string { return fmt.Sprintf("no log line with %q; output:\n%s", s, p.stderr.String()) })
}

// With exit-on-degraded on, a pipeline still degraded from an earlier run
// makes the next start exit non-zero at once, naming it, before anything is
// written: a pipeline added meanwhile is created once, when conduit runs.
func TestExitOnDegradedAlsoAtStartup(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, strings.Replace(chaosPipeline("picky", "", pickyDestination, "min-delay: 100ms"), "./out.jsonl", "./picky.jsonl", 1))
	p := w.start("run", "--pipelines.exit-on-degraded")
	if code := p.wait(t); code == 0 {
		t.Fatalf("exit code 0 with a degraded pipeline; output:\n%s", p.stderr.String())
	}
	w.write("pipelines/late.yml", strings.Replace(fmt.Sprintf(generatorToFile, 10), "id: seq", "id: late", 1))
	for range 2 {
		p = w.start("run", "--pipelines.exit-on-degraded")
		if code := p.wait(t); code == 0 || !strings.Contains(p.stderr.String(), "pipeline picky was degraded when conduit started") {
			t.Fatalf("start with picky degraded: exit %d; output:\n%s", code, p.stderr.String())
		}
		if strings.Contains(p.stderr.String(), `"event":`) {
			t.Fatalf("pipelines were taken up before refusing to run:\n%s", p.stderr.String())
		}
	}
	p = w.start("run")
	address := apiAddress(t, p)
	waitForEvent(t, p, "late", "running", 1)
	late := w.auditEvents(address, "late")
	checkChain(t, "late", late)
	if n := countKind(late, "created"); n != 1 {
		t.Fatalf("late: %d created events, want 1", n)
	}
	if strings.Contains(p.stderr.String(), "had not stopped cleanly") {
		t.Fatalf("a refused start was taken for a crash:\n%s", p.stderr.String())
	}
	stopProcess(t, p)
}

// A force stop is an operator's act: with exit-on-degraded on, the process
// runs on, and starts again later.
func TestExitOnDegradedIgnoresAForceStop(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 10))
	p := w.start("run", "--pipelines.exit-on-degraded")
	address := apiAddress(t, p)
	waitForEvent(t, p, "seq", "running", 1)
	w.mustPipelines(address, "stop", "--force", "seq")
	if r := tableRows(w.mustPipelines(address, "list"))["seq"]; len(r) < 2 || r[1] != "degraded" {
		t.Fatalf("after a force stop seq is %q, want degraded and the process still serving", r)
	}
	stopProcess(t, p)
	p = w.start("run", "--pipelines.exit-on-degraded")
	address = apiAddress(t, p)
	w.mustPipelines(address, "start", "seq")
	stopProcess(t, p)
}
