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
	// A file read again (SIGHUP, as on a change) is expanded the same way.
	w.write("pipelines/q.yml", strings.Replace(varsPipeline, "id: vars", "id: later", 1))
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, pollInterval, func() bool {
		return strings.Contains(p.stderr.String(), "q.yml:17")
	}, func() string { return "the file read on SIGHUP was not refused:\n" + p.stderr.String() })
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

// A variable changed between two runs changes the pipeline: it starts again
// with the new value, from where it stopped.
func TestAChangedVariableIsAChangedPipeline(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, strings.Replace(varsPipeline, "    description: run by ${VARS_E2E_NOBODY}\n", "", 1))
	first, second := filepath.Join(w.dir, "first"), filepath.Join(w.dir, "second")
	for _, dir := range []string{first, second} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(out string) *process {
		p := w.startWithEnv([]string{"VARS_E2E_RATE=200", "VARS_E2E_OUT=" + out}, "run")
		waitForRecords(t, p, filepath.Join(out, "x.jsonl"), 10)
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		if code := p.wait(t); code != 0 {
			t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
		}
		return p
	}
	run(first)
	p := run(second)
	if msg := p.stderr.String(); !strings.Contains(msg, "pipeline configuration changed since the last run") {
		t.Errorf("the second run did not see a changed pipeline:\n%s", msg)
	}
	a, b := ids(t, filepath.Join(first, "x.jsonl")), ids(t, filepath.Join(second, "x.jsonl"))
	if len(a) == 0 || len(b) == 0 || b[0] != a[len(a)-1]+1 {
		t.Errorf("the second run starts at %v after the first ended at %v; want the next record", b[:min(1, len(b))], a[max(0, len(a)-1):])
	}
}

// A file applied through the API is expanded with conduit's environment,
// not the CLI's, as the files under pipelines.path are.
func TestAnAppliedFileIsExpandedWithConduitsEnvironment(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	if err := os.MkdirAll(filepath.Join(w.dir, "pipelines"), 0o755); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(w.dir, "outdir")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := w.startWithEnv([]string{"VARS_E2E_RATE=200", "VARS_E2E_OUT=" + outDir}, "run")
	address := apiAddress(t, p)
	w.write("applied.yml", strings.Replace(varsPipeline, "id: vars", "id: applied", 1))
	// The CLI's environment has neither variable; conduit's warnings come
	// back with the plan.
	if out := w.mustPipelines(address, "apply", "applied.yml"); !strings.Contains(out, "warning: api:applied.yml:4: description: environment variable VARS_E2E_NOBODY is not set") {
		t.Errorf("apply does not print conduit's warning:\n%s", out)
	}
	waitForRecords(t, p, filepath.Join(outDir, "x.jsonl"), 10)
	if msg := p.stderr.String(); !strings.Contains(msg, "api:applied.yml:4") || !strings.Contains(msg, "VARS_E2E_NOBODY is not set") {
		t.Errorf("no warning naming the applied file, line and variable:\n%s", msg)
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}
	assertNoLiteralVariableFiles(t, w.dir)
}
