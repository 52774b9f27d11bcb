package processor

import (
	"bytes"
	"context"
	stdbase64 "encoding/base64"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/conduitio/conduit-commons/opencdc"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/schemaregistry"
	"github.com/conduitry/conduit/pkg/store"
)

// conduitExample is one documented example of a Conduit processor, as
// Conduit exports them with its processors' specifications
// (testdata/conduit-examples, see the README there): a configuration, a
// record, and the processor's result, with raw data written as text.
type conduitExample struct {
	Summary string             `json:"summary"`
	Config  map[string]string  `json:"config"`
	Have    stdjson.RawMessage `json:"have"`
	Want    stdjson.RawMessage `json:"want"`
}

type conduitSpecFile struct {
	Specification struct {
		Name string `json:"name"`
	} `json:"specification"`
	Examples []conduitExample `json:"examples"`
}

// exampleSchema is the Avro schema Conduit's avro examples register under
// their subjects before they run.
const exampleSchema = `{"type":"record","name":"record","fields":[{"name":"myString","type":"string"},{"name":"myInt","type":"int"}]}`

// TestConduitExamples runs every documented example of every Conduit
// processor this runtime has - Conduit's own and this package's field.set,
// field.exclude, filter and error - through the registry (so through the
// adapter for Conduit's), and compares the result with the one Conduit
// documents, in Conduit's JSON form of a record.
func TestConduitExamples(t *testing.T) {
	files, err := filepath.Glob("testdata/conduit-examples/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example files: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(greeter))
	t.Cleanup(srv.Close)
	ollamaSrv := httptest.NewServer(http.HandlerFunc(fakeOllama))
	t.Cleanup(ollamaSrv.Close)

	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var spec conduitSpecFile
		if err := stdjson.Unmarshal(b, &spec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := spec.Specification.Name
		seen[name] = true
		if len(spec.Examples) == 0 {
			t.Fatalf("%s: no examples", f)
		}
		for i, ex := range spec.Examples {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				settings := map[string]string{}
				for k, v := range ex.Config {
					// Conduit's webhook examples talk to a greeter on a
					// fixed port; ours listens on a free one.
					settings[k] = strings.ReplaceAll(v, "http://127.0.0.1:54321", srv.URL)
					// Conduit's ollama example fakes the server's answer;
					// ours answers the same from a server on loopback.
					settings[k] = strings.ReplaceAll(settings[k], "http://localhost:11434", ollamaSrv.URL)
				}
				reg := NewRegistry(append(ownBuiltins(), Conduit(ConduitOptions{SchemaRegistry: exampleRegistry(t, name, settings)})...)...)
				proc, err := reg.New(name, Config{Settings: settings})
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				rec := exampleRecord(t, ex.Have)
				if name == "avro.encode" {
					// Conduit runs its examples on a clone of the input,
					// and opencdc's Clone turns nested objects into
					// StructuredData, which avro.encode makes an Avro
					// record where it makes a map[string]any an Avro map.
					// (Other examples' nested values are typed in Go in a
					// way their JSON does not keep, e.g. opencdc.Metadata
					// in unwrap.opencdc's, and pass without the clone.)
					record.FromOpenCDC(ptr(record.ToOpenCDC(&rec).Clone()), &rec)
				}
				if bytes.HasPrefix(bytes.TrimSpace(ex.Want), []byte("[")) {
					// Conduit's MultiRecord: the records one became.
					compareSeveralWithConduit(t, proc, &rec, ex.Want)
					return
				}
				perr := proc.Process(context.Background(), &rec)
				compareWithConduit(t, ex.Want, &rec, perr)
			})
		}
	}
	for _, p := range Builtin() {
		if !seen[p.Name] {
			t.Errorf("processor %s has no example file", p.Name)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// compareSeveralWithConduit runs a processor that turns one record into
// several (a Splitter) and compares each record it made with the one
// Conduit documents at the same place.
func compareSeveralWithConduit(t *testing.T, proc Processor, rec *record.Record, want stdjson.RawMessage) {
	t.Helper()
	s, ok := proc.(Splitter)
	if !ok {
		t.Fatalf("Conduit's makes several records, ours (%T) is no Splitter", proc)
	}
	var wants []stdjson.RawMessage
	if err := stdjson.Unmarshal(want, &wants); err != nil {
		t.Fatal(err)
	}
	got, err := s.ProcessMulti(context.Background(), rec, nil)
	if err != nil {
		t.Fatalf("ProcessMulti: %v", err)
	}
	if len(got) != len(wants) {
		t.Fatalf("got %d records, Conduit documents %d", len(got), len(wants))
	}
	for i := range got {
		compareWithConduit(t, wants[i], &got[i], nil)
	}
}

// ownBuiltins are this package's processors, Builtin without Conduit's.
func ownBuiltins() []Plugin {
	conduit := map[string]bool{}
	for _, p := range Conduit(ConduitOptions{}) {
		conduit[p.Name] = true
	}
	var out []Plugin
	for _, p := range Builtin() {
		if !conduit[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

// greeter answers as the server of Conduit's webhook examples does.
func greeter(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		_, _ = w.Write([]byte("hello, " + strings.TrimPrefix(r.URL.Path, "/") + "!"))
		return
	}
	body, _ := io.ReadAll(r.Body)
	_, _ = w.Write([]byte("hello, " + string(body)))
}

// fakeOllama answers Ollama's generate API as the model in Conduit's
// ollama example does: it adds one to test-field.
func fakeOllama(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Prompt string `json:"prompt"`
		Format string `json:"format"`
	}
	if r.Method != http.MethodPost || r.URL.Path != "/api/generate" || stdjson.NewDecoder(r.Body).Decode(&req) != nil ||
		req.Model != "llama3.2" || req.Format != "json" || !strings.Contains(req.Prompt, "test-field") || !strings.Contains(req.Prompt, "123") {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	_, _ = w.Write([]byte(`{"model":"llama3.2","response":"{\"test-field\": 124}","done":true}`))
}

// exampleRegistry is a fresh built-in schema registry per example (the
// one conduit runs with by default, here on an in-memory store), as
// Conduit's examples each have a registry of their own, with the schema
// the example expects registered (so it gets id 1, which the examples'
// Avro bytes carry).
func exampleRegistry(t *testing.T, name string, settings map[string]string) *schemaregistry.Builtin {
	t.Helper()
	reg := schemaregistry.NewBuiltin(store.NewInMemory())
	subject := settings["schema.preRegistered.subject"]
	if name == "avro.decode" {
		subject = "example-decode"
	}
	if subject != "" {
		if _, err := reg.CreateSchema(context.Background(), subject, sr.Schema{Type: sr.TypeAvro, Schema: exampleSchema}); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// exampleRecord reads a record of an example: position base64, raw data
// as text, integers as int and other numbers as float64 (the Go types the
// examples were written with).
func exampleRecord(t *testing.T, raw stdjson.RawMessage) record.Record {
	t.Helper()
	var in struct {
		Position  *string            `json:"position"`
		Operation string             `json:"operation"`
		Metadata  map[string]string  `json:"metadata"`
		Key       stdjson.RawMessage `json:"key"`
		Payload   struct {
			Before stdjson.RawMessage `json:"before"`
			After  stdjson.RawMessage `json:"after"`
		} `json:"payload"`
	}
	if err := stdjson.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	var rec record.Record
	if in.Position != nil {
		p, err := stdbase64.StdEncoding.DecodeString(*in.Position)
		if err != nil {
			t.Fatal(err)
		}
		rec.Position = p
	}
	if op, err := record.ParseOperation(in.Operation); err == nil {
		rec.Operation = op
	} else if in.Operation != "Operation(0)" {
		t.Fatalf("operation %q", in.Operation)
	}
	if in.Metadata != nil {
		rec.Metadata = in.Metadata
	}
	rec.Key = exampleData(t, in.Key)
	rec.Payload.Before = exampleData(t, in.Payload.Before)
	rec.Payload.After = exampleData(t, in.Payload.After)
	return rec
}

func exampleData(t *testing.T, raw stdjson.RawMessage) record.Data {
	t.Helper()
	dec := stdjson.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return record.RawData(x)
	case map[string]any:
		return record.StructuredData(exampleNumbers(x).(map[string]any))
	}
	t.Fatalf("data %s", raw)
	return nil
}

func exampleNumbers(v any) any {
	switch x := v.(type) {
	case stdjson.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return int(i)
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = exampleNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = exampleNumbers(e)
		}
	}
	return v
}

// compareWithConduit checks the processor's result against Conduit's: an
// error with the same text, a filtered record, or the same record written
// as Conduit writes it (raw data as text, as in the examples).
func compareWithConduit(t *testing.T, want stdjson.RawMessage, got *record.Record, perr error) {
	t.Helper()
	var shape map[string]any
	if err := stdjson.Unmarshal(want, &shape); err != nil {
		t.Fatal(err)
	}
	switch {
	case len(shape) == 0: // Conduit's FilterRecord
		if !errors.Is(perr, ErrFiltered) {
			t.Fatalf("got %v, want the record filtered out", perr)
		}
		return
	case shape["error"] != nil:
		if perr == nil || perr.Error() != shape["error"] {
			t.Fatalf("got error %v, want %q", perr, shape["error"])
		}
		return
	}
	if perr != nil {
		t.Fatalf("Process: %v", perr)
	}
	// The record must also travel on: to a standalone connector and to
	// the file destination.
	if _, err := record.AppendBatch(nil, []record.Record{*got}); err != nil {
		t.Errorf("record cannot be sent to a standalone destination: %v", err)
	}
	// And the file destination writes what Conduit's would (raw data as
	// base64 there).
	ours, err := record.AppendJSON(nil, got)
	if err != nil {
		t.Fatalf("record cannot be written as JSON: %v", err)
	}
	theirs, err := opencdc.JSONSerializer{}.Serialize(record.ToOpenCDC(got))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normJSON(t, ours), normJSON(t, theirs)) {
		t.Errorf("file line differs from Conduit's\n ours: %s\nConduit: %s", ours, theirs)
	}
	b, err := opencdc.JSONSerializer{RawDataAsString: true}.Serialize(record.ToOpenCDC(got))
	if err != nil {
		t.Fatal(err)
	}
	if g, w := normJSON(t, b), normJSON(t, want); !reflect.DeepEqual(g, w) {
		t.Errorf("record differs from Conduit's\n got: %s\nwant: %s", b, want)
	}
}

func normJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := stdjson.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
