package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Recovery rules, presets and flapping on the real binary: each pipeline
// fails through builtin:chaos, and the supervisor's events (its JSON log,
// which is what the audit log records) show what decided.
func TestRecoveryRulesDecideOnTheRealBinary(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	w.write("conduit.yml", `log:
  format: json
pipelines:
  error-recovery:
    rules:
      - name: global-429
        match: {codes: ["429"]}
        strategy: fixed
        min-delay: 30s
      - name: bad-password
        match: {message: "password authentication failed"}
        action: degrade
      - name: partner-404
        match: {codes: ["404"], pipelines: ["partner-*"], plugins: ["builtin:chaos"]}
        action: retry
        min-delay: 100ms
`)
	w.write("pipelines/limited.yml", chaosPipeline("limited",
		"fail.on: read\nfail.after: 5\nfail.count: 2\nfail.code: 429", "",
		`rules: [{name: rate-limits, match: {codes: ["429"]}, strategy: fixed, min-delay: 150ms, max-retries: 10}]`))
	w.write("pipelines/pw.yml", chaosPipeline("pw",
		"fail.on: read\nfail.after: 5\nfail.code: 503\nfail.message: FATAL password authentication failed for user app", "",
		"min-delay: 100ms"))
	w.write("pipelines/partner.yml", chaosPipeline("partner-eu",
		"fail.on: read\nfail.after: 5\nfail.count: 2\nfail.code: 404", "", "min-delay: 100ms"))
	w.write("pipelines/agg.yml", chaosPipeline("agg",
		"fail.on: read\nfail.after: 5\nfail.count: 2\nfail.code: 503", "", "preset: aggressive"))
	p := w.start("run")

	// A pipeline's own rule beats the global one for the same code.
	e := waitForEvent(t, p, "limited", "recovering", 1)
	if e.Rule != "rate-limits" || e.Strategy != "fixed" || e.Delay != "150ms" || e.ClassifiedBy != "rule" {
		t.Errorf("limited: recovering %+v, want rule rate-limits, fixed 150ms", e)
	}
	waitForEvent(t, p, "limited", "recovered", 1)

	// A message rule makes a transient code fatal.
	e = waitForEvent(t, p, "pw", "degraded", 1)
	if e.Reason != "rule" || e.Rule != "bad-password" || e.Code != 503 || e.Class != "fatal" || e.ClassifiedBy != "rule" {
		t.Errorf("pw: degraded %+v, want reason rule by bad-password, 503 made fatal", e)
	}

	// A fatal code made transient for the pipelines a glob names.
	e = waitForEvent(t, p, "partner-eu", "recovering", 1)
	if e.Rule != "partner-404" || e.Code != 404 || e.Class != "transient" || e.Delay != "100ms" {
		t.Errorf("partner-eu: recovering %+v, want 404 retried by partner-404 after 100ms", e)
	}
	waitForEvent(t, p, "partner-eu", "recovered", 1)

	// A preset: aggressive starts at 100ms and grows by 1.5.
	first, second := waitForEvent(t, p, "agg", "recovering", 1), waitForEvent(t, p, "agg", "recovering", 2)
	if first.Delay != "100ms" || second.Delay != "150ms" || first.Rule != "" {
		t.Errorf("agg: delays %s and %s, want 100ms and 150ms from the aggressive preset", first.Delay, second.Delay)
	}

	// describe shows where each value came from and the rules in order.
	address := apiAddress(t, p)
	out := w.mustPipelines(address, "describe", "limited")
	for _, want := range []string{"Strategy:        exponential (default)", "rate-limits  priority 20, retry, pipeline at",
		"global-429  priority 20, retry, global at", `Class:           transient (classified by rule "rate-limits")`} {
		if !strings.Contains(out, want) {
			t.Errorf("describe limited lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "rate-limits  priority"), strings.Index(out, "global-429  priority"); i < 0 || j < i {
		t.Errorf("the pipeline's rule should be listed (and tried) before the global one:\n%s", out)
	}
	stopProcess(t, p)
}

// A pipeline that recovers and fails again at once slows down, and is
// degraded as flapping after max-flaps such episodes.
func TestFlappingPipelineIsDegradedOnTheRealBinary(t *testing.T) {
	t.Parallel()
	// Every run reads 50 records (100 ms at the chaos source's rate),
	// then fails: each restart recovers on its first record and fails
	// again right after. (With 5 records, 10 ms, a busy machine sometimes
	// failed the run before its first record made it end to end: a fault
	// on probation, not a new flap.)
	w := newWorkspace(t, chaosPipeline("flappy",
		"fail.on: read\nfail.after: 50\nfail.every: 50\nfail.count: 1000", "",
		"min-delay: 100ms\nmax-flaps: 2\nflap-window: 1m"))
	p := w.start("run")
	e := waitForEvent(t, p, "flappy", "degraded", 1)
	if e.Reason != "flapping" || !strings.Contains(e.Msg, "max-flaps 2") {
		t.Fatalf("degraded %+v, want reason flapping", e)
	}
	var delays []string
	for _, r := range filterEvents(events(t, p, "flappy"), "recovering") {
		delays = append(delays, r.Delay)
	}
	if want := []string{"100ms", "200ms", "400ms"}; strings.Join(delays, " ") != strings.Join(want, " ") {
		t.Errorf("delays %v, want %v: each flap continues the backoff", delays, want)
	}
	if n := len(filterEvents(events(t, p, "flappy"), "recovered")); n != 3 {
		t.Errorf("%d recovered events, want 3: it is running again after each first record", n)
	}
	stopProcess(t, p)
}

// A day-long schedule keeps its day across a SIGKILL: the restarted
// process waits for the persisted attempt, and the CLI shows its date.
func TestDayLongScheduleSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("partner",
		"fail.on: read\nfail.after: 5\nfail.count: 1\nfail.code: 503", "",
		"strategy: schedule\nschedule: [24h, 168h]"))
	p := w.start("run")
	address := apiAddress(t, p)
	rec := waitForEvent(t, p, "partner", "recovering", 1)
	if rec.Delay != "24h0m0s" || rec.Strategy != "schedule" || rec.NextAttemptAt.Sub(rec.Time) < 23*time.Hour {
		t.Fatalf("recovering %+v, want the schedule's 24h", rec)
	}
	eventually(t, pollInterval, func() bool {
		return strings.Contains(w.mustPipelines(address, "events", "partner", "--kind", "recovering"), "recovering")
	}, func() string { return "the recovering event never showed in the audit log" })
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)

	again := w.start("run")
	resumed := waitForEvent(t, again, "partner", "resumed", 1)
	if !resumed.NextAttemptAt.Equal(rec.NextAttemptAt) {
		t.Fatalf("resumed with next attempt %s, want the persisted %s (a day-long schedule is not cut short)", resumed.NextAttemptAt, rec.NextAttemptAt)
	}
	address = apiAddress(t, again)
	next := rec.NextAttemptAt.Local().Format("2006-01-02 15:04:05")
	if out := w.mustPipelines(address, "describe", "partner"); !strings.Contains(out, "Next attempt:      "+next) || !(strings.Contains(out, "(in 23h") || strings.Contains(out, "(in 24h0m)")) {
		t.Errorf("describe does not show the next attempt %s a day ahead:\n%s", next, out)
	}
	stopProcess(t, again)
}

