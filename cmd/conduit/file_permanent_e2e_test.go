package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Our own file connectors' permanent errors are fatal: a line longer than
// the source's limit and a destination path that is a directory were
// retried forever.
func TestFileConnectorsPermanentErrorsAreFatal(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: longline
    connectors:
      - {id: src, type: source, plugin: "builtin:file", settings: {path: ./big.txt}}
      - {id: dst, type: destination, plugin: "builtin:file", settings: {path: ./out.jsonl}}
  - id: dirdest
    connectors:
      - {id: src, type: source, plugin: "builtin:generator", settings: {format.options.id: int, rate: 10}}
      - {id: dst, type: destination, plugin: "builtin:file", settings: {path: ./outdir}}
`)
	w.write("conduit.yml", "log:\n  format: json\n")
	w.write("big.txt", strings.Repeat("x", 16<<20+1)+"\n")
	if err := os.Mkdir(filepath.Join(w.dir, "outdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := w.start("run")
	for id, c := range map[string]struct {
		code    int
		message string
	}{
		"longline": {413, "the line at offset 0 is longer than"},
		"dirdest":  {400, "is a directory"},
	} {
		e := waitForEvent(t, p, id, "degraded", 1)
		if e.Reason != "fatal error" || e.Class != "fatal" || e.Code != c.code || !strings.Contains(e.Error, c.message) {
			t.Errorf("%s: degraded %+v, want fatal %d saying %q", id, e, c.code, c.message)
		}
	}
	stopProcess(t, p)
}
