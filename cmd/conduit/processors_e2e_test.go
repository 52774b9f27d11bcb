package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConduitExamplePipelineJavaScript runs Conduit's example pipeline for
// its custom.javascript processor, unchanged, and checks that every line of
// the input comes out greeted, as the file's description promises.
func TestConduitExamplePipelineJavaScript(t *testing.T) {
	yml, err := os.ReadFile("testdata/conduit-pipelines/javascript-processor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkspace(t, string(yml))
	w.write("example.in", "alice\nbob\ncarol\n")
	p := w.start("run")
	out := filepath.Join(w.dir, "example.out")
	waitForRecords(t, p, out, 3)

	var got []string
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			Payload struct {
				After []byte `json:"after"` // raw data is base64 in the file
			} `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, string(rec.Payload.After))
	}
	if want := []string{"hi there alice", "hi there bob", "hi there carol"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("payloads %q, want %q", got, want)
	}
}

// TestConduitProcessorsChain runs json.decode -> field.rename ->
// field.convert -> json.encode on generated records and checks the lines
// written.
func TestConduitProcessorsChain(t *testing.T) {
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: reshape
    status: running
    connectors:
      - id: src
        type: source
        plugin: builtin:generator
        settings:
          format.type: raw
          format.options.id: int
          format.options.name: string
          recordCount: "3"
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
      - id: rename
        plugin: builtin:field.rename@v0.1.0
        settings:
          mapping: .Payload.After.name:user
      - id: to-text
        plugin: field.convert
        settings:
          field: .Payload.After.id
          type: string
      - id: encode
        plugin: json.encode
        settings:
          field: .Payload.After
`)
	p := w.start("run")
	out := filepath.Join(w.dir, "out.jsonl")
	waitForRecords(t, p, out, 3)
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var rec struct {
			Payload struct {
				After []byte `json:"after"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		var after map[string]any
		if err := json.Unmarshal(rec.Payload.After, &after); err != nil {
			t.Fatalf("payload.after %q is not JSON: %v", rec.Payload.After, err)
		}
		if _, ok := after["name"]; ok {
			t.Errorf("name not renamed: %s", rec.Payload.After)
		}
		if _, ok := after["user"].(string); !ok {
			t.Errorf("no user: %s", rec.Payload.After)
		}
		if _, ok := after["id"].(string); !ok {
			t.Errorf("id not converted to text: %s", rec.Payload.After)
		}
		n++
	}
	if n != 3 {
		t.Errorf("%d records, want 3", n)
	}
}

// scriptPipeline is pipeline id: a generator of count records, a
// custom.javascript processor running script, a file destination at
// ./out.jsonl.
func scriptPipeline(id string, count int, script string) string {
	return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: %s
    status: running
    connectors:
      - id: src
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
          recordCount: "%d"
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
    processors:
      - id: js
        plugin: custom.javascript
        settings:
          script: %q
`, id, count, script)
}

// TestConduitJavaScriptEndlessLoopStops checks that a custom.javascript
// script that never returns does not keep conduit from stopping: after the
// graceful stop times out, the forced stop interrupts the script and
// conduit exits by itself.
func TestConduitJavaScriptEndlessLoopStops(t *testing.T) {
	w := newWorkspace(t, scriptPipeline("spin", 3, "function process(rec) { while (true) {} }"))
	w.write("conduit.yml", "log:\n  format: json\n  level: info\npipelines:\n  graceful-stop-timeout: 1s\n")
	p := w.start("run")
	eventually(t, pollInterval, func() bool {
		return strings.Contains(p.stderr.String(), "pipeline run started")
	}, func() string { return "pipeline did not start; output:\n" + p.stderr.String() })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}
}