// A dead-letter rule sends the record a destination names to the
// dead-letter queue, with the error and the rule's name, and the pipeline
// goes on without a restart.
func TestDeadLetterRuleOnTheRealBinary(t *testing.T) {
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
          rate: 500
      - id: dst
        type: destination
        plugin: builtin:chaos
        settings:
          path: ./out.jsonl
          fail.on: write
          fail.after: 20
          fail.count: 1
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
	p := w.start("run")
	out := filepath.Join(w.dir, "out.jsonl")
	waitForRecords(t, p, out, 60)
	dlq := filepath.Join(w.dir, "dlq.jsonl")
	var lines []string
	eventually(t, pollInterval, func() bool {
		b, _ := os.ReadFile(dlq)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(b) > 0
	}, func() string { return "nothing in the dead-letter queue; output:\n" + p.stderr.String() })
	if len(lines) != 1 || !strings.Contains(lines[0], `"conduit.dlq.rule":"poison-rows"`) ||
		!strings.Contains(lines[0], "deadlock detected on row") || !strings.Contains(lines[0], `"conduit.dlq.nack.node.id":"rows:dst-acker"`) {
		t.Fatalf("dead-letter queue %q, want one record with the rule, the error and the destination", lines)
	}
	for _, e := range events(t, p, "rows") {
		if e.Event == "recovering" || e.Event == "fault" {
			t.Fatalf("the pipeline restarted although the rule dead-lettered the record: %+v", e)
		}
	}
	stopProcess(t, p)
	got := ids(t, out)
	if slices.Contains(got, 21) || !slices.Contains(got, 20) || !slices.Contains(got, 22) {
		t.Errorf("destination holds %d records; want every one but the 21st", len(got))
	}
}

