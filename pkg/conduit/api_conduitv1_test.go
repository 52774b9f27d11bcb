package conduit

import (
	"context"
	"errors"
	"testing"

	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/pipeline"
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
	if _, ok := cfg.Destinations[1].Connector.(connector.PositionReporter); !ok {
		t.Fatal("the wrapped destination lost its PositionReporter")
	}
	if _, ok := cfg.Destinations[0].Connector.(connector.PositionReporter); ok {
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
