package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// varsPipeline takes its rate and its output directory from the
// environment, and its description from a variable that is never set.
const varsPipeline = `version: "2.2"
pipelines:
  - id: vars
    description: run by ${VARS_E2E_NOBODY}
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: ${VARS_E2E_RATE}
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ${VARS_E2E_OUT}/x.jsonl
`

// startWithEnv is workspace.start with variables added to the environment.
func (w *workspace) startWithEnv(env []string, args ...string) *process {
	w.t.Helper()
	cmd := exec.Command(w.bin, args...)
	cmd.Dir = w.dir
	cmd.Env = append(append(os.Environ(), "CONDUIT_API_HTTP_ADDRESS=127.0.0.1:0"), env...)
	p := &process{cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout = p.stderr
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	w.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func TestPipelineFileVariablesComeFromTheEnvironment(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, varsPipeline)
	outDir := filepath.Join(w.dir, "outdir")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := w.startWithEnv([]string{"VARS_E2E_RATE=200", "VARS_E2E_OUT=" + outDir}, "run")
	waitForRecords(t, p, filepath.Join(outDir, "x.jsonl"), 10)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}
	msg := p.stderr.String()
	if !strings.Contains(msg, "p.yml:4") || !strings.Contains(msg, "VARS_E2E_NOBODY is not set") {
		t.Errorf("no warning naming the file, line and variable that is not set:\n%s", msg)
	}
	assertNoLiteralVariableFiles(t, w.dir)
}

func TestAnUnsetVariableNeverBecomesAFileName(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, varsPipeline)
	// VARS_E2E_OUT is not set: "${VARS_E2E_OUT}/x.jsonl" must neither be
	// written as such nor become /x.jsonl.
	env := []string{"VARS_E2E_RATE=200"}
	validate := exec.Command(w.bin, "pipelines", "validate", "pipelines/p.yml")
	validate.Dir = w.dir
	validate.Env = append(os.Environ(), env...)
	out, err := validate.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "p.yml:17") || !strings.Contains(string(out), "VARS_E2E_OUT is not set") {
		t.Errorf("validate (err %v) does not refuse the path naming file, line and variable:\n%s", err, out)
	}

	p := w.startWithEnv(env, "run")
	eventually(t, pollInterval, func() bool {
		return strings.Contains(p.stderr.String(), "pipelines loaded")
	}, func() string { return "conduit did not load its pipelines:\n" + p.stderr.String() })
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}
	msg := p.stderr.String()
	if !strings.Contains(msg, "p.yml:17") || !strings.Contains(msg, `pipeline \"vars\"`) || !strings.Contains(msg, "VARS_E2E_OUT is not set") {
		t.Errorf("the refused pipeline's error does not name file:line, pipeline and variable:\n%s", msg)
	}
	assertNoLiteralVariableFiles(t, w.dir)
	if _, err := os.Stat("/x.jsonl"); err == nil {
		t.Errorf("/x.jsonl exists")
	}
}

// assertNoLiteralVariableFiles fails when a file or directory under dir
// is named after a variable reference.
func assertNoLiteralVariableFiles(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), "$") {
			t.Errorf("%s was created", path)
		}
		return nil
	})
}
