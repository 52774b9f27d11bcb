package conduit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/reconciler"
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
	m := &managedPipeline{}
	cfg := pipeline.Config{
		Source:       pipeline.Source{ID: "src", Connector: tapTestSource{}},
		Destinations: []pipeline.Destination{{ID: "plain", Connector: tapTestDestination{}}, {ID: "reporting", Connector: tapTestReporter{}}},
		Processors:   []pipeline.Processor{{ID: "p", Processor: upper{}, Connector: "src"}},
	}
	m.tapRun(&cfg)
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
	src := m.taps.subscribe(sctx, api.InspectPoint{Connector: "src"})
	in := m.taps.subscribe(sctx, api.InspectPoint{Connector: "src", Processor: "p"})
	out := m.taps.subscribe(sctx, api.InspectPoint{Connector: "src", Processor: "p", Out: true})
	dst := m.taps.subscribe(sctx, api.InspectPoint{Connector: "reporting"})
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
	many := make([]record.Record, inspectBuffer+10)
	if n, err := cfg.Destinations[1].Connector.Write(ctx, many); err != nil || n != len(many) {
		t.Fatalf("write: %d %v", n, err)
	}
	if len(dst) != inspectBuffer {
		t.Errorf("an inspector behind holds %d records, want %d (the rest dropped)", len(dst), inspectBuffer)
	}
	cancel()
	for _, ch := range []<-chan record.Record{src, in, out, dst} {
		for range ch { // closed once its context ended
		}
	}
	if n := m.taps.active.Load(); n != 0 {
		t.Errorf("%d inspectors left after their context ended", n)
	}
}

// Conduit's piecewise changes of an applied pipeline change the file it
// was applied with and apply it again; an invalid change changes nothing;
// a file's pipeline is refused naming its file.
func TestEditAppliedPipeline(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(dir, "f.yml"), []byte(stoppedPipelineFile("fromfile")), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := newFilesRuntime(t, dir, zap.NewNop())
	defer rt.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := runInBackground(rt, runCtx, nil)
	defer func() {
		stop()
		waitDone(t, done)
	}()
	file := strings.Replace(stoppedPipelineFile("a"), "format.options.id: int", "format.options.id: int\n          format.options.password: string", 1)
	if plan, err := (apiChanges{rt}).Apply(ctx, []config.FileContent{{Name: "a.yml", Data: []byte(file)}}, false, false); err != nil ||
		plan.Count(reconciler.Create) != 1 {
		t.Fatalf("apply: %+v %v", plan, err)
	}
	ed := runtimeConduitV1{rt}
	cfg := func() config.Pipeline {
		t.Helper()
		m := rt.get("a")
		if m == nil {
			t.Fatal("pipeline a is gone")
		}
		return m.Config()
	}
	steps := []struct {
		name  string
		edit  api.PipelineEdit
		check func(config.Pipeline) bool
	}{
		{"update a connector's settings, the masked password sent back as shown",
			api.PipelineEdit{Op: api.EditUpdateConnector, Connector: "gen", Settings: map[string]string{"format.options.id": "int", "rate": "5", "format.options.password": config.Masked}},
			func(p config.Pipeline) bool {
				s := p.Connectors[0].Settings
				return s["rate"] == "5" && s["format.options.password"] == "string"
			}},
		{"create a destination",
			api.PipelineEdit{Op: api.EditCreateConnector, Connector: "more", Plugin: "builtin:log", Settings: map[string]string{"level": "debug"}},
			func(p config.Pipeline) bool {
				return len(p.Connectors) == 3 && p.Connectors[2].ID == "more" && p.Connectors[2].Type == config.TypeDestination
			}},
		{"add a processor to the source",
			api.PipelineEdit{Op: api.EditCreateProcessor, Connector: "gen", Processor: "tag", Plugin: "field.set", Settings: map[string]string{"field": ".Metadata.x", "value": "1"}},
			func(p config.Pipeline) bool {
				return len(p.Connectors[0].Processors) == 1 && p.Connectors[0].Processors[0].Plugin == "field.set"
			}},
		{"update it",
			api.PipelineEdit{Op: api.EditUpdateProcessor, Connector: "gen", Processor: "tag", Settings: map[string]string{"field": ".Metadata.y", "value": "2"}},
			func(p config.Pipeline) bool { return p.Connectors[0].Processors[0].Settings["field"] == ".Metadata.y" }},
		{"delete it", api.PipelineEdit{Op: api.EditDeleteProcessor, Connector: "gen", Processor: "tag"},
			func(p config.Pipeline) bool { return len(p.Connectors[0].Processors) == 0 }},
		{"delete the destination", api.PipelineEdit{Op: api.EditDeleteConnector, Connector: "more"},
			func(p config.Pipeline) bool { return len(p.Connectors) == 2 }},
		{"rename the pipeline", api.PipelineEdit{Op: api.EditUpdatePipeline, Name: "renamed", Description: "now described"},
			func(p config.Pipeline) bool { return p.Name == "renamed" && p.Description == "now described" }},
	}
	// An inspector of the pipeline as it ran is ended by the change.
	inspected, err := ed.Inspect(ctx, "a", api.InspectPoint{Connector: "gen"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ed.Inspect(ctx, "a", api.InspectPoint{Connector: "nope"}); !errors.Is(err, api.ErrInspectUnknown) {
		t.Errorf("inspecting an unknown connector: %v", err)
	}
	for i, s := range steps {
		if err := ed.EditPipeline(ctx, "a", s.edit); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if p := cfg(); !s.check(p) {
			t.Fatalf("%s: %+v", s.name, p)
		}
		if i == 0 {
			ended := make(chan struct{})
			go func() {
				for range inspected {
				}
				close(ended)
			}()
			select {
			case <-ended:
			case <-time.After(10 * time.Second): // a guard against a hang, not a wait
				t.Fatal("the inspector of the replaced pipeline was not ended")
			}
		}
	}
	// Invalid: a setting the plugin does not have. Nothing changes.
	err = ed.EditPipeline(ctx, "a", api.PipelineEdit{Op: api.EditUpdateConnector, Connector: "gen", Settings: map[string]string{"format.options.id": "int", "bogus": "1"}})
	var ee *api.EditError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("an invalid setting: %v", err)
	}
	if cfg().Connectors[0].Settings["rate"] != "5" {
		t.Errorf("the refused change changed the pipeline: %+v", cfg().Connectors[0].Settings)
	}
	var dif *api.DefinedInFileError
	if err := ed.EditPipeline(ctx, "fromfile", api.PipelineEdit{Op: api.EditDeleteConnector, Connector: "out"}); !errors.As(err, &dif) ||
		!strings.Contains(err.Error(), "f.yml:3") {
		t.Errorf("a file's pipeline: %v", err)
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
		(&managedPipeline{}).tapRun(&cfg)
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
		(&managedPipeline{}).tapRun(&cfg)
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
		(&managedPipeline{}).tapRun(&cfg)
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
			(&managedPipeline{}).tapRun(&cfg)
			sr, ok := connector.Ability[connector.SyncReporter](cfg.Destinations[0].Connector)
			if ok != tt.can || ok && sr.SyncsWrites() != tt.syncs {
				t.Fatalf("tapped destination: SyncReporter %v, SyncsWrites %v; want %v, %v", ok, ok && sr.SyncsWrites(), tt.can, tt.syncs)
			}
		})
	}
}
