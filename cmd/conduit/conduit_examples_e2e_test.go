package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConduitExamplePipelines runs Conduit's own example pipelines of one
// source, unchanged, each in a workspace of its own as a Conduit user
// would, and checks what each one's description promises (those of two
// sources: TestConduitExamplePipelinesOfTwoSources, of custom.javascript:
// TestConduitExamplePipelineJavaScript).
func TestConduitExamplePipelines(t *testing.T) {
	type line = map[string]any
	cases := []struct {
		file  string
		input map[string]string
		// outputs are the files the pipeline writes and how many records
		// each gets.
		outputs map[string]int
		check   func(t *testing.T, got map[string][]line)
	}{
		{file: "file-to-file.yaml", input: map[string]string{"example.in": "one\ntwo\n"},
			outputs: map[string]int{"example.out": 2},
			check: func(t *testing.T, got map[string][]line) {
				for i, want := range []string{"one", "two"} {
					if after := payloadAfter(t, got["example.out"][i]); after != want {
						t.Errorf("record %d: payload.after %q, want %q", i, after, want)
					}
				}
			}},
		{file: "multiple-destinations.yaml", outputs: map[string]int{"example-1.out": 1, "example-2.out": 1},
			check: func(t *testing.T, got map[string][]line) {
				a, _ := json.Marshal(got["example-1.out"][0])
				b, _ := json.Marshal(got["example-2.out"][0])
				if string(a) != string(b) {
					t.Errorf("the destinations got different records:\n%s\n%s", a, b)
				}
			}},
		{file: "pipeline-with-dlq.yaml", outputs: map[string]int{"dlq.out": 1},
			check: func(t *testing.T, got map[string][]line) {
				rec := got["dlq.out"][0]
				if !strings.Contains(strings.ToLower(metadata(rec, "conduit.dlq.nack.error")), "parsefloat") {
					t.Errorf("dead-letter record without the processor's error: %v", rec)
				}
				if node := metadata(rec, "conduit.dlq.nack.node.id"); node != "pipeline-with-dlq:generator-source:convert-name" {
					t.Errorf("conduit.dlq.nack.node.id %q, want pipeline-with-dlq:generator-source:convert-name", node)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			yml, err := os.ReadFile(filepath.Join("testdata", "conduit-pipelines", c.file))
			if err != nil {
				t.Fatal(err)
			}
			w := newWorkspace(t, string(yml))
			for name, content := range c.input {
				w.write(name, content)
			}
			p := w.start("run")
			got := map[string][]line{}
			for name, n := range c.outputs {
				path := filepath.Join(w.dir, name)
				waitForRecords(t, p, path, n)
				got[name] = readLines(t, path)
				if len(got[name]) != n {
					t.Fatalf("%s: %d records, want %d; output:\n%s", name, len(got[name]), n, p.stderr.String())
				}
			}
			c.check(t, got)
			if strings.Contains(p.stderr.String(), `"level":"error"`) {
				t.Errorf("errors logged:\n%s", p.stderr.String())
			}
		})
	}
}

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%s: line %q: %v", path, l, err)
		}
		out = append(out, rec)
	}
	return out
}

func metadata(rec map[string]any, key string) string {
	md, _ := rec["metadata"].(map[string]any)
	s, _ := md[key].(string)
	return s
}

// payloadAfter is a raw payload.after as text (the file has it base64).
func payloadAfter(t *testing.T, rec map[string]any) string {
	t.Helper()
	b, err := json.Marshal(rec["payload"].(map[string]any)["after"])
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("payload.after %s is not raw data: %v", b, err)
	}
	return string(raw)
}
