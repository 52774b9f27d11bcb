// Package conduit wires a process together: it opens the store and what
// is kept in it (states, audit log, positions, dedup entries), builds the
// connector and processor registries, takes the API's port, joins the
// cluster when cluster.enabled is on, and runs the process's services as
// one tree (pkg/service) that stops in reverse order. It decides nothing
// itself. Where each thing happens:
//
//   - a pipeline provisioned, changed as a plan says, run and shown to
//     the API: pkg/supervision;
//   - a plan made from the pipeline files: pkg/reconciler;
//   - a run built from a pipeline's configuration: pkg/assembly;
//   - what happens to a pipeline that fails: lifecycle/ (the supervisor);
//   - which pipelines this process runs, and the fence of each write:
//     pkg/ownership (ownership.Solo alone, pkg/cluster/instance in a
//     cluster, which drives the pipelines through clusterHost);
//   - the managed recovery rules: pkg/managedrules;
//   - the API itself: pkg/api, given the adapters pkg/supervision makes.
package conduit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/dedup"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/assembly"
	"github.com/conduitry/conduit/pkg/clock"
	"github.com/conduitry/conduit/pkg/cluster/instance"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/console"
	"github.com/conduitry/conduit/pkg/fdlimit"
	"github.com/conduitry/conduit/pkg/managedrules"
	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/notify"
	"github.com/conduitry/conduit/pkg/ownership"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/schemaregistry"
	"github.com/conduitry/conduit/pkg/service"
	"github.com/conduitry/conduit/pkg/store"
	"github.com/conduitry/conduit/pkg/supervision"
)

// Runtime is one conduit process: its store and what is kept in it, its
// registries, its API server, its ownership of pipelines and the pipelines
// it supervises (pkg/supervision), started and stopped as one tree of
// services.
type Runtime struct {
	cfg        config.Config
	log        *zap.Logger
	db         store.Store
	writer     *store.Batcher
	connectors *connector.Registry
	processors *processor.Registry
	// standalone are the processors of processors.path, which the default
	// processor registry serves.
	standalone *processor.Standalone
	// javascript bounds custom.javascript (processors.javascript.*).
	javascript processor.JavaScriptLimits
	positions  *pipeline.PositionStore
	// assembler builds the pipelines' runs from their configurations.
	assembler *assembly.Assembler
	states    *lifecycle.StateStore
	clock     clock.Clock
	// restarts launches every pipeline's restarts on time, even when
	// thousands fall due at once (see lifecycle.RestartScheduler).
	restarts *lifecycle.RestartScheduler
	// policies compiles the pipelines' recovery policies, sharing the
	// global rules among them; managed are the rules managed through the
	// API, which every policy tries at each fault as they are then.
	policies *lifecycle.Policies
	managed  *lifecycle.ManagedRules
	// breakers hold pipelines failing on a shared dependency; nil when
	// pipelines.breakers.enabled is off.
	breakers *lifecycle.Breakers
	// rules are the managed recovery rules, which the API changes and
	// managed makes effective.
	rules    *managedrules.Rules
	audit    *auditlog.Log
	notifier *notify.Notifier // nil: no notifications.targets
	dedup    *dedup.Store
	metrics  *metrics.Metrics
	server   *api.Server
	// ownership decides which pipelines this process runs (pkg/ownership):
	// all of them when it runs alone, those whose lease it holds as an
	// instance of a cluster (pkg/cluster/instance); writeGuards are its
	// guards.
	ownership   ownership.Ownership
	writeGuards ownership.Guards
	// pipes are the pipelines this process supervises.
	pipes *supervision.Pipelines
	// ready is true while Run supervises the pipelines (/readyz).
	ready atomic.Bool

	// services are the process's long-lived parts, started and stopped
	// by Run as one tree; anything that must end the process (a pipeline
	// degraded with pipelines.exit-on-degraded, the store's refusal of
	// this process's writes, a failed cluster membership) fails it.
	services *service.Tree
	observer lifecycle.Observer
	// fds counts the descriptors left before a run opens its connectors.
	fds *fdlimit.Gauge
	// crashed says the last process on this store did not shut down
	// cleanly (store.KeyProcess was there).
	crashed bool
	// marked says this process wrote its marker, which a clean shutdown
	// removes.
	marked bool
}

