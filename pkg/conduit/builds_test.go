package conduit

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
)

// TestAStartBuildsThePipelineOnce: validating a pipeline builds its
// connectors, and the first run runs that build; a start must not build
// them again (a standalone connector's lookup, a processor's compilation
// are paid once).
func TestAStartBuildsThePipelineOnce(t *testing.T) {
	dir := t.TempDir()
	body := `version: "2.2"
pipelines:
  - id: once
    connectors:
      - {id: gen, type: source, plugin: builtin:counted, settings: {format.options.id: int}}
      - {id: hang, type: destination, plugin: builtin:stuck}
`
	if err := os.WriteFile(filepath.Join(dir, "p.yml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Type = config.DBTypeInMemory
	cfg.Pipelines.Path = dir
	cfg.Pipelines.GracefulStopTimeout = 100 * time.Millisecond

	var sources, destinations atomic.Int32
	dst := &stuckDestination{writing: make(chan struct{}, 1)}
	plugins := append(connector.Builtin(),
		connector.Plugin{Name: "counted", NewSource: func(c connector.Config) (connector.Source, error) {
			sources.Add(1)
			return connector.NewGeneratorSource(c)
		}},
		connector.Plugin{Name: "stuck", NewDestination: func(connector.Config) (connector.Destination, error) {
			destinations.Add(1)
			return dst, nil
		}})
	rt, err := New(context.Background(), cfg, zap.NewNop(), Options{Connectors: connector.NewRegistry(plugins...)})
	if err != nil {
		t.Fatal(err)
	}
	if got := sources.Load(); got != 1 {
		t.Errorf("provisioning built the source %d times, want 1", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	force := make(chan struct{})
	done := runInBackground(rt, ctx, force)
	select {
	case <-dst.writing:
	case <-time.After(10 * time.Second):
		t.Fatal("the first run never wrote")
	}
	if s, d := sources.Load(), destinations.Load(); s != 1 || d != 1 {
		t.Errorf("a start built the source %d and the destination %d times, want 1 each", s, d)
	}
	cancel()
	close(force)
	<-done
}
