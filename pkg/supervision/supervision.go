// Package supervision keeps the pipelines of one process: it provisions
// each (its recovery policy, its first run built and checked, its initial
// state, its supervisor), changes them as the reconciler's plans say,
// builds every run and hands the supervisors' events to the journal, and
// shows the pipelines to the API and to an instance of a cluster. It
// decides nothing about a pipeline's health: the supervisor (lifecycle/)
// does, the engine (pkg/pipeline) moves its records, pkg/assembly builds a
// run from a pipeline's configuration.
//
// Where to look:
//   - provision.go: a pipeline from its configuration to a supervisor, and
//     where it starts (initial state, provisioning events);
//   - reconcile.go: a plan applied (created, updated, deleted pipelines);
//   - run.go: one run of a pipeline, and its hooks into the audit log;
//   - pipeline.go, api_*.go: a pipeline and the set as the API sees them;
//   - cluster.go: the set as an instance of a cluster drives it.
package supervision

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/dedup"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/assembly"
	"github.com/conduitry/conduit/pkg/clock"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/fdlimit"
	"github.com/conduitry/conduit/pkg/managedrules"
	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/notify"
	"github.com/conduitry/conduit/pkg/ownership"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/store"
)

// Options are what the pipelines of a process are kept with: the parts of
// the process they use, opened by the runtime (pkg/conduit).
type Options struct {
	Config config.Config
	Log    *zap.Logger
	// DB is read for the pipelines applied through the API; Writer writes
	// what a change of them writes.
	DB         store.Store
	Writer     *store.Batcher
	Connectors *connector.Registry
	Processors *processor.Registry
	Assembler  *assembly.Assembler
	States     *lifecycle.StateStore
	Audit      *auditlog.Log
	Dedup      *dedup.Store
	Clock      clock.Clock
	Restarts   *lifecycle.RestartScheduler
	Policies   *lifecycle.Policies
	// Breakers is nil when pipelines.breakers.enabled is off; Notifier
	// when there are no notifications.targets.
	Breakers *lifecycle.Breakers
	Notifier *notify.Notifier
	Metrics  *metrics.Metrics
	// Ownership decides which pipelines this process runs; Guards are
	// its guards of their writes.
	Ownership ownership.Ownership
	Guards    ownership.Guards
	// Descriptors counts the descriptors left before a run opens its
	// connectors.
	Descriptors *fdlimit.Gauge
	// Crashed says the last process on the store did not stop cleanly.
	Crashed bool
	// Observer, if set, also receives every pipeline event.
	Observer lifecycle.Observer
	// Fail ends the process (a pipeline degraded with
	// pipelines.exit-on-degraded on).
	Fail func(error)
}

// Pipelines are the pipelines a process supervises.
type Pipelines struct {
	cfg         config.Config
	log         *zap.Logger
	db          store.Store
	writer      *store.Batcher
	connectors  *connector.Registry
	processors  *processor.Registry
	assembler   *assembly.Assembler
	states      *lifecycle.StateStore
	audit       *auditlog.Log
	dedup       *dedup.Store
	clock       clock.Clock
	restarts    *lifecycle.RestartScheduler
	policies    *lifecycle.Policies
	breakers    *lifecycle.Breakers
	notifier    *notify.Notifier
	metrics     *metrics.Metrics
	ownership   ownership.Ownership
	writeGuards ownership.Guards
	fds         *fdlimit.Gauge
	crashed     bool
	observer    lifecycle.Observer
	fail        func(error)
	// kept holds what validation built for the first runs (keptBuilds).
	kept    keptBuilds
	figures *recoveryFigures

	// mu guards the set of pipelines, which the reconciler changes while
	// the API, the metrics and shutdown read it.
	mu        sync.RWMutex
	pipelines []*managedPipeline
	byID      map[string]*managedPipeline
	// invalid are the configurations that did not make a pipeline, for
	// the API.
	invalid []api.ConfigError
	// supCtx is the supervisors' context once Serve started them (nil
	// before); supervisors is their group, which Serve waits for.
	supCtx      context.Context
	supervisors sync.WaitGroup
	// reconciling serializes reconciliations; reload asks for one.
	reconciling sync.Mutex
	reload      chan struct{}
	// supervising is closed once Serve started the supervisors.
	supervising chan struct{}
}

// New returns the pipelines of a process, none yet: ProvisionAll
// provisions those of the pipeline files and the catalog.
func New(o Options) *Pipelines {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Fail == nil {
		o.Fail = func(error) {}
	}
	return &Pipelines{
		cfg: o.Config, log: o.Log, db: o.DB, writer: o.Writer, connectors: o.Connectors, processors: o.Processors,
		assembler: o.Assembler, states: o.States, audit: o.Audit, dedup: o.Dedup, clock: o.Clock, restarts: o.Restarts,
		policies: o.Policies, breakers: o.Breakers, notifier: o.Notifier, metrics: o.Metrics, ownership: o.Ownership,
		writeGuards: o.Guards, fds: o.Descriptors, crashed: o.Crashed, observer: o.Observer, fail: o.Fail,
		figures: newRecoveryFigures(o.Clock.Now()), byID: map[string]*managedPipeline{}, reload: make(chan struct{}, 1),
		supervising: make(chan struct{}),
	}
}