// TestConduitJavaScriptForceStopEndsTheScript force-stops, through the
// API, a pipeline whose script never returns, and checks that the script
// stops with the run: conduit, still running, uses no CPU afterwards.
// Before, the script was given up but kept one CPU busy until conduit
// exited.
func TestConduitJavaScriptForceStopEndsTheScript(t *testing.T) {
	w := newWorkspace(t, scriptPipeline("spin", 1, "function process(rec) { while (true) {} }"))
	p := w.start("run")
	addr := apiAddress(t, p)
	eventually(t, pollInterval, func() bool {
		return strings.Contains(p.stderr.String(), "pipeline run started")
	}, func() string { return "pipeline did not start; output:\n" + p.stderr.String() })
	resp, err := http.Post("http://"+addr+"/v1/pipelines/spin/stop", "application/json", strings.NewReader(`{"force":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("force stop: %d %s", resp.StatusCode, body)
	}
	eventually(t, pollInterval, func() bool {
		return strings.Contains(p.stderr.String(), "pipeline run force-stopped")
	}, func() string { return "the run did not end; output:\n" + p.stderr.String() })
	// A script still spinning takes a CPU; an idle conduit takes a few
	// milliseconds a second. The window is a measurement, not a wait for
	// something to happen.
	before := cpuTime(t, p.cmd.Process.Pid)
	start := time.Now()
	time.Sleep(2 * time.Second)
	used := cpuTime(t, p.cmd.Process.Pid) - before
	if wall := time.Since(start); used > wall/8 {
		t.Fatalf("conduit used %s of CPU in %s after the force stop: the script still runs", used, wall)
	}
}

// cpuTime is the CPU time (user and system) process pid has used.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th of them, in clock ticks (100 a second
	// on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %s", pid, b)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// TestConduitJavaScriptMemoryBomb runs the script of the report, which
// allocates without bound, in a conduit whose address space is limited
// (ulimit -v): the call goes over processors.javascript.memory-limit and
// is interrupted, the pipeline degrades with that error, and conduit goes
// on serving its API. Before the budget the process died with "fatal
// error: out of memory", again at every start.
func TestConduitJavaScriptMemoryBomb(t *testing.T) {
	w := newWorkspace(t, scriptPipeline("bomb", 3, "function process(rec) { a = []; while (true) { a.push(new Array(1000000).fill(1.5)); } }"))
	w.write("conduit.yml", "log:\n  format: json\n  level: info\nprocessors:\n  javascript:\n    memory-limit: 64MiB\n")
	// 4 GB of address space: conduit starts and runs, and the script
	// would exhaust it within a minute.
	w.bin = "/bin/sh"
	p := w.start("-c", "ulimit -v 4000000 && exec "+conduitBinary(t)+" run")
	e := waitForEvent(t, p, "bomb", "degraded", 1)
	if !strings.Contains(e.Error, "memory budget") || !strings.Contains(e.Error, "processors.javascript.memory-limit is 64 MiB") {
		t.Fatalf("degraded event %+v, want the memory budget's error", e)
	}
	addr := apiAddress(t, p)
	resp, err := http.Get("http://" + addr + "/v1/pipelines/bomb")
	if err != nil {
		t.Fatalf("API after the script was stopped: %v; output:\n%s", err, p.stderr.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "STATUS_DEGRADED") || !strings.Contains(string(body), "memory budget") {
		t.Fatalf("GET /v1/pipelines/bomb: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(p.stderr.String(), "out of memory") {
		t.Fatalf("conduit died:\n%s", p.stderr.String())
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}
}

// TestConduitWebhookAndRejects runs webhook.http against a server of the
// test on loopback, storing its answer in each record, and json.decode on
// a line that is not JSON: that record goes to the dead-letter queue with
// the processor's error, the others go on.
func TestConduitWebhookAndRejects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write([]byte("seen:" + string(body)))
	}))
	t.Cleanup(srv.Close)
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: hook
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
      - id: ask
        plugin: webhook.http
        settings:
          request.url: `+srv.URL+`
          request.body: '{{ .Payload.After.id }}'
          response.body: .Payload.After.answer
          response.status: .Metadata.status
    dead-letter-queue:
      plugin: builtin:file
      settings:
        path: ./rejected.jsonl
      window-size: 10
      window-nack-threshold: 5
`)
	w.write("in.txt", "{\"id\":1}\nnot json\n{\"id\":3}\n")
	p := w.start("run")
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 2)
	waitForRecords(t, p, filepath.Join(w.dir, "rejected.jsonl"), 1)

	var out []struct {
		Metadata map[string]string `json:"metadata"`
		Payload  struct {
			After map[string]any `json:"after"`
		} `json:"payload"`
	}
	for _, line := range strings.Split(strings.TrimSpace(processorsTestFile(t, filepath.Join(w.dir, "out.jsonl"))), "\n") {
		var rec struct {
			Metadata map[string]string `json:"metadata"`
			Payload  struct {
				After map[string]any `json:"after"`
			} `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	for i, id := range []string{"1", "3"} {
		// The answer is raw data, which the file destination writes as base64.
		want := base64.StdEncoding.EncodeToString([]byte("seen:" + id))
		if got := out[i].Payload.After["answer"]; got != want || out[i].Metadata["status"] != "200" {
			t.Errorf("record %d: answer %v, status %q; want %q, 200", i, got, out[i].Metadata["status"], want)
		}
	}
	rejected := processorsTestFile(t, filepath.Join(w.dir, "rejected.jsonl"))
	if !strings.Contains(rejected, "failed to unmarshal raw data as JSON") || !strings.Contains(rejected, `"conduit.dlq.nack.node.id":"hook:decode"`) {
		t.Errorf("dead-letter record: %s", rejected)
	}
}

func processorsTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
