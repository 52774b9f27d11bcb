package main

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// crashLoopPipelines: "loop" never moves a record (its script never
// returns), "ok" moves records all the time.
const crashLoopPipelines = `version: "2.2"
pipelines:
  - id: loop
    status: running
    connectors:
      - id: src
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./loop.jsonl
    processors:
      - id: spin
        plugin: custom.javascript
        settings:
          script: "function process(rec) { while (true) {} }"
  - id: ok
    status: running
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: 200
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./ok.jsonl
`

// The crash-loop guard on the real binary: conduit is killed (SIGKILL,
// as the kernel's OOM killer or a crash would end it) while "loop" runs
// and before it moved a record, three times in a row
// (pipelines.crash-loop-after's default). The next start does not run
// "loop" again: it is degraded with the crash-loop cause, audited, while
// conduit stays up and "ok", which moved records before each kill, runs.
// `conduit pipelines start` runs "loop" again.
func TestCrashLoopGuardDegradesThePipelineConduitDiesIn(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, crashLoopPipelines)
	w.write("conduit.yml", "log:\n  format: json\n  level: info\npipelines:\n  graceful-stop-timeout: 2s\n")
	for kill := 1; kill <= 3; kill++ {
		before := countLines(t, filepath.Join(w.dir, "ok.jsonl"))
		p := w.start("run")
		// Its run was built, so its mark is on disk (the run is built only
		// after that).
		eventually(t, pollInterval, func() bool { return runStarted(p, "loop") },
			func() string { return "loop's run never started; output:\n" + p.stderr.String() })
		// ok moved records in this process, which clears its own mark.
		waitForRecords(t, p, filepath.Join(w.dir, "ok.jsonl"), before+50)
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
	}
	p := w.start("run")
	address := apiAddress(t, p)
	e := waitForEvent(t, p, "loop", "degraded", 1)
	if e.Reason != "crash loop" || e.Class != "fatal" || !strings.Contains(e.Error, "3 times in a row") {
		t.Fatalf("loop degraded with %+v, want the crash-loop cause", e)
	}
	if runStarted(p, "loop") {
		t.Error("loop was run again although conduit died in its last three runs")
	}
	rows := tableRows(w.mustPipelines(address, "ls"))
	if r := rows["loop"]; len(r) < 2 || r[1] != "degraded" {
		t.Errorf("loop: %v, want degraded", r)
	}
	if r := rows["ok"]; len(r) < 2 || r[1] != "running" {
		t.Errorf("ok: %v, want running", r)
	}
	waitForRecords(t, p, filepath.Join(w.dir, "ok.jsonl"), countLines(t, filepath.Join(w.dir, "ok.jsonl"))+50)
	if out := w.mustPipelines(address, "describe", "loop"); !strings.Contains(out, "crash loop") || !strings.Contains(out, "conduit died") {
		t.Errorf("describe loop does not say why it is degraded:\n%s", out)
	}
	if out := w.mustPipelines(address, "start", "loop"); out != "pipeline loop is running\n" {
		t.Fatalf("start of the crash-looped pipeline: %q", out)
	}
	eventually(t, pollInterval, func() bool { return runStarted(p, "loop") },
		func() string { return "loop's run never started after the start; output:\n" + p.stderr.String() })
	stopProcess(t, p)
}

// runStarted reports whether p logged that a run of pipeline id opened
// its connectors.
func runStarted(p *process, id string) bool {
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var l struct {
			Msg        string `json:"msg"`
			PipelineID string `json:"pipeline_id"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.PipelineID == id && strings.HasPrefix(l.Msg, "pipeline run started") {
			return true
		}
	}
	return false
}
