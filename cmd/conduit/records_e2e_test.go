package main

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRecordsAreConduits runs generator -> file with a processor that
// rejects one record into a dead-letter queue that is a file, and reads
// both files as a consumer of Conduit's would: every record carries the
// metadata Conduit v0.14.0 sets and no other (conduit.source.connector.id
// "pipeline:connector", no opencdc.version), and the dead-letter line is
// Conduit's dead-letter record: a new create record positioned at
// "pipeline:source/position", without key, whose payload.after is the
// rejected record and whose metadata says the error and the node
// ("pipeline:processor") that rejected it.
func TestRecordsAreConduits(t *testing.T) {
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: orders
    status: running
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          recordCount: 5
          rate: 1000
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
    processors:
      - id: third
        plugin: error
        condition: '{{ eq (printf "%s" .Position) "3" }}'
        settings:
          message: 'record {{ printf "%s" .Position }} is refused'
    dead-letter-queue:
      plugin: builtin:file
      settings:
        path: ./dlq.jsonl
      window-size: 0
`)
	p := w.start("run")
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 4)
	waitForRecords(t, p, filepath.Join(w.dir, "dlq.jsonl"), 1)

	type line struct {
		Position  []byte            `json:"position"`
		Operation string            `json:"operation"`
		Metadata  map[string]string `json:"metadata"`
		Key       json.RawMessage   `json:"key"`
		Payload   struct {
			Before json.RawMessage `json:"before"`
			After  json.RawMessage `json:"after"`
		} `json:"payload"`
	}
	parse := func(name string) []line {
		var out []line
		for _, l := range strings.Split(strings.TrimSpace(processorsTestFile(t, filepath.Join(w.dir, name))), "\n") {
			var r line
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("%s: line %q: %v", name, l, err)
			}
			out = append(out, r)
		}
		return out
	}
	// What Conduit's generator (opencdc.createdAt) and runtime
	// (opencdc.readAt, conduit.source.connector.id) set, and nothing else.
	checkSourceMetadata := func(what string, md map[string]string) {
		t.Helper()
		keys := slices.Sorted(maps.Keys(md))
		if want := []string{"conduit.source.connector.id", "opencdc.createdAt", "opencdc.readAt"}; !slices.Equal(keys, want) {
			t.Errorf("%s: metadata keys %v, want %v (Conduit's)", what, keys, want)
		}
		if id := md["conduit.source.connector.id"]; id != "orders:gen" {
			t.Errorf("%s: conduit.source.connector.id = %q, want orders:gen", what, id)
		}
		for _, k := range []string{"opencdc.createdAt", "opencdc.readAt"} {
			if _, err := strconv.ParseInt(md[k], 10, 64); err != nil {
				t.Errorf("%s: %s = %q, want Unix nanoseconds", what, k, md[k])
			}
		}
	}

	out := parse("out.jsonl")
	var positions []string
	for _, r := range out {
		positions = append(positions, string(r.Position))
		checkSourceMetadata("out.jsonl record "+string(r.Position), r.Metadata)
	}
	if want := []string{"1", "2", "4", "5"}; !slices.Equal(positions, want) {
		t.Fatalf("out.jsonl has records %v, want %v", positions, want)
	}

	dlq := parse("dlq.jsonl")
	if len(dlq) != 1 {
		t.Fatalf("dlq.jsonl has %d records, want 1", len(dlq))
	}
	d := dlq[0]
	if string(d.Position) != "orders:gen/3" || d.Operation != "create" || string(d.Key) != "null" || string(d.Payload.Before) != "null" {
		t.Errorf("dead-letter record: position %q, operation %q, key %s, before %s; want orders:gen/3, create, null, null",
			d.Position, d.Operation, d.Key, d.Payload.Before)
	}
	if keys := slices.Sorted(maps.Keys(d.Metadata)); !slices.Equal(keys, []string{"conduit.dlq.nack.error", "conduit.dlq.nack.node.id", "opencdc.createdAt"}) {
		t.Errorf("dead-letter record metadata %v, want Conduit's three keys", d.Metadata)
	}
	if d.Metadata["conduit.dlq.nack.node.id"] != "orders:third" || !strings.Contains(d.Metadata["conduit.dlq.nack.error"], "record 3 is refused") {
		t.Errorf("dead-letter record metadata %v, want node orders:third and the processor's error", d.Metadata)
	}
	var failed line
	if err := json.Unmarshal(d.Payload.After, &failed); err != nil {
		t.Fatalf("payload.after %s is not the rejected record: %v", d.Payload.After, err)
	}
	if string(failed.Position) != "3" || failed.Operation != "create" || string(failed.Key) != `"`+base64.StdEncoding.EncodeToString([]byte("3"))+`"` {
		t.Errorf("rejected record in payload.after: %s", d.Payload.After)
	}
	checkSourceMetadata("the rejected record", failed.Metadata)
	var after map[string]any
	if err := json.Unmarshal(failed.Payload.After, &after); err != nil || after["id"] != float64(3) {
		t.Errorf("rejected record's payload.after %s, want the generated {\"id\":3}", failed.Payload.After)
	}
}
