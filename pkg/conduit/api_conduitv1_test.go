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
	"github.com/conduitry/conduit/pkg/reconciler"
)

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
	if plan, err := rt.pipes.Changes().Apply(ctx, []config.FileContent{{Name: "a.yml", Data: []byte(file)}}, false, false); err != nil ||
		plan.Count(reconciler.Create) != 1 {
		t.Fatalf("apply: %+v %v", plan, err)
	}
	v1 := rt.pipes.ConduitV1()
	ed := v1.(api.PipelineEditor)
	cfg := func() config.Pipeline {
		t.Helper()
		m := supervised(rt, "a")
		if m == nil {
			t.Fatal("pipeline a is gone")
		}
		return m.(api.Configured).Config()
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
	inspected, err := v1.Inspect(ctx, "a", api.InspectPoint{Connector: "gen"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Inspect(ctx, "a", api.InspectPoint{Connector: "nope"}); !errors.Is(err, api.ErrInspectUnknown) {
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
