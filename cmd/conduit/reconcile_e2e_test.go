package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writeLikeAnEditor saves content the way most editors do: into a
// temporary file beside the target, renamed over it.
func (w *workspace) writeLikeAnEditor(name, content string) {
	w.t.Helper()
	tmp := filepath.Join(w.dir, filepath.Dir(name), "."+filepath.Base(name)+".swp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, name)); err != nil {
		w.t.Fatal(err)
	}
}

// A running conduit applies its pipeline files as they change: an update
// continues the sequence where it stopped, an added file starts a
// pipeline, a broken file leaves its pipeline running, a removed file
// deletes its pipeline; nothing restarts the process.
func TestPipelineFilesChangeWhileRunning(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 1000))
	out := filepath.Join(w.dir, "out.jsonl")
	p := w.start("run")
	waitForRecords(t, p, out, 200)

	// Changed: drained and started again with the new settings.
	w.writeLikeAnEditor("pipelines/p.yml", fmt.Sprintf(generatorToFile, 3000))
	waitForEvent(t, p, "seq", "stopping", 1)
	stopped := waitForEvent(t, p, "seq", "stopped", 1)
	if stopped.Reason != "updated" {
		t.Fatalf("stopped for %q, want updated", stopped.Reason)
	}
	waitForLog(t, p, `"fields":["connectors[gen].settings.rate"]`)
	waitForEvent(t, p, "seq", "running", 2)
	n := len(ids(t, out))
	waitForRecords(t, p, out, n+500)

	// Added.
	w.write("pipelines/q.yml", strings.NewReplacer("id: seq", "id: q", "./out.jsonl", "./q.jsonl").Replace(fmt.Sprintf(generatorToFile, 500)))
	waitForRecords(t, p, filepath.Join(w.dir, "q.jsonl"), 50)

	// Broken: the running version stays, the error names the file and field.
	w.writeLikeAnEditor("pipelines/p.yml", strings.Replace(fmt.Sprintf(generatorToFile, 3000), "rate: 3000", "rate: fast", 1))
	waitForLog(t, p, "the pipeline keeps running as it was until it is fixed")
	if !strings.Contains(p.stderr.String(), "p.yml:13") || !strings.Contains(p.stderr.String(), "settings.rate") {
		t.Fatalf("the error does not name file:line and field:\n%s", p.stderr.String())
	}
	n = len(ids(t, out))
	waitForRecords(t, p, out, n+500)
	// Fixed to what runs: nothing to do.
	w.writeLikeAnEditor("pipelines/p.yml", fmt.Sprintf(generatorToFile, 3000))

	// Removed: q is deleted, seq runs on.
	if err := os.Remove(filepath.Join(w.dir, "pipelines/q.yml")); err != nil {
		t.Fatal(err)
	}
	if e := waitForEvent(t, p, "q", "stopped", 1); e.Reason != "deleted" {
		t.Fatalf("q stopped for %q, want deleted", e.Reason)
	}
	waitForLog(t, p, `"deleted":1`)
	address := apiAddress(t, p)
	if rows := tableRows(w.mustPipelines(address, "list")); rows["q"] != nil || rows["seq"] == nil {
		t.Errorf("after q's file was removed the list has %v, want seq without q", rows)
	}
	if events := w.mustPipelines(address, "events", "q"); !strings.Contains(events, "deleted") {
		t.Errorf("q's audit events have no deleted event:\n%s", events)
	}
	if got := len(events(t, p, "seq")); got == 0 {
		t.Fatal("no events for seq")
	}
	if n := len(filterEvents(events(t, p, "seq"), "stopping")); n != 1 {
		t.Errorf("seq was stopped %d times, want once (the update); fixing the file back to what runs must change nothing", n)
	}
	stopProcess(t, p)
	// The update drained and resumed from the saved position: no gap, no
	// duplicate.
	checkSequence(t, ids(t, out), 0)
}

// With watching off, changes wait for SIGHUP.
func TestSIGHUPAppliesThePipelineFiles(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 1000))
	p := w.start("run", "--pipelines.watch=false")
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 100)
	w.write("pipelines/q.yml", strings.NewReplacer("id: seq", "id: q", "./out.jsonl", "./q.jsonl").Replace(fmt.Sprintf(generatorToFile, 500)))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitForRecords(t, p, filepath.Join(w.dir, "q.jsonl"), 10)
	if strings.Contains(p.stderr.String(), "watching the pipeline files for changes") {
		t.Error("pipelines.watch=false still watches")
	}
	stopProcess(t, p)
}