// Options are the parts of a Runtime that tests replace.
type Options struct {
	// Connectors defaults to the built-in connectors and the standalone
	// ones in connectors.path.
	Connectors *connector.Registry
	// Processors defaults to the built-in processors, with the schema
	// registry conduit.yml names.
	Processors *processor.Registry
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// Observer, if set, also receives every pipeline event.
	Observer lifecycle.Observer
	// DescriptorsLeft defaults to fdlimit.Left.
	DescriptorsLeft func() (int, error)

	// standaloneProcessors are the processors of processors.path, loaded
	// by withDefaults when Processors was not given.
	standaloneProcessors *processor.Standalone
	// javascript are custom.javascript's bounds from conduit.yml, read
	// by withDefaults when Processors was not given.
	javascript processor.JavaScriptLimits
}

// defaultProcessors is the processor registry a runtime has unless a test
// gives it one: the built-in processors, the avro ones with reg, and the
// standalone ones.
func defaultProcessors(reg schemaregistry.Registry, standalone *processor.Standalone, js processor.JavaScriptLimits) *processor.Registry {
	return processor.NewRegistry(processor.BuiltinWith(processor.ConduitOptions{SchemaRegistry: reg, JavaScript: js})...).WithStandalone(standalone)
}

// New opens the store, loads the pipeline files and takes up each valid
// pipeline's persisted state. Invalid pipelines are logged (each error
// names the file, the pipeline and the field) and left out; the valid ones
// run. Only a failure that stops everything, such as a store that cannot
// be opened, is returned.
func New(ctx context.Context, cfg config.Config, log *zap.Logger, opts Options) (_ *Runtime, err error) {
	opts, err = opts.withDefaults(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	r := &Runtime{
		cfg:        cfg,
		log:        log,
		connectors: opts.Connectors,
		processors: opts.Processors,
		standalone: opts.standaloneProcessors,
		javascript: opts.javascript,
		clock:      opts.Clock,
		restarts:   lifecycle.NewRestartScheduler(opts.Clock),
		managed:    lifecycle.NewManagedRules(),
		observer:   opts.Observer,
		fds:        fdlimit.NewGauge(250*time.Millisecond, opts.DescriptorsLeft),
	}
	r.services = service.New(r.stopping)
	// Alone until openState finds cluster.enabled on.
	r.ownership = ownership.Solo{Known: func() []reconciler.Running { return r.pipes.Known() }}
	r.policies = lifecycle.NewPolicies().WithManaged(r.managed)
	if b := cfg.Pipelines.Breakers; b.Enabled {
		r.breakers = lifecycle.NewBreakers(lifecycle.BreakerConfig{Threshold: b.Threshold, Window: b.Window, Stagger: b.Stagger},
			opts.Clock, r.breakerChanged)
	}
	r.metrics = metrics.New(func(emit func(string, metrics.RecordCounts)) {
		if r.pipes != nil {
			r.pipes.RecordCounts(emit)
		}
	})
	if r.breakers != nil {
		r.metrics.WatchBreakers(r.breakers.States, func() []string {
			if r.pipes == nil {
				return nil
			}
			return r.pipes.DeclaredDependencies()
		})
	}
	r.metrics.WatchRestarts(r.restarts.Span)
	// One shutdown path: whatever the phases below opened, close releases.
	defer func() {
		if err != nil {
			_ = r.close()
		}
	}()
	// The port first: one that is taken or not allowed stops the process
	// before it opens the store or writes anything.
	if err := r.listen(); err != nil {
		return nil, err
	}
	if err := r.openState(ctx); err != nil {
		return nil, err
	}
	if err := r.pipes.ProvisionAll(ctx); err != nil {
		return nil, err
	}
	if err := r.ownership.Join(ctx); err != nil {
		return nil, err
	}
	r.serveAPI()
	r.warnLowFileLimit()
	return r, nil
}

// withDefaults fills in what a test did not replace. The standalone
// processors in processors.path are loaded (compiled) here, once.
func (o Options) withDefaults(ctx context.Context, cfg config.Config, log *zap.Logger) (Options, error) {
	if o.Connectors == nil {
		o.Connectors = connector.NewRegistry(connector.Builtin()...).WithStandalone(
			connector.NewStandaloneHost(connector.StandaloneConfig{
				Dir:          cfg.Connectors.Path,
				StartTimeout: cfg.Connectors.StartTimeout,
			}))
	}
	if o.Processors == nil {
		var limit uint64
		if cfg.Processors.MemoryLimit != "" {
			n, err := config.WasmMemoryLimit(cfg.Processors.MemoryLimit)
			if err != nil {
				return o, fmt.Errorf("processors.memory-limit: %w", err)
			}
			limit = n
		}
		standalone, err := processor.NewStandalone(ctx, processor.StandaloneConfig{
			Dir: cfg.Processors.Path, MemoryLimit: limit, Logger: log})
		if err != nil {
			return o, err
		}
		// The registry is made once the store is open (defaultProcessors):
		// the avro processors' schema registry may be kept there.
		o.standaloneProcessors = standalone
		js, err := javaScriptLimits(cfg)
		if err != nil {
			return o, err
		}
		o.javascript = js
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o, nil
}

// javaScriptLimits reads processors.javascript.*. A require-path that is
// set must be a directory: a typo would otherwise only show as every
// require failing.
func javaScriptLimits(cfg config.Config) (processor.JavaScriptLimits, error) {
	js := cfg.Processors.JavaScript
	limits := processor.JavaScriptLimits{Timeout: js.Timeout, RequirePath: js.RequirePath}
	if js.MemoryLimit != "" {
		n, err := config.JavaScriptMemoryLimit(js.MemoryLimit)
		if err != nil {
			return limits, fmt.Errorf("processors.javascript.memory-limit: %w", err)
		}
		limits.MemoryLimit = n
	}
	if js.RequirePath != "" {
		fi, err := os.Stat(js.RequirePath)
		switch {
		case err != nil:
			return limits, fmt.Errorf("processors.javascript.require-path: %w", err)
		case !fi.IsDir():
			return limits, fmt.Errorf("processors.javascript.require-path: %s is not a directory", js.RequirePath)
		}
	}
	return limits, nil
}

// listen takes the API's port. Its handler needs the store, so it is set
// by serveAPI once everything is open.
func (r *Runtime) listen() error {
	if !r.cfg.API.Enabled {
		return nil
	}
	server, err := api.Listen(r.cfg.API.HTTP.Address, http.NotFoundHandler(), api.ServerOptions{Token: r.cfg.API.Auth.Token,
		MaxConnections: r.cfg.API.HTTP.MaxConnections, Logger: r.log, GRPCAddress: r.cfg.API.GRPC.Address})
	if err != nil {
		return err
	}
	r.server = server
	return nil
}

// openState opens the store and everything kept in it: the writer, the
// process marker, pipeline states, the audit log, positions and the dedup
// store.
func (r *Runtime) openState(ctx context.Context) error {
	db, err := openStore(ctx, r.cfg, r.log)
	if err != nil {
		return err
	}
	r.db = db
	refusals := &refusalLog{log: r.log, now: r.clock.Now}
	writeFailed := func(writes int, err error) {
		r.metrics.StoreWriteFailed(writeFailure(err), writes)
		if errors.Is(err, store.ErrDisowned) {
			r.services.Fail(err)
			return
		}
		if errors.Is(err, store.ErrFenced) {
			// Expected once in a while: a pipeline that just moved to
			// another instance had writes in flight here.
			r.log.Info("writes of pipelines another instance took over were refused", zap.Int("writes", writes), zap.Error(err))
			return
		}
		if errors.Is(err, store.ErrNoSpace) || errors.Is(err, store.ErrNoDescriptors) || errors.Is(err, store.ErrUnavailable) {
			// The audit log holds what it recorded (the events and the
			// states committed with them) and writes it once the store
			// takes writes again; saying "could not write" would read as
			// lost.
			refusals.refused(writes, err)
			return
		}
		r.log.Error("could not write to the store; pipeline states in memory stay the truth and their next transition writes them again",
			zap.Int("writes", writes), zap.Error(err))
	}
	if r.cfg.Cluster.Enabled {
		member, err := instance.Open(ctx, clusterHost{r}, instance.Options{
			URL: r.cfg.DB.Postgres.URL, ID: r.cfg.InstanceID(), TTL: r.cfg.Cluster.LeaseTTL,
			Recovery: r.cfg.Pipelines.ErrorRecovery, GracefulStopTimeout: r.cfg.Pipelines.GracefulStopTimeout,
			Log: r.log, Metrics: r.metrics,
		})
		if err != nil {
			return err
		}
		r.ownership = member
	}
	r.writeGuards = r.ownership.Guards()
	r.writer = store.NewBatcherWith(db, store.BatcherOptions{OnError: writeFailed, OnCommit: refusals.committed, FenceOf: r.writeGuards.FenceOf})
	if r.ownership.Alone() {
		// The process marker is one process's: in a cluster, whether a
		// pipeline's last instance stopped cleanly is in its state.
		crashed, err := markRunning(ctx, db, r.writer)
		if err != nil {
			return err
		}
		r.marked, r.crashed = true, crashed
		if crashed {
			r.log.Warn("conduit had not stopped cleanly last time (crash, kill or power loss): pipelines resume from their last saved positions, and records in flight then may be written again unless dedup skips them")
		}
	}
	r.states = lifecycle.NewStateStore(db, r.writer)
	r.notifier, err = notify.FromConfig(r.cfg, os.LookupEnv, notify.Options{DB: db, Writer: r.writer, Clock: r.clock,
		Logger: r.log.Named("notify"), Record: r.recordNotification})
	if err == nil {
		err = r.notifier.Register(r.metrics.Registry())
	}
	if err != nil {
		return err
	}
	r.audit, err = auditlog.Open(ctx, db, r.writer, auditlog.Options{
		With:                 r.notifier.Hook(),
		MaxEventsPerPipeline: r.cfg.AuditLog.MaxEventsPerPipeline,
		MaxAge:               r.cfg.AuditLog.MaxAge,
		Logger:               r.log.Named("auditlog"),
		Owns:                 r.writeGuards.Owns,
		Now:                  r.clock.Now,
	})
	if err != nil {
		return err
	}
	r.metrics.WatchAuditLog(func() metrics.AuditFigures {
		held, failed := r.audit.WriteFigures()
		return metrics.AuditFigures{Held: held, Failed: failed}
	})
	// One clock for everything the process writes down, so that a test's
	// fake clock reaches the audit log, positions and dedup entries too.
	r.positions = pipeline.NewPositionStore(db, r.writer, r.clock.Now)
	r.dedup = dedup.New(db, r.writer, dedup.Options{TTL: r.cfg.Dedup.TTL, Logger: r.log.Named("dedup"), Now: r.clock.Now})
	if r.processors == nil {
		// The built-in processors, with a schema registry for the avro
		// ones, which may be kept in the store just opened.
		reg, err := schemaregistry.Open(r.cfg, db)
		if err != nil {
			return err
		}
		r.processors = defaultProcessors(reg, r.standalone, r.javascript)
	}
	opts := assembly.Options{Connectors: r.connectors, Processors: r.processors, Positions: r.positions,
		DB: db, Writer: r.writer, Protected: assembly.ProtectedPaths(r.cfg), Logger: r.log}
	if r.cfg.Dedup.Enabled {
		opts.Dedup = r.dedup
	}
	r.assembler = assembly.New(opts)
	r.pipes = supervision.New(supervision.Options{Config: r.cfg, Log: r.log, DB: db, Writer: r.writer, Connectors: r.connectors,
		Processors: r.processors, Assembler: r.assembler, States: r.states, Audit: r.audit, Dedup: r.dedup, Clock: r.clock,
		Restarts: r.restarts, Policies: r.policies, Breakers: r.breakers, Notifier: r.notifier, Metrics: r.metrics,
		Ownership: r.ownership, Guards: r.writeGuards, Descriptors: r.fds, Crashed: r.crashed, Observer: r.observer,
		Fail: r.services.Fail})
	r.rules = managedrules.New(managedrules.Options{Base: r.cfg.Pipelines.ErrorRecovery, DB: db, Writer: r.writer,
		Effective: r.managed, Audit: r.audit, Ownership: r.ownership, Pipelines: r.pipes.ForRules(), Clock: r.clock,
		Log: r.log})
	if err := r.rules.LoadStored(ctx); err != nil {
		return err
	}
	if !r.ownership.Alone() {
		// Other instances' entries are theirs to expire; a pipeline's own
		// expire when a run of it loads them.
		return nil
	}
	if n, err := r.dedup.Sweep(ctx); err != nil {
		r.log.Error("could not sweep expired dedup entries", zap.Error(err))
	} else if n > 0 {
		r.log.Info("deleted expired dedup entries", zap.Int("entries", n))
	}
	return nil
}

// serveAPI gives the listening server its handler.
func (r *Runtime) serveAPI() {
	if r.server == nil {
		return
	}
	pipelines, events := r.ownership.API(r.pipes.ForAPI(), r.audit)
	svc := api.NewPipelineService(pipelines, events, nil).WithChanges(r.pipes.Changes()).WithSummaries(r.pipes)
	if r.breakers != nil {
		svc.WithDependencies(r.breakers)
	}
	// Each watch holds a connection: watches alone must not take every
	// connection, or nobody could stop a pipeline.
	maxWatchers := min(r.cfg.API.MaxWatchers, max(r.server.MaxConnections()/2, 1))
	if maxWatchers < r.cfg.API.MaxWatchers {
		r.log.Info("api.max-watchers lowered to half of the API connections", zap.Int("api.max-watchers", maxWatchers),
			zap.Int("api.http.max-connections", r.server.MaxConnections()))
	}
	r.server.SetHandler(api.NewHandler(svc, api.Options{Token: r.cfg.API.Auth.Token, Metrics: r.metrics.Handler(), Logger: r.log,
		MaxWatchers: maxWatchers, MaxWatchersPerClient: min(r.cfg.API.MaxWatchersPerClient, maxWatchers),
		Health: runtimeHealth{r}, Rules: r.rules, Notifications: r.notifications(), Console: console.Handler(api.ConsolePath, r.cfg.API.Auth.Token != ""),
		ConduitV1: r.pipes.ConduitV1(), AllowedOrigins: r.cfg.API.HTTP.CORS.AllowedOrigins}))
}

// warnLowFileLimit logs when the open file limit leaves too few
// descriptors for the store, the pipelines and the API connections: what
// runs out first then fails (often the store, opening a table).
func (r *Runtime) warnLowFileLimit() {
	apiConns := 0
	if r.server != nil {
		apiConns = r.server.MaxConnections()
	}
	b, err := fdlimit.Check(r.pipes.Count(), apiConns)
	if err != nil || !b.Low() {
		return
	}
	r.log.Warn(fmt.Sprintf("the open file limit is low: %d, and %d pipelines with up to %d API connections want %d (%d + %d per pipeline + the API connections); raise it with `ulimit -n %d` before starting conduit (LimitNOFILE= in a systemd unit), or lower api.http.max-connections",
		b.Limit, b.Pipelines, b.APIConnections, b.Needed, fdlimit.BaseReserve, fdlimit.PerPipeline, max(b.Needed, 4096)),
		zap.Uint64("limit", b.Limit), zap.Uint64("needed", b.Needed))
}

// APIAddress is the address the API listens on, "" when it is disabled.
func (r *Runtime) APIAddress() string {
	if r.server == nil {
		return ""
	}
	return r.server.Addr()
}

func openStore(ctx context.Context, cfg config.Config, log *zap.Logger) (store.Store, error) {
	switch cfg.DB.Type {
	case config.DBTypeInMemory:
		log.Warn("db.type is inmemory: positions and pipeline state are lost when the process exits")
		return store.NewInMemory(), nil
	case config.DBTypeBadger:
		db, err := store.OpenBadger(ctx, cfg.DB.Badger.Path, log)
		if err != nil {
			return nil, err
		}
		log.Info("store opened", zap.String("db.type", cfg.DB.Type), zap.String("db.badger.path", cfg.DB.Badger.Path))
		return db, nil
	case config.DBTypePostgres:
		db, err := store.OpenPostgres(ctx, cfg.DB.Postgres.URL, log,
			clusterStoreOptions(cfg))
		if err != nil {
			return nil, err
		}
		log.Info("store opened", zap.String("db.type", cfg.DB.Type))
		return db, nil
	default:
		return nil, fmt.Errorf("db.type: unknown type %q", cfg.DB.Type)
	}
}

// clusterStoreOptions: a standalone conduit owns its database; the
// instances of a cluster share it, tell each other of the events they
// write, and must not keep rows locked while paused.
func clusterStoreOptions(cfg config.Config) store.PostgresOptions {
	if !cfg.Cluster.Enabled {
		return store.PostgresOptions{Exclusive: true}
	}
	return store.PostgresOptions{Shared: true, NotifyEvents: true, IdleInTransactionTimeout: instance.IdleInTransactionTimeout(cfg.Cluster.LeaseTTL)}
}

// breakerChanged logs and notifies a breaker opening or closing.
func (r *Runtime) breakerChanged(c lifecycle.BreakerChange) {
	r.notifier.Breaker(c)
	if c.Open {
		r.log.Warn("dependency breaker open: pipelines failing on it wait while the canary retries it",
			zap.String("dependency", c.Dependency), zap.String("canary", c.Canary), zap.Strings("failed", c.Failed))
		return
	}
	r.log.Info("dependency breaker closed: the pipelines it held restart, spread out",
		zap.String("dependency", c.Dependency), zap.String("canary", c.Canary), zap.Strings("released", c.Released))
}

// Pipelines returns the ids of the valid pipelines, in load order.
func (r *Runtime) Pipelines() []string { return r.pipes.IDs() }

// Reload asks for the pipeline files to be read again and what changed
// applied (SIGHUP). It does not wait; requests made while one is pending
// are one.
func (r *Runtime) Reload() { r.pipes.Reload() }

// ErrPipelineDegraded is returned by Run when a pipeline became degraded
// and pipelines.exit-on-degraded is on.
var ErrPipelineDegraded = supervision.ErrPipelineDegraded

// AuditLog returns the runtime's audit log.
func (r *Runtime) AuditLog() *auditlog.Log { return r.audit }

// Run supervises every pipeline until ctx is done, then shuts down: each
// supervisor stops its pipeline gracefully (sources stop reading, in-flight
// records drain and are acknowledged, positions are saved) and records it
// as stopped for the shutdown, with the status it had, so the next start
// takes up where this one left off. If that takes longer than pipelines.graceful-stop-timeout, or
// force is closed (a second Ctrl-C), the runs are cancelled. The store is
// closed last. Run returns nil after a clean shutdown, and an error wrapping
// ErrPipelineDegraded when a pipeline became degraded with
// pipelines.exit-on-degraded on.
func (r *Runtime) Run(ctx context.Context, force <-chan struct{}) error {
	defer func() { _ = r.close() }()
	// In start order; they stop in the reverse one. The API serves until
	// everything else stopped; the scheduler outlives the supervisors (a
	// restart launched while one shuts down is stopped by that
	// supervisor, so none is left behind); ownership is kept current
	// until the last pipeline stopped (in a cluster a shutdown drains
	// them, which may take longer than a lease lasts).
	if r.server != nil {
		r.services.Add("API server", service.Func(r.runAPI))
	}
	r.services.Add("restart scheduler", service.Func(func(ctx context.Context) error {
		stop := r.restarts.Start()
		<-ctx.Done()
		stop()
		return nil
	}))
	r.services.Add("ownership", service.Func(r.serveOwnership))
	r.services.Add("pipelines", service.Func(func(ctx context.Context) error { return r.pipes.Serve(ctx, force) }))
	return r.services.Run(ctx)
}

// stopping is told when the process begins to stop, and why (nil: a
// signal); it says so, and the process is not ready any more.
func (r *Runtime) stopping(cause error) {
	r.ready.Store(false)
	var degraded supervision.DegradedError
	var api apiFailure
	switch {
	case cause == nil:
		r.log.Info("stopping pipelines gracefully (send the signal again to force)",
			zap.Duration("timeout", r.cfg.Pipelines.GracefulStopTimeout))
	case errors.As(cause, &degraded):
		r.log.Error("exiting because a pipeline is degraded (pipelines.exit-on-degraded)", zap.String("pipeline_id", degraded.PipelineID))
	case errors.Is(cause, store.ErrDisowned):
		r.log.Error("stopping: nothing this process writes lands any more", zap.Error(cause))
	case errors.As(cause, &api):
		r.log.Error("the API server failed; stopping", zap.Error(api.err))
	default:
		r.log.Error("stopping", zap.Error(cause))
	}
}

// apiFailure is the API server's failure to serve.
type apiFailure struct{ err error }

func (e apiFailure) Error() string { return e.err.Error() }

func (e apiFailure) Unwrap() error { return e.err }

// runAPI serves the API until the process stops, then ends the audit
// log's watch streams (which would keep the server's shutdown waiting)
// and shuts the server down; the API answers while pipelines drain.
func (r *Runtime) runAPI(ctx context.Context) error {
	r.log.Info("API listening", zap.String("address", r.server.Addr()),
		zap.String("console", consoleURL(r.server.Addr())), zap.Bool("auth", r.cfg.API.Auth.Token != ""))
	logGRPCAddress(r.log, r.server)
	served := make(chan error, 1)
	go func() { served <- r.server.Serve() }()
	select {
	case err := <-served:
		return apiFailure{err}
	case <-ctx.Done():
	}
	_ = r.audit.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.server.Shutdown(shutdownCtx)
	<-served
	return nil
}

// serveOwnership keeps this process's ownership of its pipelines current
// once the supervisors run, until the process stopped them. Pipelines are
// taken up and handed over only until the process begins to stop; it is
// ready once it took up its pipelines.
func (r *Runtime) serveOwnership(ctx context.Context) error {
	select {
	case <-r.pipes.Supervising():
	case <-ctx.Done():
		return nil
	}
	stopping := r.services.Stopping()
	r.ownership.Run(ctx, stopping, func() { r.ready.Store(stopping.Err() == nil) }, r.services.Fail)
	return nil
}

// close releases what New opened, in reverse order, whether New finished
// or not; it is the one shutdown path. The supervisors have stopped, so
// nothing saves or appends any more; what they handed over is written now.
// Closing the audit log first ends watch streams, which would otherwise
// keep the server's shutdown waiting.
func (r *Runtime) close() error {
	if r.audit != nil {
		_ = r.audit.Close()
	}
	if r.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = r.server.Shutdown(ctx)
		cancel()
	}
	if r.writer != nil {
		if r.marked {
			r.markStopped()
		}
		r.writer.Close()
	}
	// After the last write of the pipelines' states: the instance that
	// takes one over next reads what this one left.
	r.ownership.Leave()
	if r.db == nil {
		return nil
	}
	err := r.db.Close()
	if err != nil {
		r.log.Error("closing the store", zap.Error(err))
	}
	return err
}

// Close releases everything when Run was never called.
func (r *Runtime) Close() error {
	return r.close()
}

// processMarker is the value of store.KeyProcess: who runs on the store.
// Only its presence is read (a crash leaves it behind); the rest is for
// the operator who looks into the store, and Version tells its format
// (processMarkerVersion; golden file in testdata/).
type processMarker struct {
	Version   int       `json:"version"`
	PID       int       `json:"pid"`
	Host      string    `json:"host,omitempty"`
	StartedAt time.Time `json:"startedAt"`
}

// processMarkerVersion is the format of the process marker this build
// writes. Version 0 (no version key) had the same fields.
const processMarkerVersion = 1

// markRunning records that a process runs on db and reports whether the
// last one left its record behind, i.e. did not shut down cleanly.
func markRunning(ctx context.Context, db store.Store, w *store.Batcher) (crashed bool, err error) {
	_, err = db.Get(ctx, []byte(store.KeyProcess))
	switch {
	case err == nil:
		crashed = true
	case !errors.Is(err, store.ErrNotFound):
		return false, fmt.Errorf("reading the process marker: %w", err)
	}
	host, _ := os.Hostname()
	b, err := json.Marshal(processMarker{Version: processMarkerVersion, PID: os.Getpid(), Host: host, StartedAt: time.Now().UTC()})
	if err != nil {
		return false, err
	}
	if err := w.Apply(ctx, store.Op{Key: []byte(store.KeyProcess), Value: b}); err != nil {
		return false, fmt.Errorf("writing the process marker: %w", err)
	}
	return crashed, nil
}

// markStopped removes the process marker after everything else: the
// writer commits in order, so the marker goes once everything handed over
// before is durable, and the next process then knows this one stopped
// cleanly.
func (r *Runtime) markStopped() {
	if err := r.writer.Apply(context.Background(), store.Op{Key: []byte(store.KeyProcess), Delete: true}); err != nil {
		r.log.Error("could not record the clean shutdown; the next start will report a crash", zap.Error(err))
	}
}

// ValidateFiles checks pipeline files as `conduit run` reads them, against
// the connectors and processors cfg provides (built in, connectors.path and
// processors.path);
// it opens no store and starts nothing. It returns the ids of the valid
// pipelines and every problem.
func ValidateFiles(cfg config.Config, files []config.FileContent) ([]string, []api.ConfigError) {
	opts, err := Options{}.withDefaults(context.Background(), cfg, zap.NewNop())
	if err != nil {
		return nil, []api.ConfigError{{Err: err}}
	}
	// Building a processor does no I/O, so the avro ones are checked
	// against a registry of their own that nothing is registered in.
	opts.Processors = defaultProcessors(schemaregistry.NewBuiltin(store.NewInMemory()), opts.standaloneProcessors, opts.javascript)
	return supervision.Validate(cfg, opts.Connectors, opts.Processors, files)
}
