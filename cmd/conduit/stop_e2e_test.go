package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spinPipeline is a pipeline whose JavaScript processor never returns: a
// graceful stop has a record in flight that never drains.
const spinPipeline = `version: "2.2"
pipelines:
  - id: spin
    status: running
    description: %s
    connectors:
      - id: src
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
          recordCount: "3"
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./spin.jsonl
    processors:
      - id: spin
        plugin: custom.javascript
        settings:
          script: "function process(rec) { while (true) {} }"
`

// A stop of a pipeline whose script never returns is bounded by
// pipelines.graceful-stop-timeout, whichever way it comes: while it
// drains, list says stopping; then `pipelines stop` returns, saying the
// stop was forced (degraded, force stop, and why); a start runs it again,
// and a change of its file updates it (the update's stop is bounded too).
func TestStopOfAScriptThatNeverReturnsIsBounded(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(spinPipeline, "first"))
	w.write("conduit.yml", "log:\n  format: json\n  level: info\npipelines:\n  graceful-stop-timeout: 2s\n")
	p := w.start("run")
	address := apiAddress(t, p)
	waitForEvent(t, p, "spin", "running", 1)
	eventually(t, pollInterval, func() bool { return strings.Contains(p.stderr.String(), "pipeline run started") },
		func() string { return "the run never started; output:\n" + p.stderr.String() })

	type result struct {
		res     cliResult
		elapsed time.Duration
	}
	stopped := make(chan result, 1)
	begun := time.Now()
	go func() {
		res := w.pipelines(address, "stop", "spin")
		stopped <- result{res, time.Since(begun)}
	}()
	waitForEvent(t, p, "spin", "stopping", 1)
	if row := tableRows(w.mustPipelines(address, "ls"))["spin"]; len(row) < 2 || row[1] != "stopping" {
		t.Errorf("list while the run drains: %v, want status stopping", row)
	}
	var r result
	select {
	case r = <-stopped:
	case <-time.After(e2eTimeout):
		t.Fatalf("pipelines stop had not returned after %s; output:\n%s", e2eTimeout, p.stderr.String())
	}
	if r.res.code != 0 || !strings.Contains(r.res.stdout, "pipeline spin is degraded (force stop)") ||
		!strings.Contains(r.res.stdout, "graceful stop did not finish within 2s") {
		t.Fatalf("pipelines stop: exit %d\n%s%s", r.res.code, r.res.stdout, r.res.stderr)
	}
	// The forced run ends at once here (the script is given up when its
	// context ends); a run that ignores it too is abandoned after another 2s.
	if r.elapsed > 10*time.Second {
		t.Errorf("pipelines stop took %s with a 2s graceful-stop-timeout", r.elapsed)
	}
	if row := tableRows(w.mustPipelines(address, "ls"))["spin"]; len(row) < 2 || row[1] != "degraded" {
		t.Errorf("list after the stop: %v, want degraded", row)
	}
	if out := w.mustPipelines(address, "start", "spin"); out != "pipeline spin is running\n" {
		t.Fatalf("start after the forced stop: %q", out)
	}
	waitForEvent(t, p, "spin", "running", 2)

	// An update of the stuck pipeline: its drain is forced after 2s too,
	// and the new version runs.
	w.write("pipelines/p.yml", fmt.Sprintf(spinPipeline, "second"))
	eventually(t, pollInterval, func() bool {
		return strings.Contains(p.stderr.String(), `"updated": 1`) || strings.Contains(p.stderr.String(), `"updated":1`)
	}, func() string { return "the changed file was never applied; output:\n" + p.stderr.String() })
	if out := w.mustPipelines(address, "describe", "spin"); !strings.Contains(out, "second") {
		t.Errorf("describe after the update does not show the new description:\n%s", out)
	}
	stopProcess(t, p)
}

// A stop while a standalone connector's executable has not answered the
// handshake cancels the handshake: it does not wait out
// connectors.start-timeout, and the pipeline is stopped, not failed.
func TestStopDuringAStandaloneHandshakeCancelsIt(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("%d.%d", 5000+rand.N(1000), rand.N(1000000))
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: hs
    status: running
    connectors:
      - id: src
        type: source
        plugin: standalone:silent
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./hs.jsonl
`)
	w.write("conduit.yml", "log:\n  format: json\nconnectors:\n  start-timeout: 20s\n")
	w.write("connectors/silent", fmt.Sprintf("#!/bin/sh\nexec sleep %s\n", marker))
	if err := os.Chmod(filepath.Join(w.dir, "connectors/silent"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range markedPIDs(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	p := w.start("run")
	address := apiAddress(t, p)
	waitForEvent(t, p, "hs", "running", 1)
	// The executable runs: the handshake is under way.
	eventually(t, pollInterval, func() bool { return len(markedPIDs(marker)) > 0 },
		func() string { return "the executable was never started; output:\n" + p.stderr.String() })
	begun := time.Now()
	res := w.pipelines(address, "stop", "hs")
	elapsed := time.Since(begun)
	if res.code != 0 || res.stdout != "pipeline hs is stopped\n" {
		t.Fatalf("pipelines stop: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if elapsed > 5*time.Second {
		t.Errorf("the stop took %s: it waited for the handshake's start timeout (20s) instead of cancelling it", elapsed)
	}
	if out := w.mustPipelines(address, "describe", "hs"); strings.Contains(out, "did not answer the handshake") {
		t.Errorf("the cancelled handshake was reported as the pipeline's error:\n%s", out)
	}
	eventually(t, pollInterval, func() bool { return len(markedPIDs(marker)) == 0 },
		func() string { return fmt.Sprintf("the executable is left running: %v", markedPIDs(marker)) })
	stopProcess(t, p)
}
