package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	wasmOnce sync.Once
	wasmPath string
	wasmErr  error
)

// wasmProcessor builds the test processor of pkg/processor (a standalone
// processor written with Conduit's processor SDK) for wasip1, once per test
// process.
func wasmProcessor(t *testing.T) string {
	t.Helper()
	wasmOnce.Do(func() {
		dir, err := os.MkdirTemp("", "conduit-e2e-wasm-")
		if err != nil {
			wasmErr = err
			return
		}
		wasmPath = filepath.Join(dir, "upper.wasm")
		cmd := exec.Command("go", "build", "-o", wasmPath, "../../pkg/processor/testdata/wasmproc")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			wasmErr = fmt.Errorf("GOOS=wasip1 GOARCH=wasm go build: %v\n%s", err, out)
		}
	})
	if wasmErr != nil {
		t.Fatal(wasmErr)
	}
	return wasmPath
}

// TestStandaloneWasmProcessors runs bin/conduit with a standalone processor
// in processors.path, compiled to machine code as in production: records
// are transformed; a record the processor rejects goes to the dead-letter
// queue; an error with code 503 makes the pipeline recover; a module that
// panics degrades its pipeline with an error that says so, and conduit and
// its other pipelines go on; a file that is not a module is reported by
// name. The second start takes the compiled module from the cache.
//
// The compilation cache outlives the test run (compiling takes tens of
// seconds): the first run on a machine compiles, later ones load.
func TestStandaloneWasmProcessors(t *testing.T) {
	cache := filepath.Join(os.TempDir(), "conduit-wasm-e2e-cache")
	t.Setenv("XDG_CACHE_HOME", cache)
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: upper
    status: running
    connectors:
      - id: src
        type: source
        plugin: builtin:file
        settings:
          path: ./in.txt
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
    processors:
      - id: decode
        plugin: json.decode
        settings:
          field: .Payload.After
      - id: up
        plugin: test.upper
        settings:
          prefix: "x-"
    dead-letter-queue:
      plugin: builtin:file
      settings:
        path: ./rejected.jsonl
      window-size: 10
      window-nack-threshold: 5
  - id: crash
    status: running
    connectors:
      - id: src
        type: source
        plugin: builtin:file
        settings:
          path: ./crash.txt
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./crash.jsonl
    processors:
      - id: decode
        plugin: json.decode
        settings:
          field: .Payload.After
      - id: up
        plugin: standalone:test.upper@v0.1.0
  - id: retry
    status: running
    connectors:
      - id: src
        type: source
        plugin: builtin:file
        settings:
          path: ./retry.txt
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./retry.jsonl
    processors:
      - id: decode
        plugin: json.decode
        settings:
          field: .Payload.After
      - id: up
        plugin: standalone:upper
`)
	wasm, err := os.ReadFile(wasmProcessor(t))
	if err != nil {
		t.Fatal(err)
	}
	w.write("processors/upper.wasm", string(wasm))
	w.write("processors/bad.wasm", "not a module")
	w.write("in.txt", "{\"name\":\"alice\"}\n{\"name\":\"fail\"}\n{\"name\":\"bob\"}\n")
	w.write("crash.txt", "{\"name\":\"panic\"}\n")
	w.write("retry.txt", "{\"name\":\"fail503\"}\n")

	p := w.start("run")
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 2)
	waitForRecords(t, p, filepath.Join(w.dir, "rejected.jsonl"), 1)
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(processorsTestFile(t, filepath.Join(w.dir, "out.jsonl"))), "\n") {
		var rec struct {
			Payload struct {
				After map[string]any `json:"after"`
			} `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		names = append(names, fmt.Sprint(rec.Payload.After["name"]))
	}
	if got := strings.Join(names, ","); got != "x-ALICE,x-BOB" {
		t.Errorf("names written %s, want x-ALICE,x-BOB", got)
	}
	rejected := processorsTestFile(t, filepath.Join(w.dir, "rejected.jsonl"))
	if !strings.Contains(rejected, "is refused") || !strings.Contains(rejected, `"conduit.dlq.nack.node.id":"upper:up"`) {
		t.Errorf("dead-letter record: %s", rejected)
	}

	e := waitForEvent(t, p, "crash", "degraded", 1)
	if e.Class != "fatal" || !strings.Contains(e.Error, "standalone:test.upper@v0.1.0 (upper.wasm) stopped") || !strings.Contains(e.Error, "boom on record") {
		t.Errorf("crash: degraded %+v, want a fatal error saying the module panicked", e)
	}
	e = waitForEvent(t, p, "retry", "recovering", 1)
	if e.Class != "transient" || e.Code != 503 || !strings.Contains(e.Error, "backend unavailable") {
		t.Errorf("retry: recovering %+v, want a transient error with code 503", e)
	}
	out := p.stderr.String()
	if !strings.Contains(out, "not a standalone processor; skipped") || !strings.Contains(out, "bad.wasm") {
		t.Errorf("bad.wasm is not reported; output:\n%s", out)
	}
	stopProcess(t, p)

	cached, err := os.ReadDir(filepath.Join(cache, "conduit", "wasm"))
	if err != nil || len(cached) == 0 {
		t.Fatalf("nothing in the compilation cache: %v", err)
	}
	// Again: the module is not compiled again (wazero's cache is keyed by
	// the module's content, and a compilation would replace the file), and
	// the processors still run.
	before := cacheFiles(t, filepath.Join(cache, "conduit", "wasm"))
	w.write("in.txt", "{\"name\":\"alice\"}\n{\"name\":\"fail\"}\n{\"name\":\"bob\"}\n{\"name\":\"carol\"}\n")
	p = w.start("run")
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 3)
	stopProcess(t, p)
	if after := cacheFiles(t, filepath.Join(cache, "conduit", "wasm")); after != before {
		t.Errorf("compilation cache changed on the second start:\nbefore %s\nafter  %s", before, after)
	}
}

// cacheFiles lists the files under dir with their modification times, for
// comparison.
func cacheFiles(t *testing.T, dir string) string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			files = append(files, fmt.Sprintf("%s@%s", strings.TrimPrefix(path, dir), fi.ModTime()))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(files, " ")
}
