package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// These tests run the real binary with the example standalone connector
// (examples/connectors/flaky), built the way `make build` builds it.

var (
	flakyOnce sync.Once
	flakyPath string
	flakyErr  error
)

func flakyBinary(t *testing.T) string {
	t.Helper()
	flakyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "conduit-e2e-flaky-")
		if err != nil {
			flakyErr = err
			return
		}
		flakyPath = filepath.Join(dir, "flaky")
		out, err := exec.Command("go", "build", "-o", flakyPath, "../../examples/connectors/flaky").CombinedOutput()
		if err != nil {
			flakyErr = fmt.Errorf("go build flaky: %v\n%s", err, out)
		}
	})
	if flakyErr != nil {
		t.Fatal(flakyErr)
	}
	return flakyPath
}

// standaloneWorkspace is a workspace with flaky installed in ./connectors.
func standaloneWorkspace(t *testing.T, pipeline string) *workspace {
	t.Helper()
	w := newWorkspace(t, pipeline)
	bin, err := os.ReadFile(flakyBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(w.dir, "connectors"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, "connectors", "flaky"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

func standalonePipeline(id, sourceSettings, destinationPlugin string) string {
	return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: %s
    connectors:
      - id: src
        type: source
        plugin: standalone:flaky
        settings:
          rate: 500
%s
      - id: dst
        type: destination
        plugin: %s
        settings:
          path: ./out.jsonl
    error-recovery:
      min-delay: 100ms
`, id, indent(sourceSettings, 10), destinationPlugin)
}

func TestStandaloneFatalErrorWrappedThreeTimesDegradesAtOnce(t *testing.T) {
	t.Parallel()
	w := standaloneWorkspace(t, standalonePipeline("fatal",
		"fail.on: read\nfail.after: 20\nfail.code: 422\nfail.format: typed\nfail.message: schema mismatch on column price", "builtin:file"))
	p := w.start("run")
	e := waitForEvent(t, p, "fatal", "degraded", 1)
	if e.Code != 422 || e.Class != "fatal" || e.Component != "src" || e.Reason != "fatal error" ||
		!strings.Contains(e.Error, "schema mismatch on column price") {
		t.Fatalf("degraded %+v, want the plugin's own 422 and message", e)
	}
	if n := len(filterEvents(events(t, p, "fatal"), "recovering")); n != 0 {
		t.Fatalf("a fatal plugin error was retried %d times", n)
	}
	stopProcess(t, p)
}

func TestStandaloneTransientErrorsRecover(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			w := standaloneWorkspace(t, standalonePipeline("blip",
				fmt.Sprintf("fail.on: read\nfail.after: 10\nfail.count: 2\nfail.state: ./state.json\nfail.format: %s", format), "builtin:file"))
			p := w.start("run")
			first := waitForEvent(t, p, "blip", "recovering", 1)
			if first.Class != "transient" || first.Component != "src" {
				t.Fatalf("recovering %+v", first)
			}
			wantSource := map[string]string{"json": "json", "text": "default"}[format]
			if got := classifiedBy(t, p, "blip"); got != wantSource {
				t.Fatalf("classified by %q, want %q", got, wantSource)
			}
			if e := waitForEvent(t, p, "blip", "recovered", 1); e.Status != "running" {
				t.Fatalf("recovered %+v", e)
			}
			waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 50)
			stopProcess(t, p)
			checkSequence(t, ids(t, filepath.Join(w.dir, "out.jsonl")), 16*1024)
		})
	}
}

// classifiedBy returns how the first fault of a pipeline was classified.
func classifiedBy(t *testing.T, p *process, id string) string {
	t.Helper()
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(line, `"event":"recovering"`) && strings.Contains(line, `"pipeline_id":"`+id+`"`) {
			_, rest, ok := strings.Cut(line, `"classified_by":"`)
			if ok {
				v, _, _ := strings.Cut(rest, `"`)
				return v
			}
		}
	}
	return ""
}

func TestStandalonePluginKilledMidRunRecovers(t *testing.T) {
	t.Parallel()
	w := standaloneWorkspace(t, standalonePipeline("killed", "", "builtin:file"))
	p := w.start("run")
	out := filepath.Join(w.dir, "out.jsonl")
	waitForRecords(t, p, out, 20)

	// Find the plugin: a child process of conduit running connectors/flaky.
	pid := childPID(t, p.cmd.Process.Pid, "flaky")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e := waitForEvent(t, p, "killed", "recovering", 1)
	if e.Class != "transient" || !strings.Contains(e.Error, "exited") || !strings.Contains(e.Error, "killed") {
		t.Fatalf("recovering %+v, want a transient error naming the exit", e)
	}
	waitForEvent(t, p, "killed", "recovered", 1)
	before := len(ids(t, out))
	waitForRecords(t, p, out, before+20)
	stopProcess(t, p)
	checkSequence(t, ids(t, out), 16*1024)
}

func TestStandaloneMissingBinaryDegradesClearly(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, standalonePipeline("missing", "", "builtin:file"))
	p := w.start("run")
	e := waitForEvent(t, p, "missing", "degraded", 1)
	if e.Class != "fatal" || !strings.Contains(e.Error, "not found") || !strings.Contains(e.Error, "connectors") ||
		!strings.Contains(e.Error, "flaky") {
		t.Fatalf("degraded %+v, want a fatal error saying which executable is missing and where", e)
	}
	stopProcess(t, p)
}

