package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A file destination whose output was rotated away after a crash cannot
// read back what the killed run wrote after its last saved position: the
// records it had in flight may be written again, and the pipeline's audit
// log says so (dedup-unverified), naming the destination. Rotating after a
// clean stop is no such case (pkg/conduit's tests): nothing was in flight.
func TestOutputRotatedAfterACrashIsAnAuditedDecision(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 5000))
	out := filepath.Join(w.dir, "out.jsonl")
	p := w.start("run")
	waitForRecords(t, p, out, 1000)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	if err := os.Rename(out, out+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p = w.start("run")
	address := apiAddress(t, p)
	waitForRecords(t, p, out, 100)
	events := w.mustPipelines(address, "events", "seq", "--kind", "dedup-unverified", "-o", "json")
	if n := strings.Count(strings.TrimSpace(events), "\n") + 1; strings.TrimSpace(events) == "" || n != 1 ||
		!strings.Contains(events, `"component":"out"`) || !strings.Contains(events, "destination out could not say what it holds of the last run") {
		t.Errorf("dedup-unverified events after the output was rotated away from a killed run:\n%s", events)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; output:\n%s", code, p.stderr.String())
	}
}
