package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hamba/avro/v2"
	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/schemaregistry"
	"github.com/conduitry/conduit/pkg/store"
)

// avroPipeline encodes generated records with avro.encode, registering
// their schema under subject users in the built-in registry, writes them
// to encoded.jsonl, and in a second pipeline encodes and decodes them
// again on their way to roundtrip.jsonl.
const avroPipeline = `version: "2.2"
pipelines:
  - id: encode
    status: running
    connectors:
      - id: src
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          format.options.name: string
          recordCount: "3"
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./encoded.jsonl
    processors:
      - id: to-avro
        plugin: avro.encode
        settings:
          schema.strategy: autoRegister
          schema.autoRegister.subject: users
  - id: roundtrip
    status: running
    connectors:
      - id: src
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          format.options.name: string
          recordCount: "3"
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: ./roundtrip.jsonl
    processors:
      - id: to-avro
        plugin: avro.encode
        settings:
          schema.strategy: autoRegister
          schema.autoRegister.subject: users
      - id: from-avro
        plugin: avro.decode
`

// TestAvroProcessorsWithTheBuiltinSchemaRegistry runs Conduit's avro.encode
// and avro.decode with the schema registry conduit keeps in its store:
// records come back as they went in, and after conduit stopped, the
// schema the Avro bytes name is still in the store, so what one run wrote
// decodes in the next.
func TestAvroProcessorsWithTheBuiltinSchemaRegistry(t *testing.T) {
	w := newWorkspace(t, avroPipeline)
	p := w.start("run")
	waitForRecords(t, p, filepath.Join(w.dir, "encoded.jsonl"), 3)
	waitForRecords(t, p, filepath.Join(w.dir, "roundtrip.jsonl"), 3)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}

	// Decoded records are the generator's: an int id and a string name.
	for i, after := range payloads(t, filepath.Join(w.dir, "roundtrip.jsonl")) {
		var rec map[string]any
		if err := json.Unmarshal(after, &rec); err != nil {
			t.Fatalf("roundtrip record %d: payload.after %s is not structured: %v", i, after, err)
		}
		if _, ok := rec["id"].(float64); !ok || len(rec) != 2 {
			t.Errorf("roundtrip record %d: %s, want the generator's id and name", i, after)
		}
		if _, ok := rec["name"].(string); !ok {
			t.Errorf("roundtrip record %d: %s, want a string name", i, after)
		}
	}

	// The encoded records carry the registry's schema id, and the store
	// conduit left behind decodes them.
	db, err := store.OpenBadger(context.Background(), filepath.Join(w.dir, "conduit.db"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := schemaregistry.NewBuiltin(db)
	latest, err := reg.SchemaBySubjectVersion(context.Background(), "users", schemaregistry.LatestVersion)
	if err != nil {
		t.Fatalf("subject users after conduit stopped: %v", err)
	}
	if latest.Version != 1 {
		t.Errorf("subject users has %d versions, want 1 (both pipelines register the same schema)", latest.Version)
	}
	for i, after := range payloads(t, filepath.Join(w.dir, "encoded.jsonl")) {
		// Confluent's wire format: magic byte 0, the schema id (4 bytes,
		// big-endian), the Avro datum.
		if len(after) < 5 || after[0] != 0 {
			t.Fatalf("encoded record %d: %x is not in Confluent's wire format", i, after)
		}
		id := int(binary.BigEndian.Uint32(after[1:5]))
		s, err := reg.SchemaByID(context.Background(), id)
		if err != nil {
			t.Fatalf("encoded record %d names schema %d: %v", i, id, err)
		}
		schema, err := avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		if err := avro.Unmarshal(schema, after[5:], &rec); err != nil {
			t.Fatalf("encoded record %d: %v", i, err)
		}
		if _, ok := rec["name"].(string); !ok {
			t.Errorf("encoded record %d decodes to %v, want the generator's name", i, rec)
		}
	}
}

// payloads reads payload.after of each OpenCDC JSON line of path: raw
// bytes (base64 in the file) as they are, structured data as its JSON.
func payloads(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			Payload struct {
				After json.RawMessage `json:"after"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		after := rec.Payload.After
		if strings.HasPrefix(string(after), `"`) {
			var raw []byte
			if err := json.Unmarshal(after, &raw); err != nil {
				t.Fatalf("%s: payload.after %s: %v", path, after, err)
			}
			after = raw
		}
		out = append(out, after)
	}
	return out
}
