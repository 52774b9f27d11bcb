package processor

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	sdk "github.com/conduitio/conduit-processor-sdk"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
)

func TestConduitSettingErrors(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	tests := []struct {
		name        string
		plugin      string
		settings    map[string]string
		wantSetting string   // "" for an error that is not a *SettingError
		wantErr     []string // substrings
	}{
		{name: "required missing", plugin: "field.rename", settings: map[string]string{},
			wantSetting: "mapping", wantErr: []string{`setting "mapping"`, "required parameter is not provided"}},
		{name: "unknown setting", plugin: "json.decode", settings: map[string]string{"field": ".Key", "feild": ".Key"},
			wantSetting: "feild", wantErr: []string{`setting "feild": unknown setting`}},
		{name: "value not in list", plugin: "field.convert", settings: map[string]string{"field": ".Key.id", "type": "integer"},
			wantSetting: "type", wantErr: []string{`"integer" value must be included in the list [string,int,float,bool,time]`}},
		{name: "not a number", plugin: "webhook.http", settings: map[string]string{"request.url": "http://127.0.0.1:1", "backoffRetry.count": "twice"},
			wantSetting: "backoffRetry.count", wantErr: []string{`"twice" value is not a float`}},
		{name: "webhook without url", plugin: "webhook.http", settings: map[string]string{},
			wantSetting: "request.url", wantErr: []string{"required parameter is not provided"}},
		{name: "bad reference", plugin: "base64.encode", settings: map[string]string{"field": ".Payload.Middle"},
			wantSetting: "field", wantErr: []string{"Middle"}},
		{name: "position cannot be renamed", plugin: "field.rename", settings: map[string]string{"mapping": ".Position:pos"},
			wantSetting: "mapping", wantErr: []string{".Position"}},
		{name: "script does not compile", plugin: "custom.javascript", settings: map[string]string{"script": "function process(rec) {"},
			wantSetting: "script", wantErr: []string{"SyntaxError"}},
		{name: "sdk schema setting checked", plugin: "json.encode", settings: map[string]string{"field": ".Key", "sdk.schema.encode.type": "protobuf"},
			wantSetting: "sdk.schema.encode.type", wantErr: []string{`"protobuf" is not a schema type`}},
		{name: "sdk schema setting accepted", plugin: "json.encode", settings: map[string]string{"field": ".Key", "sdk.schema.decode.key.enabled": "false"}},
		{name: "ollama without url", plugin: "ollama", settings: map[string]string{"prompt": "Add one to test-field and return the record."},
			wantSetting: "url", wantErr: []string{"required parameter is not provided"}},
		{name: "avro without a schema registry", plugin: "avro.decode", settings: map[string]string{"field": ".Key"},
			wantErr: []string{"avro.decode needs a schema registry", "none was given"}},
		{name: "split without field", plugin: "builtin:split", settings: map[string]string{},
			wantSetting: "field", wantErr: []string{"required parameter is not provided"}},
		{name: "split outside key and payload", plugin: "split", settings: map[string]string{"field": ".Metadata.list"},
			wantSetting: "field", wantErr: []string{"regex"}},
		{name: "clone with another processor's setting", plugin: "clone", settings: map[string]string{"count": "1", "times": "2"},
			wantSetting: "times", wantErr: []string{`setting "times": unknown setting`}},
		{name: "clone count not positive", plugin: "clone", settings: map[string]string{"count": "0"},
			wantSetting: "count", wantErr: []string{"greater than 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := reg.New(tt.plugin, Config{Settings: tt.settings})
			wantErr(t, err, tt.wantErr...)
			var se *SettingError
			switch {
			case tt.wantSetting == "":
				if errors.As(err, &se) {
					t.Errorf("got setting error %v, want an error about the processor", err)
				}
			case !errors.As(err, &se):
				t.Errorf("got %T %v, want a *SettingError", err, err)
			case se.Setting != tt.wantSetting:
				t.Errorf("setting %q, want %q (%v)", se.Setting, tt.wantSetting, err)
			}
		})
	}
}

// TestConduitRecordRoundTrip checks that a record crosses the adapter both
// ways without losing anything: every part, raw and structured data, absent
// and empty raw data, metadata, and the invalid zero operation.
func TestConduitRecordRoundTrip(t *testing.T) {
	recs := []record.Record{
		testRecord(),
		{Position: record.Position{0, 1, 2}, Operation: record.OperationDelete,
			Key: record.StructuredData{"id": int64(7), "at": time.Unix(1, 2).UTC(), "b": []byte{0xff}}, Payload: record.Change{Before: record.RawData{}}},
		{},
	}
	for _, in := range recs {
		want := in.Clone()
		o := record.ToOpenCDC(&in)
		var got record.Record
		record.FromOpenCDC(&o, &got)
		sameRecord(t, &got, &want)
		if (got.Payload.Before == nil) != (want.Payload.Before == nil) || got.Operation != want.Operation {
			t.Errorf("got %#v, want %#v", got, want)
		}
	}
}

