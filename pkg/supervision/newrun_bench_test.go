package supervision

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/config"
)

// BenchmarkNewRun measures what a restart allocates to build a run: in a
// fault storm thousands of these happen at once.
func BenchmarkNewRun(b *testing.B) {
	dir := b.TempDir()
	body := `version: "2.2"
pipelines:
  - id: p
    connectors:
      - {id: src, type: source, plugin: builtin:generator, settings: {format.options.id: int}}
      - {id: dst, type: destination, plugin: builtin:log}
`
	if err := os.WriteFile(filepath.Join(dir, "p.yml"), []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Type = config.DBTypeInMemory
	cfg.Pipelines.Path = dir
	ps := newTestPipelines(b, cfg)
	if err := ps.ProvisionAll(context.Background()); err != nil {
		b.Fatal(err)
	}
	m := ps.byID["p"]
	b.ReportAllocs()
	for b.Loop() {
		run, err := ps.newRun(m, lifecycle.RunHooks{})
		if err != nil {
			b.Fatal(err)
		}
		// A run that is never run gives back what it holds (its file
		// descriptors' reservation), as a restart a stop overtook does.
		if d, ok := run.(lifecycle.Discarder); ok {
			d.Discard()
		}
	}
}