// Supervising is closed once Serve started the supervisors.
func (ps *Pipelines) Supervising() <-chan struct{} { return ps.supervising }

// Degraded returns the ids of the degraded pipelines.
func (ps *Pipelines) Degraded() []string {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	var ids []string
	for _, m := range ps.pipelines {
		if m.metrics.Status() == lifecycle.StatusDegraded {
			ids = append(ids, m.cfg.ID)
		}
	}
	return ids
}

// Count returns how many pipelines run here.
func (ps *Pipelines) Count() int {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return len(ps.pipelines)
}

// Invalid returns the configurations that did not make a pipeline.
func (ps *Pipelines) Invalid() []api.ConfigError {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return slices.Clone(ps.invalid)
}

// ErrPipelineDegraded is what Options.Fail is given, in a DegradedError,
// when a pipeline became degraded and pipelines.exit-on-degraded is on.
var ErrPipelineDegraded = errors.New("a pipeline is degraded and pipelines.exit-on-degraded is true")

// RecordCounts gives emit the record counts of every pipeline (the
// metrics' collector).
func (ps *Pipelines) RecordCounts(emit func(string, metrics.RecordCounts)) {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	for _, m := range ps.pipelines {
		emit(m.cfg.ID, m.counts())
	}
}

// durable returns once every state and audit event handed over so far is
// on disk.
func (ps *Pipelines) durable(ctx context.Context) error {
	return ps.writer.Flush(ctx)
}

// IDs returns the ids of the valid pipelines, in load order.
func (ps *Pipelines) IDs() []string {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	ids := make([]string, len(ps.pipelines))
	for i, m := range ps.pipelines {
		ids[i] = m.cfg.ID
	}
	return ids
}

// DegradedError ends the process when a pipeline became degraded with
// pipelines.exit-on-degraded on.
type DegradedError struct{ PipelineID string }

func (e DegradedError) Error() string {
	return ErrPipelineDegraded.Error() + ": pipeline " + e.PipelineID
}

func (DegradedError) Unwrap() error { return ErrPipelineDegraded }

// Serve runs a supervisor per pipeline, the reconciler, the
// notifier and the file watcher until ctx ends, then stops them: each
// supervisor stops its pipeline gracefully and records it as stopped for
// the shutdown; after pipelines.graceful-stop-timeout, or when force is
// closed, the runs are cancelled.
func (ps *Pipelines) Serve(ctx context.Context, force <-chan struct{}) error {
	ps.mu.Lock()
	ps.supCtx = ctx
	for _, m := range ps.pipelines {
		ps.supervisors.Go(func() { m.sup.Run(ctx) })
	}
	ps.mu.Unlock()
	// The reconciler and the watcher are in the supervisors' group: a
	// pipeline they start while the process shuts down is waited for.
	w := ps.watchFiles()
	ps.supervisors.Go(func() { ps.reconcileLoop(ctx, w) })
	ps.supervisors.Go(func() { ps.notifier.Run(ctx) })
	if w != nil {
		ps.supervisors.Go(func() { w.Run(ctx, ps.Reload) })
	}
	close(ps.supervising)
	<-ctx.Done()
	stopped := make(chan struct{})
	go func() {
		ps.supervisors.Wait()
		close(stopped)
	}()
	timeout := time.NewTimer(ps.cfg.Pipelines.GracefulStopTimeout)
	defer timeout.Stop()
	select {
	case <-stopped:
		return nil
	case <-force:
		ps.log.Warn("second signal: force-stopping pipelines")
	case <-timeout.C:
		ps.log.Warn("graceful stop timed out: force-stopping pipelines")
	}
	ps.mu.RLock()
	for _, m := range ps.pipelines {
		m.sup.Kill()
	}
	ps.mu.RUnlock()
	<-stopped
	return nil
}

// What the API and the managed rules are given of the pipelines.

// ForAPI returns the pipelines as the API lists and changes them.
func (ps *Pipelines) ForAPI() api.Pipelines { return apiPipelines{ps} }

// Changes returns the pipelines as the API applies and deletes them.
func (ps *Pipelines) Changes() api.Changes { return apiChanges{ps} }

// ConduitV1 returns the pipelines as Conduit's API v1 needs them.
func (ps *Pipelines) ConduitV1() api.ConduitV1 { return conduitV1{ps} }

// ForRules returns the pipelines as the managed recovery rules see them.
func (ps *Pipelines) ForRules() managedrules.Pipelines { return rulePipelines{ps} }