// TestConduitCondition checks a processor's `condition` on one of
// Conduit's processors: it runs where the condition holds, other records
// pass unchanged, and a condition that renders no boolean rejects the
// record, as in Conduit.
func TestConduitCondition(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	proc, err := reg.New("json.decode", Config{
		Settings:  map[string]string{"field": ".Payload.After"},
		Condition: `{{ eq .Metadata.table "users" }}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	users := record.Record{Operation: record.OperationCreate, Metadata: record.Metadata{"table": "users"},
		Payload: record.Change{After: record.RawData(`{"id":1}`)}}
	if err := proc.Process(context.Background(), &users); err != nil {
		t.Fatal(err)
	}
	if got := recJSON(t, &users); got != `{"position":null,"operation":"create","metadata":{"table":"users"},"key":null,"payload":{"before":null,"after":{"id":1}}}` {
		t.Errorf("users record: %s", got)
	}
	orders := record.Record{Operation: record.OperationCreate, Metadata: record.Metadata{"table": "orders"},
		Payload: record.Change{After: record.RawData(`{"id":1}`)}}
	if err := proc.Process(context.Background(), &orders); err != nil {
		t.Fatal(err)
	}
	if _, ok := orders.Payload.After.(record.RawData); !ok {
		t.Errorf("orders record was processed: %#v", orders.Payload.After)
	}

	bad, err := reg.New("json.decode", Config{Settings: map[string]string{"field": ".Payload.After"}, Condition: `{{ .Metadata.table }}`})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, bad.Process(context.Background(), &orders), "condition:", `rendered "orders", which is not a boolean`)
}

// TestConduitErrorsAreFatal checks that a Conduit processor's error rejects
// the record, fatal by default as every processor error here.
func TestConduitErrorsAreFatal(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	proc, err := reg.New("json.decode", Config{Settings: map[string]string{"field": ".Payload.After"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.Record{Operation: record.OperationCreate, Payload: record.Change{After: record.RawData(`{"id":`)}}
	perr := proc.Process(context.Background(), &rec)
	wantErr(t, perr, "failed to unmarshal raw data as JSON")
	if c := cerrors.ClassifyProcessor(perr); c.Class != cerrors.ClassFatal {
		t.Errorf("class %v, want fatal", c.Class)
	}
}

// TestConduitWebhookFailure checks webhook.http against a server that
// fails: the record is rejected with the status in the error.
func TestConduitWebhookFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	reg := NewRegistry(Builtin()...)
	proc, err := reg.New("webhook.http", Config{Settings: map[string]string{"request.url": srv.URL, "backoffRetry.count": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := testRecord()
	wantErr(t, proc.Process(context.Background(), &rec), "503")
}

// multiProcessor is a Conduit processor that turns every record into two.
type multiProcessor struct{ sdk.UnimplementedProcessor }

func (multiProcessor) Configure(context.Context, config.Config) error { return nil }
func (multiProcessor) Open(context.Context) error                     { return nil }
func (multiProcessor) Process(_ context.Context, recs []opencdc.Record) []sdk.ProcessedRecord {
	return []sdk.ProcessedRecord{sdk.MultiRecord{recs[0], recs[0]}}
}

func TestConduitMultiRecordIsAnError(t *testing.T) {
	p := &conduitProcessor{name: "doubler", proc: multiProcessor{}}
	rec := testRecord()
	wantErr(t, p.Process(context.Background(), &rec), "doubler turned the record into 2 records where one was expected")
}

// panicProcessor is a Conduit processor that panics on every record.
type panicProcessor struct{ sdk.UnimplementedProcessor }

func (panicProcessor) Process(context.Context, []opencdc.Record) []sdk.ProcessedRecord {
	panic(errors.New("index out of range [3] with length 1"))
}

func TestConduitPanicIsAnError(t *testing.T) {
	p := &conduitProcessor{name: "crasher", proc: panicProcessor{}}
	rec := testRecord()
	err := p.Process(context.Background(), &rec)
	wantErr(t, err, "crasher panicked", "index out of range")
	if c := cerrors.ClassifyProcessor(err); c.Class != cerrors.ClassFatal {
		t.Errorf("class %v, want fatal", c.Class)
	}
	if p.in[0].Metadata != nil {
		t.Error("the adapter kept the engine's record after a panic")
	}
}

// TestSplitterCondition checks split behind a `condition`: it is still a
// Splitter, splits the records the condition holds for and leaves the
// others one record, unchanged; called as a plain Processor (the way
// nothing in the engine calls it) it refuses to lose records.
func TestSplitterCondition(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	proc, err := reg.New("split", Config{
		Settings:  map[string]string{"field": ".Payload.After.tags"},
		Condition: `{{ eq .Metadata.table "users" }}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := proc.(Splitter)
	if !ok {
		t.Fatalf("split with a condition is a %T, no Splitter", proc)
	}
	mk := func(table string) record.Record {
		return record.Record{Position: record.Position("p"), Operation: record.OperationCreate, Metadata: record.Metadata{"table": table},
			Payload: record.Change{After: record.StructuredData{"tags": []any{"a", "b"}}}}
	}
	ctx := context.Background()
	users := mk("users")
	got, err := s.ProcessMulti(ctx, &users, nil)
	if err != nil || len(got) != 2 {
		t.Fatalf("users record: %d records, %v; want 2", len(got), err)
	}
	if got[1].Payload.After.(record.StructuredData)["tags"] != "b" || got[1].Metadata["split.index"] != "1" {
		t.Fatalf("second record %+v", got[1])
	}
	orders := mk("orders")
	want := orders.Clone()
	got, err = s.ProcessMulti(ctx, &orders, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("orders record: %d records, %v; want it left as one", len(got), err)
	}
	sameRecord(t, &orders, &want)

	users = mk("users")
	wantErr(t, proc.Process(ctx, &users), "split turned the record into 2 records")
}