// A record that fails the same way on quarantine-after runs in a row is
// sent to the dead-letter queue by the next run, which then goes on.
func TestPoisonRecordIsQuarantinedOnTheRealBinary(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: poison
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
          fail.count: 2
          fail.code: 503
          fail.message: row is locked
          fail.record: true
    dead-letter-queue:
      plugin: builtin:file
      settings: {path: ./dlq.jsonl}
      window-size: 0
    error-recovery:
      min-delay: 50ms
      quarantine-after: 2
`)
	p := w.start("run")
	dlq := filepath.Join(w.dir, "dlq.jsonl")
	var lines []string
	eventually(t, pollInterval, func() bool {
		b, _ := os.ReadFile(dlq)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(b) > 0
	}, func() string { return "nothing in the dead-letter queue; output:\n" + p.stderr.String() })
	if len(lines) != 1 || !strings.Contains(lines[0], `"conduit.dlq.rule":"quarantine"`) || !strings.Contains(lines[0], "row is locked") ||
		!strings.Contains(lines[0], `"id":21`) {
		t.Fatalf("dead-letter queue %q, want record 21 quarantined with its error", lines)
	}
	// The audit log's fault event says what happened.
	faults := w.mustPipelines(apiAddress(t, p), "events", "poison", "--kind", "fault", "-o", "json")
	if n := strings.Count(faults, `"kind":"fault"`); n != 2 || !strings.Contains(faults, "record quarantined: 2 runs in a row failed on it") {
		t.Fatalf("%d fault events, want 2, the second quarantining the record:\n%s", n, faults)
	}
	waitForEvent(t, p, "poison", "recovered", 1)
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 60)
	// The diversion is an audited decision of its own, once the run ends.
	w.mustPipelines(apiAddress(t, p), "stop", "poison")
	diverted := w.mustPipelines(apiAddress(t, p), "events", "poison", "--kind", "dead-lettered", "-o", "json")
	if strings.Count(diverted, `"kind":"dead-lettered"`) != 1 || !strings.Contains(diverted, `"rule":"quarantine"`) ||
		!strings.Contains(diverted, `1 record sent to the dead-letter queue instead of the destinations by quarantine`) ||
		!strings.Contains(diverted, `position \"21\"`) {
		t.Fatalf("dead-lettered events:\n%s\nwant one naming quarantine and the record's position", diverted)
	}
	stopProcess(t, p)
}

// The record a standalone destination names (sdk.ForRecord, carried as
// details.position across the process boundary) is what a dead-letter
// rule sends to the queue.
func TestDeadLetterRuleTakesTheRecordAStandaloneDestinationNames(t *testing.T) {
	t.Parallel()
	w := standaloneWorkspace(t, `version: "2.2"
pipelines:
  - id: remote
    connectors:
      - id: src
        type: source
        plugin: builtin:chaos
        settings:
          format.options.id: int
          rate: 500
      - id: dst
        type: destination
        plugin: standalone:flaky
        settings:
          path: ./out.jsonl
          fail.on: write
          fail.after: 20
          fail.count: 1
          fail.state: ./flaky.state.json
          fail.code: 409
          fail.message: row version conflict
          fail.record: true
    dead-letter-queue:
      plugin: builtin:file
      settings: {path: ./dlq.jsonl}
      window-size: 0
    error-recovery:
      rules:
        - name: conflicts
          match: {codes: ["409"], plugins: ["standalone:flaky"]}
          action: dead-letter
`)
	p := w.start("run")
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 60)
	dlq := filepath.Join(w.dir, "dlq.jsonl")
	var lines []string
	eventually(t, pollInterval, func() bool {
		b, _ := os.ReadFile(dlq)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(b) > 0
	}, func() string { return "nothing in the dead-letter queue; output:\n" + p.stderr.String() })
	if len(lines) != 1 || !strings.Contains(lines[0], `"conduit.dlq.rule":"conflicts"`) || !strings.Contains(lines[0], "row version conflict") ||
		!strings.Contains(lines[0], `"id":21`) {
		t.Fatalf("dead-letter queue %q, want record 21 dead-lettered by the rule", lines)
	}
	for _, e := range events(t, p, "remote") {
		if e.Event == "recovering" || e.Event == "degraded" {
			t.Fatalf("the pipeline restarted or degraded although the rule dead-lettered the record: %+v", e)
		}
	}
	stopProcess(t, p)
}
