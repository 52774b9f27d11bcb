package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A pipeline file of Conduit's version 1 format runs, with its processor.
func TestVersion1PipelineFileRuns(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, `version: 1.0
pipelines:
  old:
    connectors:
      src:
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: "200"
      out:
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
    processors:
      tag:
        type: field.set
        settings:
          field: .Metadata.from
          value: '{{ upper "v1" }}'
`)
	validate := exec.Command(w.bin, "pipelines", "validate", "pipelines/p.yml")
	validate.Dir = w.dir
	if out, err := validate.CombinedOutput(); err != nil || !strings.Contains(string(out), "1 valid pipeline: old") {
		t.Errorf("validate: %v\n%s", err, out)
	}
	p := w.start("run")
	out := filepath.Join(w.dir, "out.jsonl")
	waitForRecords(t, p, out, 10)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}
	if got := ids(t, out); len(got) < 10 || got[0] != 1 {
		t.Errorf("records %v, want the sequence from 1", got[:min(len(got), 5)])
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if !strings.Contains(first, `"from":"V1"`) {
		t.Errorf("the processor did not run: %s", first)
	}
}
