package processor

import (
	"context"
	"testing"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	sdk "github.com/conduitio/conduit-processor-sdk"
	"github.com/conduitio/conduit/pkg/foundation/log"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/custom"

	"github.com/conduitry/conduit/pkg/record"
)

// BenchmarkConduitJSONRename measures the chain json.decode ->
// field.rename -> json.encode on a record whose payload is a JSON object of
// five fields, through the adapter: Conduit's processors with the
// conversion of the record to theirs and back, three times per record.
func BenchmarkConduitJSONRename(b *testing.B) {
	reg := NewRegistry(Builtin()...)
	var chain []Processor
	for _, p := range []struct {
		plugin   string
		settings map[string]string
	}{
		{"json.decode", map[string]string{"field": ".Payload.After"}},
		{"field.rename", map[string]string{"mapping": ".Payload.After.name:user,.Metadata.table:collection"}},
		{"json.encode", map[string]string{"field": ".Payload.After"}},
	} {
		proc, err := reg.New(p.plugin, Config{Settings: p.settings})
		if err != nil {
			b.Fatal(err)
		}
		chain = append(chain, proc)
	}
	payload := []byte(`{"id":12345,"name":"Ann","company":"Acme","trial":true,"score":0.75}`)
	rec := record.Record{Position: record.Position("p-1"), Operation: record.OperationCreate,
		Metadata: record.Metadata{"table": "users", "opencdc.readAt": "1700000000"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		rec.Payload.After = record.RawData(payload)
		delete(rec.Metadata, "collection")
		rec.Metadata["table"] = "users"
		for _, p := range chain {
			if err := p.Process(ctx, &rec); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// passProcessor is a Conduit processor that returns its record unchanged,
// to measure what the adapter itself costs.
type passProcessor struct{ sdk.UnimplementedProcessor }

func (passProcessor) Configure(context.Context, config.Config) error { return nil }
func (passProcessor) Process(_ context.Context, recs []opencdc.Record) []sdk.ProcessedRecord {
	return []sdk.ProcessedRecord{sdk.SingleRecord(recs[0])}
}

// BenchmarkConduitAdapter measures the adapter alone: a record to
// Conduit's type, a one-record batch, the result and back.
func BenchmarkConduitAdapter(b *testing.B) {
	p := &conduitProcessor{name: "pass", proc: passProcessor{}}
	rec := testRecord()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Process(ctx, &rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConduitJavaScript measures custom.javascript setting a metadata
// key, run detached (a copy of the record, a goroutine per call).
// BenchmarkJavaScriptVsConduit runs the same script through this
// package's custom.javascript (bounded: a watch per call) and through
// Conduit's own processor, one record per call, as the engines call them.
func BenchmarkJavaScriptVsConduit(b *testing.B) {
	const script = `function process(rec) { rec.Metadata["seen"] = "yes"; return rec; }`
	ctx := context.Background()
	b.Run("ours", func(b *testing.B) {
		p, err := NewRegistry(Builtin()...).New("custom.javascript", Config{Settings: map[string]string{"script": script}})
		if err != nil {
			b.Fatal(err)
		}
		rec := testRecord()
		b.ReportAllocs()
		for b.Loop() {
			if err := p.Process(ctx, &rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("conduit", func(b *testing.B) {
		quietSDKLogs()
		p := custom.NewJavascriptProcessor(log.Nop())
		if err := p.Configure(ctx, config.Config{"script": script}); err != nil {
			b.Fatal(err)
		}
		if err := p.Open(ctx); err != nil {
			b.Fatal(err)
		}
		rec := testRecord()
		in := []opencdc.Record{record.ToOpenCDC(&rec)}
		b.ReportAllocs()
		for b.Loop() {
			out := p.Process(ctx, in)
			if _, ok := out[0].(sdk.SingleRecord); !ok {
				b.Fatalf("Conduit's processor returned %T", out[0])
			}
		}
	})
}

func BenchmarkConduitJavaScript(b *testing.B) {
	p, err := NewRegistry(Builtin()...).New("custom.javascript", Config{Settings: map[string]string{
		"script": `function process(rec) { rec.Metadata["seen"] = "yes"; return rec; }`,
	}})
	if err != nil {
		b.Fatal(err)
	}
	rec := testRecord()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Process(ctx, &rec); err != nil {
			b.Fatal(err)
		}
	}
}