func TestStandaloneSourceToStandaloneDestination(t *testing.T) {
	t.Parallel()
	w := standaloneWorkspace(t, standalonePipeline("both", "", "standalone:flaky"))
	p := w.start("run")
	out := filepath.Join(w.dir, "out.jsonl")
	waitForRecords(t, p, out, 100)
	stopProcess(t, p)
	checkSequence(t, ids(t, out), 0)
	// The runtime names the standalone source as Conduit does.
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(data), "\n"); !strings.Contains(first, `"conduit.source.connector.id":"both:src"`) || strings.Contains(first, "opencdc.version") {
		t.Errorf("first record %s, want conduit.source.connector.id both:src and no opencdc.version", first)
	}
	// No plugin outlives the runtime.
	if pids := childPIDs(p.cmd.Process.Pid, "flaky"); len(pids) != 0 {
		t.Fatalf("plugin processes left behind: %v", pids)
	}
}

// childPID waits for a child of parent whose command line contains name.
func childPID(t *testing.T, parent int, name string) int {
	t.Helper()
	var pids []int
	eventually(t, pollInterval, func() bool {
		pids = childPIDs(parent, name)
		return len(pids) > 0
	}, func() string { return fmt.Sprintf("no child process %q of %d", name, parent) })
	return pids[0]
}

func childPIDs(parent int, name string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		state, ppid, ok := procStat(pid)
		if !ok || ppid != parent || state == "Z" {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), name) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat reads a process's state letter and parent from
// /proc/<pid>/stat; ok is false once the process is gone.
func procStat(pid int) (state string, ppid int, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// stat: pid (comm) state ppid ...; comm may hold spaces and parentheses.
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 && i+2 <= len(rest) {
		rest = rest[i+2:]
	}
	if _, err := fmt.Sscanf(rest, "%s %d", &state, &ppid); err != nil {
		return "", 0, false
	}
	return state, ppid, true
}

// An executable in connectors.path that never answers - neither the
// question for its specification nor the handshake - and leaves children
// behind, one of them in a session of its own: each pipeline that needs it
// is degraded with an error naming it, SIGTERM ends conduit, and no
// process it started is left.
func TestStandaloneExecutableThatNeverAnswers(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("%d.%d", 4000+rand.N(1000), rand.N(1000000))
	pipeline := func(id, plugin string) string {
		return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: %s
    connectors:
      - id: src
        type: source
        plugin: %s
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./%s.jsonl
`, id, plugin, id)
	}
	w := newWorkspace(t, pipeline("by-name", "standalone:kafka"))
	w.write("pipelines/q.yml", pipeline("by-file", "standalone:silent"))
	w.write("conduit.yml", "log:\n  format: json\nconnectors:\n  start-timeout: 1s\n")
	w.write("connectors/silent", fmt.Sprintf("#!/bin/sh\nsleep %[1]s &\nsetsid sleep %[1]s &\nexec sleep %[1]s\n", marker))
	if err := os.Chmod(filepath.Join(w.dir, "connectors/silent"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range markedPIDs(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	p := w.start("run")
	e := waitForEvent(t, p, "by-name", "degraded", 1)
	if e.Class != "fatal" || !strings.Contains(e.Error, "connectors/silent") || !strings.Contains(e.Error, "specs") {
		t.Fatalf("by-name degraded with %+v, want a fatal error naming the executable that did not answer", e)
	}
	if e := waitForEvent(t, p, "by-file", "degraded", 1); e.Class != "fatal" {
		t.Fatalf("by-file degraded with %+v, want a fatal error", e)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, p.stderr.String())
	}
	eventually(t, pollInterval, func() bool { return len(markedPIDs(marker)) == 0 },
		func() string { return fmt.Sprintf("processes the executable started are left: %v", markedPIDs(marker)) })
}

// markedPIDs are the live processes (zombies left out) whose command line
// contains marker.
func markedPIDs(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if state, _, ok := procStat(pid); ok && state != "Z" && strings.Contains(string(cmdline), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}
