package supervision

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/dedup"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/assembly"
	"github.com/conduitry/conduit/pkg/clock"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/fdlimit"
	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/ownership"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/store"
)

// newTestPipelines returns the pipelines of a process alone on an
// in-memory store, with the built-in connectors and processors, wired as
// the runtime wires them; nothing is provisioned yet.
func newTestPipelines(tb testing.TB, cfg config.Config) *Pipelines {
	tb.Helper()
	ctx := context.Background()
	db := store.NewInMemory()
	writer := store.NewBatcher(db, nil)
	tb.Cleanup(writer.Close)
	audit, err := auditlog.Open(ctx, db, writer, auditlog.Options{Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = audit.Close() })
	connectors := connector.NewRegistry(connector.Builtin()...)
	processors := processor.NewRegistry(processor.Builtin()...)
	dedupStore := dedup.New(db, writer, dedup.Options{TTL: cfg.Dedup.TTL, Logger: zap.NewNop()})
	asm := assembly.Options{Connectors: connectors, Processors: processors, Positions: pipeline.NewPositionStore(db, writer, time.Now),
		DB: db, Writer: writer, Protected: assembly.ProtectedPaths(cfg), Logger: zap.NewNop()}
	if cfg.Dedup.Enabled {
		asm.Dedup = dedupStore
	}
	var ps *Pipelines
	ps = New(Options{Config: cfg, Log: zap.NewNop(), DB: db, Writer: writer, Connectors: connectors, Processors: processors,
		Assembler: assembly.New(asm), States: lifecycle.NewStateStore(db, writer), Audit: audit, Dedup: dedupStore,
		Clock: clock.Real{}, Restarts: lifecycle.NewRestartScheduler(clock.Real{}), Policies: lifecycle.NewPolicies(),
		Metrics:     metrics.New(func(func(string, metrics.RecordCounts)) {}),
		Ownership:   ownership.Solo{Known: func() []reconciler.Running { return ps.Known() }},
		Descriptors: fdlimit.NewGauge(250*time.Millisecond, func() (int, error) { return 1 << 20, nil })})
	return ps
}
