package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/conduitry/conduit/pkg/clocktest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests run the real binary the way a user does: build it, write a
// conduit.yml and a pipeline file, start it, signal or kill it, start it
// again, and read the output file.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// conduitBinary builds bin/conduit once per test process.
func conduitBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "conduit-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "conduit")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// e2eTimeout guards against hangs; nothing waits this long when it works.
const e2eTimeout = 60 * time.Second

type workspace struct {
	t   *testing.T
	dir string
	bin string
}

func newWorkspace(t *testing.T, pipelineYAML string) *workspace {
	t.Helper()
	w := &workspace{t: t, dir: t.TempDir(), bin: conduitBinary(t)}
	w.write("conduit.yml", "log:\n  format: json\n  level: info\npipelines:\n  graceful-stop-timeout: 20s\n")
	if pipelineYAML != "" {
		w.write("pipelines/p.yml", pipelineYAML)
	}
	return w
}

func (w *workspace) write(name, content string) {
	w.t.Helper()
	path := filepath.Join(w.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

type process struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (w *workspace) start(args ...string) *process {
	w.t.Helper()
	cmd := exec.Command(w.bin, args...)
	cmd.Dir = w.dir
	// Port 0: tests must not collide with each other or with a conduit the
	// developer is running; tests that call the API read the address from
	// the log.
	cmd.Env = append(os.Environ(), "CONDUIT_API_HTTP_ADDRESS=127.0.0.1:0")
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

// wait returns the exit code.
func (p *process) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // keep it for Cleanup
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(e2eTimeout):
		t.Fatalf("process did not exit; output:\n%s", p.stderr.String())
		return -1
	}
}

// ids reads the generator's sequence numbers (payload.after.id) from the
// OpenCDC JSON lines of path, in file order.
func ids(t *testing.T, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Payload struct {
				After struct {
					ID int `json:"id"`
				} `json:"after"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			// The process may have been killed mid-line; only a torn last
			// line is acceptable, and it is followed by nothing.
			t.Logf("unparsable line %d: %q", len(out)+1, sc.Text())
			out = append(out, -1)
			continue
		}
		out = append(out, rec.Payload.After.ID)
	}
	return out
}

// pollInterval is how often the tests look again at what they wait for.
const pollInterval = 20 * time.Millisecond

// eventually is how these tests wait: it polls done, pausing up to
// interval between polls, until it returns true, and fails the test with
// failure() after e2eTimeout.
func eventually(t *testing.T, interval time.Duration, done func() bool, failure func() string) {
	t.Helper()
	clocktest.Wait{Timeout: e2eTimeout, MaxPause: interval}.Until(t, done, failure)
}

// waitForRecords waits until path holds at least n lines (records). It
// reads only what was appended since its last look: parsing the whole
// file on each look would take longer and longer while a fast pipeline
// keeps writing, and could never catch up with it on a loaded machine.
func waitForRecords(t *testing.T, p *process, path string, n int) {
	t.Helper()
	var (
		offset int64
		lines  int
	)
	buf := make([]byte, 1<<20)
	eventually(t, pollInterval, func() bool {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for lines < n {
			k, err := f.ReadAt(buf, offset)
			// Only complete lines count: a line being written is
			// counted once its newline is there.
			last := bytes.LastIndexByte(buf[:k], '\n')
			if last < 0 {
				break // no complete line beyond offset yet
			}
			lines += bytes.Count(buf[:last+1], []byte{'\n'})
			offset += int64(last + 1)
			if err != nil || k < len(buf) {
				break
			}
		}
		return lines >= n
	}, func() string {
		return fmt.Sprintf("fewer than %d records in %s (%d); conduit output:\n%s", n, path, lines, p.stderr.String())
	})
}

const generatorToFile = `version: "2.2"
pipelines:
  - id: seq
    status: running
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          format.options.name: string
          rate: %d
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
`

// segments splits the id sequence into runs of consecutive ids. Each restart
// begins a new segment when it re-delivers records.
func checkSequence(t *testing.T, got []int, maxDuplicates int) (duplicates int) {
	t.Helper()
	if len(got) == 0 {
		t.Fatal("no records")
	}
	if got[0] != 1 {
		t.Fatalf("first id %d, want 1", got[0])
	}
	maxSeen := 0
	for i, id := range got {
		if id == -1 {
			t.Fatalf("torn line at %d of %d", i+1, len(got))
		}
		switch {
		case id == maxSeen+1:
			maxSeen = id
		case id <= maxSeen:
			duplicates++
		default:
			t.Fatalf("gap: id %d follows %d (line %d)", id, maxSeen, i+1)
		}
	}
	if duplicates > maxDuplicates {
		t.Fatalf("%d duplicates, more than the %d records that can be in flight", duplicates, maxDuplicates)
	}
	return duplicates
}

func TestGracefulStopAndResumeContinueTheSequence(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 2000))
	out := filepath.Join(w.dir, "out.jsonl")

	for round := 1; round <= 3; round++ {
		p := w.start("run")
		// Records of the rounds before are in the file already: wait for
		// this run before counting.
		waitForEvent(t, p, "seq", "running", 1)
		waitForRecords(t, p, out, 500*round)
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t); code != 0 {
			t.Fatalf("round %d: exit code %d after SIGINT, want 0; output:\n%s", round, code, p.stderr.String())
		}
		if !strings.Contains(p.stderr.String(), `"pipeline_id":"seq"`) {
			t.Fatalf("log lines about the pipeline carry no pipeline_id:\n%s", p.stderr.String())
		}
	}
	// A graceful stop acknowledges and persists everything written, so the
	// restarts re-deliver nothing.
	if d := checkSequence(t, ids(t, out), 0); d != 0 {
		t.Fatalf("%d duplicates after graceful stops", d)
	}
}

func TestSIGKILLResumesWithoutGap(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 5000))
	out := filepath.Join(w.dir, "out.jsonl")

	for round := 1; round <= 3; round++ {
		p := w.start("run")
		waitForRecords(t, p, out, 1000*round)
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
	}
	p := w.start("run")
	waitForRecords(t, p, out, 4000)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; output:\n%s", code, p.stderr.String())
	}
	// Duplicates come only from records written but not yet acknowledged
	// and persisted when the process died: at most the in-flight window
	// (16 batches of 1024) per kill.
	d := checkSequence(t, ids(t, out), 3*16*1024)
	t.Logf("%d duplicates after 3 SIGKILLs", d)
}

func TestSecondProcessOnSameDatabaseFailsClearly(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 100))
	first := w.start("run")
	waitForRecords(t, first, filepath.Join(w.dir, "out.jsonl"), 1)

	second := w.start("run")
	if code := second.wait(t); code == 0 {
		t.Fatal("second process on the same database exited 0")
	}
	msg := second.stderr.String()
	if !strings.Contains(msg, "in use by another conduit process") || !strings.Contains(msg, "conduit.db") {
		t.Fatalf("unclear message for a locked database:\n%s", msg)
	}
	if strings.Contains(msg, "goroutine ") {
		t.Fatalf("a stack trace instead of a message:\n%s", msg)
	}
	_ = first.cmd.Process.Signal(syscall.SIGINT)
	if code := first.wait(t); code != 0 {
		t.Fatalf("first process exit code %d", code)
	}
}

func TestBadConfigExitsBeforeDoingAnything(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 100))
	w.write("conduit.yml", "log:\n  level: info\npipelines:\n  error-recovery:\n    jitter: 1.5\n")
	p := w.start("run")
	if code := p.wait(t); code == 0 {
		t.Fatal("exit code 0 with an invalid conduit.yml")
	}
	msg := p.stderr.String()
	if !strings.Contains(msg, "conduit.yml:5") || !strings.Contains(msg, "pipelines.error-recovery.jitter") {
		t.Fatalf("message does not name the file, line and key:\n%s", msg)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "conduit.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the database was created although the config was invalid (stat: %v)", err)
	}
}

func TestInvalidPipelineIsReportedAndValidOnesRun(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 1000))
	w.write("pipelines/bad.yml", `version: "2.2"
pipelines:
  - id: broken
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
          rate: fast
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./bad.jsonl
`)
	p := w.start("run")
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 10)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	msg := p.stderr.String()
	if !strings.Contains(msg, "bad.yml:10") || !strings.Contains(msg, `pipeline \"broken\"`) || !strings.Contains(msg, "settings.rate") {
		t.Fatalf("the invalid pipeline's error does not name file:line, pipeline and field:\n%s", msg)
	}
}

func TestInitWritesFilesAndRefusesToOverwrite(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	target := filepath.Join(w.dir, "project")
	p := w.start("init", target)
	if code := p.wait(t); code != 0 {
		t.Fatalf("init failed: %s", p.stderr.String())
	}
	for _, f := range []string{"conduit.yml", "pipelines/example.yml"} {
		if _, err := os.Stat(filepath.Join(target, f)); err != nil {
			t.Fatalf("init did not write %s: %v", f, err)
		}
	}
	again := w.start("init", target)
	if code := again.wait(t); code == 0 || !strings.Contains(again.stderr.String(), "--force") {
		t.Fatalf("second init: exit %d, output %s; want a refusal mentioning --force", code, again.stderr.String())
	}
	forced := w.start("init", "--force", target)
	if code := forced.wait(t); code != 0 {
		t.Fatalf("init --force failed: %s", forced.stderr.String())
	}

	// What init writes runs as is.
	run := exec.Command(w.bin, "run")
	run.Dir = target
	run.Env = append(os.Environ(), "CONDUIT_API_HTTP_ADDRESS=127.0.0.1:0")
	runOut := &syncBuffer{}
	run.Stdout, run.Stderr = runOut, runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	proc := &process{cmd: run, stderr: runOut, done: make(chan error, 1)}
	go func() { proc.done <- run.Wait() }()
	t.Cleanup(func() { _ = run.Process.Kill() })
	waitForRecords(t, proc, filepath.Join(target, "example.out"), 3)
	_ = run.Process.Signal(syscall.SIGINT)
	if code := proc.wait(t); code != 0 {
		t.Fatalf("run of the initialised project: exit %d\n%s", code, runOut.String())
	}
}

func TestExamplePipelineMatchesInit(t *testing.T) {
	t.Parallel()
	repoCopy, err := os.ReadFile(filepath.Join("..", "..", "pipelines", "example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(repoCopy, examplePipeline) {
		t.Fatal("pipelines/example.yml differs from cmd/conduit/example.yml (what conduit init writes); copy one over the other")
	}
}

// TestRepositoryPipelinesFailAndHeal runs what `make run` runs - the
// repository's conduit.yml and pipelines/ - and sees what the README
// promises a first run shows: the example writing records and blip failing
// three times, recovering and writing on. Only the backoff is shortened.
func TestRepositoryPipelinesFailAndHeal(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	files, err := filepath.Glob(filepath.Join("..", "..", "pipelines", "*.yml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("the repository's pipelines: %v %v", files, err)
	}
	for _, f := range append(files, filepath.Join("..", "..", "conduit.yml")) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel := filepath.Base(f)
		if filepath.Base(filepath.Dir(f)) == "pipelines" {
			rel = filepath.Join("pipelines", rel)
		}
		w.write(rel, string(raw))
	}
	p := w.start("run", "--log.format", "json", "--pipelines.error-recovery.min-delay", "100ms")

	for n := 1; n <= 3; n++ {
		e := waitForEvent(t, p, "blip", "recovering", n)
		if e.Code != 503 || e.Class != "transient" {
			t.Fatalf("blip: recovering #%d %+v, want code 503, class transient", n, e)
		}
	}
	waitForEvent(t, p, "blip", "recovered", 1)
	waitForRecords(t, p, filepath.Join(w.dir, "blip.out"), 60)
	waitForRecords(t, p, filepath.Join(w.dir, "example.out"), 3)
	for _, e := range events(t, p, "blip") {
		if e.Event == "degraded" {
			t.Fatalf("blip degraded: %+v", e)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(conduitBinary(t), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "conduit ") {
		t.Fatalf("version: %v %s", err, out)
	}
}
