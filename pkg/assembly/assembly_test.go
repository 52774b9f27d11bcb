package assembly

import (
	"strings"
	"testing"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/processor"
)

func parse(t *testing.T, body string) config.Pipeline {
	t.Helper()
	ps, errs := config.ParsePipelines(config.FileContent{Name: "p.yml", Data: []byte(body)})
	if len(errs) > 0 || len(ps) != 1 {
		t.Fatalf("parse: %v", errs)
	}
	return ps[0]
}

func testAssembler() *Assembler {
	return New(Options{
		Connectors: connector.NewRegistry(connector.Builtin()...),
		Processors: processor.NewRegistry(processor.Builtin()...),
	})
}

// TestBuildWiresThePipeline: the source's processors run before the
// pipeline's, a destination keeps its own, the dead-letter queue gets the
// file's window.
func TestBuildWiresThePipeline(t *testing.T) {
	p := parse(t, `version: "2.2"
pipelines:
  - id: p
    processors:
      - {id: last, plugin: field.set, settings: {field: .Metadata.b, value: "2"}}
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings: {format.options.id: int}
        processors:
          - {id: first, plugin: field.set, settings: {field: .Metadata.a, value: "1"}}
      - id: out
        type: destination
        plugin: builtin:log
        processors:
          - {id: mine, plugin: field.exclude, settings: {fields: .Metadata.a}}
    dead-letter-queue: {window-size: 5, window-nack-threshold: 2}
`)
	cfg, err := testAssembler().Build(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sources) != 1 || cfg.Sources[0].ID != "gen" || cfg.Sources[0].Connector == nil {
		t.Fatalf("sources %+v", cfg.Sources)
	}
	if ps := cfg.Sources[0].Processors; len(ps) != 1 || ps[0].ID != "first" || ps[0].Connector != "gen" {
		t.Errorf("the source's processors %+v, want its own", ps)
	}
	if len(cfg.Processors) != 1 || cfg.Processors[0].ID != "last" || cfg.Processors[0].Connector != "" {
		t.Errorf("the pipeline's processors %+v", cfg.Processors)
	}
	if len(cfg.Destinations) != 1 || len(cfg.Destinations[0].Processors) != 1 || cfg.Destinations[0].Processors[0].Connector != "out" {
		t.Errorf("destinations %+v", cfg.Destinations)
	}
	if cfg.DLQ.Connector == nil || cfg.DLQ.WindowSize != 5 || cfg.DLQ.WindowNackThreshold != 2 {
		t.Errorf("dead-letter queue %+v", cfg.DLQ)
	}
	if cfg.Dedup != nil {
		t.Error("dedup set without a dedup store")
	}
}

// TestProblemsNamesEveryPart: Build stops at the first problem, Problems
// finds each, at its line.
func TestProblemsNamesEveryPart(t *testing.T) {
	p := parse(t, `version: "2.2"
pipelines:
  - id: p
    connectors:
      - {id: gen, type: source, plugin: builtin:generator, settings: {rate: fast, format.options.id: int}}
      - {id: out, type: destination, plugin: builtin:nope}
    processors:
      - {id: pr, plugin: no.such.processor}
`)
	a := testAssembler()
	if _, err := a.Build(p); err == nil || !strings.Contains(err.Error(), "p.yml:5") {
		t.Errorf("Build error %v, want the first problem at p.yml:5", err)
	}
	errs := a.Problems(p)
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"settings.rate", "connectors[out].plugin", "processors[pr].plugin"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not name %s:\n%s", want, all)
		}
	}
	if len(errs) != 3 {
		t.Errorf("%d problems, want 3:\n%s", len(errs), all)
	}
}
