package inspect

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
)

type tapTestSource struct{ connector.Source }

func (tapTestSource) Read(_ context.Context, batch []record.Record) (int, error) {
	batch[0] = record.Record{Position: record.Position("1"), Metadata: record.Metadata{"k": "v"}}
	batch[1] = record.Record{Position: record.Position("2")}
	return 2, nil
}

type tapTestDestination struct{ connector.Destination }

func (tapTestDestination) Write(_ context.Context, batch []record.Record) (int, error) {
	return len(batch), nil
}

type tapTestReporter struct{ tapTestDestination }

func (tapTestReporter) LastPosition(context.Context) (record.Position, bool, error) {
	return record.Position("9"), true, nil
}

type upper struct{}

func (upper) Process(_ context.Context, rec *record.Record) error {
	if rec.Metadata["drop"] == "yes" {
		return errors.New("rejected")
	}
	rec.Metadata["seen"] = "yes"
	return nil
}

// A run's wrapped connectors and processors hand inspectors copies of what
// passes them, keep the destination's optional abilities, and drop records
// for an inspector that falls behind instead of waiting.
func TestInspectTaps(t *testing.T) {
	m := &Taps{}
	cfg := pipeline.Config{
		Source:       pipeline.Source{ID: "src", Connector: tapTestSource{}},
		Destinations: []pipeline.Destination{{ID: "plain", Connector: tapTestDestination{}}, {ID: "reporting", Connector: tapTestReporter{}}},
		Processors:   []pipeline.Processor{{ID: "p", Processor: upper{}, Connector: "src"}},
	}
	m.Tap(&cfg)
	if _, ok := connector.Ability[connector.PositionReporter](cfg.Destinations[1].Connector); !ok {
		t.Fatal("the wrapped destination lost its PositionReporter")
	}
	if _, ok := connector.Ability[connector.PositionReporter](cfg.Destinations[0].Connector); ok {
		t.Fatal("the wrapped destination gained a PositionReporter")
	}
	ctx := context.Background()
	batch := make([]record.Record, 2)

	// Nobody inspects: nothing is copied.
	if _, err := cfg.Source.Connector.Read(ctx, batch); err != nil {
		t.Fatal(err)
	}

	sctx, cancel := context.WithCancel(ctx)
	src := m.Subscribe(sctx, api.InspectPoint{Connector: "src"})
	in := m.Subscribe(sctx, api.InspectPoint{Connector: "src", Processor: "p"})
	out := m.Subscribe(sctx, api.InspectPoint{Connector: "src", Processor: "p", Out: true})
	dst := m.Subscribe(sctx, api.InspectPoint{Connector: "reporting"})
	if _, err := cfg.Source.Connector.Read(ctx, batch); err != nil {
		t.Fatal(err)
	}
	batch[0].Metadata["k"] = "changed after the read"
	if r := <-src; string(r.Position) != "1" || r.Metadata["k"] != "v" {
		t.Errorf("source record 1: %+v (a copy, as read)", r)
	}
	if r := <-src; string(r.Position) != "2" {
		t.Errorf("source record 2: %+v", r)
	}
	rec := record.Record{Position: record.Position("3"), Metadata: record.Metadata{}}
	if err := cfg.Processors[0].Processor.Process(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	if r := <-in; r.Metadata["seen"] != "" {
		t.Errorf("processor input carries its output: %+v", r)
	}
	if r := <-out; r.Metadata["seen"] != "yes" {
		t.Errorf("processor output: %+v", r)
	}
	rejected := record.Record{Metadata: record.Metadata{"drop": "yes"}}
	_ = cfg.Processors[0].Processor.Process(ctx, &rejected)
	<-in
	select {
	case r := <-out:
		t.Errorf("a rejected record reached the output: %+v", r)
	default:
	}
	many := make([]record.Record, Buffer+10)
	if n, err := cfg.Destinations[1].Connector.Write(ctx, many); err != nil || n != len(many) {
		t.Fatalf("write: %d %v", n, err)
	}
	if len(dst) != Buffer {
		t.Errorf("an inspector behind holds %d records, want %d (the rest dropped)", len(dst), Buffer)
	}
	cancel()
	for _, ch := range []<-chan record.Record{src, in, out, dst} {
		for range ch { // closed once its context ended
		}
	}
	if n := m.Active(); n != 0 {
		t.Errorf("%d inspectors left after their context ended", n)
	}
}

// A run's connectors are wrapped for inspection whether or not anyone
// inspects them: the wrappers must keep every optional ability the engine
// looks for, or a restart would lose track of what a destination holds.
func TestTapsKeepTheEnginesOptionalAbilities(t *testing.T) {
	dir := t.TempDir()
	reg := connector.NewRegistry(connector.Builtin()...)
	newCfg := func(id string, settings map[string]string) connector.Config {
		return connector.Config{PipelineID: "p", ConnectorID: id, Settings: settings, Logger: zap.NewNop()}
	}
	gen, err := reg.NewSource("builtin:generator", newCfg("gen", map[string]string{"format.options.id": "int"}))
	if err != nil {
		t.Fatal(err)
	}
	file, err := reg.NewDestination("builtin:file", newCfg("out", map[string]string{"path": filepath.Join(dir, "out.jsonl")}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		has  func(any) bool
	}{
		{"source stamps its metadata", func(v any) bool { _, ok := v.(sourceMetadataStamper); return ok }},
	} {
		if !c.has(gen) {
			t.Fatalf("the generator itself lacks %q: the test no longer checks anything", c.name)
		}
		cfg := pipeline.Config{Sources: []pipeline.Source{{ID: "gen", Connector: gen}}}
		(&Taps{}).Tap(&cfg)
		if !c.has(cfg.Sources[0].Connector) {
			t.Errorf("tapped source lost %q", c.name)
		}
	}
	for _, c := range []struct {
		name string
		has  func(any) bool
	}{
		{"Splitter", func(v any) bool { _, ok := v.(processor.Splitter); return ok }},
		{"Closer", func(v any) bool { _, ok := v.(processor.Closer); return ok }},
	} {
		split, err := processor.NewRegistry(processor.Builtin()...).New("split", processor.Config{PipelineID: "p", ProcessorID: "s",
			Settings: map[string]string{"field": ".Payload.After.items"}})
		if err != nil {
			t.Fatal(err)
		}
		// A processor with something to close, as a standalone one.
		var proc processor.Processor = closingSplitter{split.(processor.Splitter)}
		if !c.has(proc) {
			t.Fatalf("the processor itself lacks %s: the test no longer checks anything", c.name)
		}
		cfg := pipeline.Config{Processors: []pipeline.Processor{{ID: "s", Processor: proc}}}
		(&Taps{}).Tap(&cfg)
		if !c.has(cfg.Processors[0].Processor) {
			t.Errorf("tapped processor lost %s", c.name)
		}
	}
	for _, c := range []struct {
		name string
		has  func(any) bool
	}{
		{"PositionReporter", destinationHas[connector.PositionReporter]},
		{"SourceReporter", destinationHas[connector.SourceReporter]},
		{"HoldingReporter", destinationHas[connector.HoldingReporter]},
		{"SyncReporter", destinationHas[connector.SyncReporter]},
	} {
		if !c.has(file) {
			t.Fatalf("the file destination itself lacks %s: the test no longer checks anything", c.name)
		}
		cfg := pipeline.Config{Destinations: []pipeline.Destination{{ID: "out", Connector: file}}}
		(&Taps{}).Tap(&cfg)
		if !c.has(cfg.Destinations[0].Connector) {
			t.Errorf("tapped destination lost %s", c.name)
		}
	}
}

// destinationHas reports whether the destination v has the ability T,
// looking through wrappers as the engine does (connector.Ability).
func destinationHas[T any](v any) bool {
	_, ok := connector.Ability[T](v.(connector.Destination))
	return ok
}

// closingSplitter is a Splitter with something to close.
type closingSplitter struct{ processor.Splitter }

func (closingSplitter) Close(context.Context) error { return nil }

// syncAnswering is a destination that says whether it syncs.
type syncAnswering struct {
	connector.Destination
	syncs bool
}

func (d syncAnswering) SyncsWrites() bool { return d.syncs }

// A tapped destination keeps the answer of connector.SyncReporter, as the
// engine finds it (connector.Ability): without it, the engine would sync
// the dedup entries of a destination that does not sync its writes. One
// without the ability gains none, and the engine takes it as syncing.
func TestTappedDestinationKeepsWhetherItSyncs(t *testing.T) {
	for _, tt := range []struct {
		name       string
		dst        connector.Destination
		can, syncs bool
	}{
		{"does not sync", syncAnswering{syncs: false}, true, false},
		{"syncs", syncAnswering{syncs: true}, true, true},
		{"cannot say", tapTestDestination{}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := pipeline.Config{Destinations: []pipeline.Destination{{ID: "out", Connector: tt.dst}}}
			(&Taps{}).Tap(&cfg)
			sr, ok := connector.Ability[connector.SyncReporter](cfg.Destinations[0].Connector)
			if ok != tt.can || ok && sr.SyncsWrites() != tt.syncs {
				t.Fatalf("tapped destination: SyncReporter %v, SyncsWrites %v; want %v, %v", ok, ok && sr.SyncsWrites(), tt.can, tt.syncs)
			}
		})
	}
}
