package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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

// TestConduitJavaScriptEndlessLoopStops checks that a custom.javascript
// script that never returns does not keep conduit from stopping: after the
// graceful stop times out, the forced stop gives the script up and conduit
// exits by itself.
func TestConduitJavaScriptEndlessLoopStops(t *testing.T) {
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: spin
    status: running
    connectors:
      - id: src
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
          recordCount: "3"
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
    processors:
      - id: spin
        plugin: custom.javascript
        settings:
          script: "function process(rec) { while (true) {} }"
`)
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
	if !strings.Contains(p.stderr.String(), "processor given up while it was still running the user's script") {
		t.Errorf("no warning about the script; output:\n%s", p.stderr.String())
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
