// Package conduit wires a process together: it opens the store, builds the
// connector and processor registries, loads and validates the pipeline
// files, gives every pipeline a supervisor and shuts everything down in
// order. It owns no policy of its own: the supervisor (lifecycle/) decides
// what happens to a pipeline, the engine (pkg/pipeline) moves its records.
//
// Which pipelines this process runs is decided in one place, the ownership
// interface (pkg/ownership): a process alone runs every pipeline it knows
// (ownership.Solo); an instance of a cluster runs those whose lease it
// holds, fences their writes and hands them over (pkg/cluster/instance,
// which runs pipelines in the runtime through clusterHost). The runtime
// calls it the same way in both modes.
package conduit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/dedup"
	cerrors "github.com/conduitry/conduit/errors"
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
)

// Runtime is one conduit process: its store, its registries and its
// supervised pipelines.
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
	positions  *pipeline.PositionStore
	// assembler builds the pipelines' runs from their configurations;
	// kept holds what validation built for the first runs (keptBuilds).
	assembler *assembly.Assembler
	kept      keptBuilds
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
	figures  *recoveryFigures
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

	// mu guards the set of pipelines, which the reconciler changes while
	// the API, the metrics and shutdown read it.
	mu        sync.RWMutex
	pipelines []*managedPipeline
	byID      map[string]*managedPipeline
	// invalid are the configurations that did not make a pipeline, for
	// the API.
	invalid []api.ConfigError
	// supCtx is the supervisors' context once Run started them (nil
	// before); supervisors is their group, which Run waits for.
	supCtx      context.Context
	supervisors sync.WaitGroup
	// reconciling serializes reconciliations; reload asks for one.
	reconciling sync.Mutex
	reload      chan struct{}
	// ready is true while Run supervises the pipelines (/readyz).
	ready atomic.Bool

	// services are the process's long-lived parts, started and stopped
	// by Run as one tree; anything that must end the process (a pipeline
	// degraded with pipelines.exit-on-degraded, the store's refusal of
	// this process's writes, a failed cluster membership) fails it.
	services *service.Tree
	// supervising is closed once Run started the supervisors.
	supervising chan struct{}
	observer    lifecycle.Observer
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
}

// defaultProcessors is the processor registry a runtime has unless a test
// gives it one: the built-in processors, the avro ones with reg, and the
// standalone ones.
func defaultProcessors(reg schemaregistry.Registry, standalone *processor.Standalone) *processor.Registry {
	return processor.NewRegistry(processor.BuiltinWith(processor.ConduitOptions{SchemaRegistry: reg})...).WithStandalone(standalone)
}

// A run takes runDescriptors from the descriptor budget until its
// connectors are open, and starts only while runDescriptorsKept would be
// left: the store's reserve and a margin for connectors that open more than
// one. One per run, not what the largest runs open: ten thousand restarts
// falling due at once hold the budget together until they are open, and
// the store keeps its own reserve whatever the runs open.
const (
	runDescriptors     = 1
	runDescriptorsKept = 2 * store.StoreDescriptorReserve
)

// ErrPipelineDegraded is returned by Run when a pipeline became degraded and
// pipelines.exit-on-degraded is on.
var ErrPipelineDegraded = errors.New("a pipeline is degraded and pipelines.exit-on-degraded is true")

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
		cfg:         cfg,
		log:         log,
		connectors:  opts.Connectors,
		processors:  opts.Processors,
		standalone:  opts.standaloneProcessors,
		clock:       opts.Clock,
		restarts:    lifecycle.NewRestartScheduler(opts.Clock),
		managed:     lifecycle.NewManagedRules(),
		observer:    opts.Observer,
		byID:        map[string]*managedPipeline{},
		reload:      make(chan struct{}, 1),
		figures:     newRecoveryFigures(),
		supervising: make(chan struct{}),
		fds:         fdlimit.NewGauge(250*time.Millisecond, opts.DescriptorsLeft),
	}
	r.services = service.New(r.stopping)
	// Alone until openState finds cluster.enabled on.
	r.ownership = ownership.Solo{Known: r.known}
	r.policies = lifecycle.NewPolicies().WithManaged(r.managed)
	if b := cfg.Pipelines.Breakers; b.Enabled {
		r.breakers = lifecycle.NewBreakers(lifecycle.BreakerConfig{Threshold: b.Threshold, Window: b.Window, Stagger: b.Stagger},
			opts.Clock, r.breakerChanged)
	}
	r.metrics = metrics.New(r.recordCounts)
	if r.breakers != nil {
		r.metrics.WatchBreakers(r.breakers.States, r.declaredDependencies)
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
	if err := r.provisionAll(ctx); err != nil {
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
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o, nil
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
			r.log.Warn("the store refuses writes for now; audit events and the pipeline states recorded with them wait in memory and are written once it takes writes again",
				zap.Int("writes", writes), zap.Error(err))
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
	r.writer = store.NewBatcherWith(db, store.BatcherOptions{OnError: writeFailed, FenceOf: r.writeGuards.FenceOf})
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
	r.rules = managedrules.New(managedrules.Options{Base: r.cfg.Pipelines.ErrorRecovery, DB: db, Writer: r.writer,
		Effective: r.managed, Audit: r.audit, Ownership: r.ownership, Pipelines: rulePipelines{r}, Clock: r.clock,
		Log: r.log})
	if err := r.rules.LoadStored(ctx); err != nil {
		return err
	}
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
		r.processors = defaultProcessors(reg, r.standalone)
	}
	opts := assembly.Options{Connectors: r.connectors, Processors: r.processors, Positions: r.positions,
		DB: db, Writer: r.writer, Protected: assembly.ProtectedPaths(r.cfg), Logger: r.log}
	if r.cfg.Dedup.Enabled {
		opts.Dedup = r.dedup
	}
	r.assembler = assembly.New(opts)
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

// provisionAll loads the pipeline files and provisions every valid
// pipeline; the invalid ones are logged and listed for the API.
func (r *Runtime) provisionAll(ctx context.Context) error {
	loaded, errs := config.LoadPipelines(r.cfg.Pipelines.Path)
	if err := r.degradedAtStartup(ctx, loaded); err != nil {
		r.log.Error("exiting because a pipeline is degraded (pipelines.exit-on-degraded)", zap.Error(err))
		return err
	}
	files, problems := reconciler.FromFiles(loaded, errs)
	stored, contents, err := r.loadAPIPipelines(ctx)
	if err != nil {
		return err
	}
	apiPipelines, apiProblems := apiDesired(stored, contents)
	desired, problems := reconciler.PreferLastRun(append(files, apiPipelines...), append(problems, apiProblems...), r.lastRunFingerprint(ctx))
	plan, err := r.plan(desired, problems)
	if err != nil {
		return err
	}
	if _, err := r.applyPlan(ctx, plan, lifecycle.ActorConfig); err != nil {
		return err
	}
	if err := r.audit.Flush(ctx); err != nil {
		return err
	}
	r.log.Info("pipelines loaded", zap.String("path", r.cfg.Pipelines.Path),
		zap.Int("valid", len(r.ownership.KnownPipelines())), zap.Int("invalid", len(r.invalid)))
	if !r.ownership.Alone() {
		// A pipeline missing from this instance's files may run on
		// another: deletions are seen while the instances run.
		return nil
	}
	for _, d := range apiPipelines {
		loaded = append(loaded, d.Pipeline)
	}
	for _, p := range apiProblems {
		errs = append(errs, &config.PipelineError{PipelineID: p.PipelineID, File: p.File, Err: p.Err})
	}
	r.forgetDeleted(ctx, loaded, errs)
	return nil
}

// serveAPI gives the listening server its handler.
func (r *Runtime) serveAPI() {
	if r.server == nil {
		return
	}
	pipelines, events := r.ownership.API(apiPipelines{r}, r.audit)
	svc := api.NewPipelineService(pipelines, events, nil).WithChanges(apiChanges{r}).WithSummaries(r)
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
		ConduitV1: runtimeConduitV1{r}}))
}

// warnLowFileLimit logs when the open file limit leaves too few
// descriptors for the store, the pipelines and the API connections: what
// runs out first then fails (often the store, opening a table).
func (r *Runtime) warnLowFileLimit() {
	apiConns := 0
	if r.server != nil {
		apiConns = r.server.MaxConnections()
	}
	b, err := fdlimit.Check(len(r.pipelines), apiConns)
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

func (r *Runtime) recordCounts(emit func(string, metrics.RecordCounts)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, m := range r.pipelines {
		emit(m.cfg.ID, m.counts())
	}
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

// policyOf resolves p's recovery policy and compiles it, and says when
// delays of it are below the floor.
func (r *Runtime) policyOf(p config.Pipeline) (config.ErrorRecovery, lifecycle.Policy, error) {
	recovery, err := p.ResolveErrorRecovery(r.cfg.Pipelines.ErrorRecovery)
	if err != nil {
		return config.ErrorRecovery{}, lifecycle.Policy{}, err
	}
	policy, err := r.policies.From(recovery)
	if err != nil {
		return config.ErrorRecovery{}, lifecycle.Policy{}, p.FieldError("error-recovery", err)
	}
	// Delays below the floor load and wait the floor; say so.
	if w := config.FloorWarning(p.ErrorRecovery.BelowFloor()); w != "" {
		r.log.Warn("pipeline error-recovery: "+w, zap.String("pipeline_id", p.ID), zap.String("file", p.File))
	}
	for _, rule := range p.ErrorRecovery.Rules {
		if w := config.FloorWarning(rule.Policy.BelowFloor()); w != "" {
			r.log.Warn(fmt.Sprintf("recovery rule %q: %s", rule.Name, w), zap.String("pipeline_id", p.ID), zap.String("file", fmt.Sprintf("%s:%d", rule.File, rule.Line)))
		}
	}
	return recovery, policy, nil
}

// provision validates p and creates its supervisor from the persisted
// state; Run, or the reconciler once Run started, starts it.
func (r *Runtime) provision(ctx context.Context, p config.Pipeline, origin reconciler.Origin, actor lifecycle.Actor) (*managedPipeline, error) {
	return r.provisionAfter(ctx, p, origin, actor, lifecycle.Takeover{}, false)
}

// afterShutdown is what becomes of a pipeline when this process shuts
// down (lifecycle.Config.AfterShutdown).
func (r *Runtime) afterShutdown() string {
	if r.cfg.Cluster.Enabled {
		return "an instance of the cluster takes it up: another live one at once, or the first to start"
	}
	return ""
}

// provisionAfter is provision of a pipeline an instance of a cluster
// takes over (lifecycle.Config.Takeover).
// takingUp: an instance of a cluster takes the pipeline up; a state it
// cannot read now fails the take-up (the lease is given back and taken
// up again later) rather than start from the file's status.
func (r *Runtime) provisionAfter(ctx context.Context, p config.Pipeline, origin reconciler.Origin, actor lifecycle.Actor, takeover lifecycle.Takeover, takingUp bool) (*managedPipeline, error) {
	recovery, policy, err := r.policyOf(p)
	if err != nil {
		return nil, err
	}
	if err := p.Notifications.CheckTargets(r.cfg.Notifications.Targets); err != nil {
		var fe *config.FieldError
		if errors.As(err, &fe) {
			return nil, p.FieldError(fe.Field, fe.Err)
		}
		return nil, err
	}
	for _, c := range policy.ManagedClashes() {
		r.log.Warn("a managed recovery rule does not apply to this pipeline, whose error-recovery clashes with it: "+c.String(),
			zap.String("pipeline_id", p.ID), zap.String("rule", c.Rule))
	}
	hash, err := reconciler.Fingerprint(p)
	if err != nil {
		return nil, err
	}
	first, err := r.build(p, hash)
	if err != nil {
		return nil, err
	}
	r.tidyOrphanedDedup(ctx, p)
	if !r.cfg.Dedup.Enabled {
		if n, err := r.dedup.Forget(ctx, p.ID); err != nil {
			return nil, fmt.Errorf("dedup is off: deleting the entries of earlier runs: %w", err)
		} else if n > 0 {
			r.log.Info("dedup is off: deleted the entries earlier runs left; records they covered may be written again",
				zap.String("pipeline_id", p.ID), zap.Int("entries", n))
		}
	}
	initial, from, err := r.initialState(ctx, p, hash, takingUp)
	if err != nil {
		return nil, fmt.Errorf("reading the pipeline's state: %w", err)
	}
	m := &managedPipeline{cfg: p, recovery: recovery, policy: policy, durable: r.durable, fingerprint: hash}
	m.first.Store(&first)
	m.origin.Store(&origin)
	m.sup, err = lifecycle.New(lifecycle.Config{
		PipelineID:     p.ID,
		Policy:         policy,
		PluginOf:       m.pluginOf,
		DependencyOf:   m.dependencyOf,
		Breakers:       r.breakers,
		NewRun:         func(hooks lifecycle.RunHooks) (lifecycle.Run, error) { return r.newRun(m, hooks) },
		States:         pipelineJournal{r: r, m: m},
		Clock:          r.clock,
		Restarts:       r.restarts,
		Logger:         r.log,
		Observer:       lifecycle.ObserverFunc(func(e auditlog.Event) { r.onEvent(m, e) }),
		ConfigHash:     hash,
		Persisted:      from.persisted,
		ProcessCrashed: r.crashed,
		Takeover:       takeover,
		AfterShutdown:  r.afterShutdown(),
	}, initial)
	if err != nil {
		return nil, err
	}
	// Registered only for a pipeline that is provisioned; its supervisor
	// reports to it once Run starts.
	// The status the supervisor starts in: a recovery that a restart of
	// conduit interrupted goes on, and so does the time it has taken.
	m.metrics = r.metrics.Pipeline(p.ID, initial.StartStatus(), statusSince(initial, r.clock.Now()))
	r.metrics.DeadLetterRules(p.ID, deadLetterRules(policy))
	m.status = initial.Status
	// Before its first event: the pipeline file's notifications block
	// narrows who hears of it.
	r.notifier.SetPipeline(p.ID, p.Notifications)
	if !from.persisted {
		m.status = r.record(p.ID, from, hash, origin, actor)
	}
	return m, nil
}

// tidyOrphanedDedup says when dedup entries belong to a destination the
// pipeline no longer has (renamed or removed): nothing will consume them,
// and they expire after dedup.ttl. Such a destination's mark, which never
// expires, is deleted.
func (r *Runtime) tidyOrphanedDedup(ctx context.Context, p config.Pipeline) {
	dests, err := r.dedup.Destinations(ctx, p.ID)
	if err != nil || len(dests) == 0 {
		return
	}
	have := map[string]bool{}
	for _, c := range p.Destinations() {
		have[c.ID] = true
	}
	var gone []string
	for _, d := range dests {
		if !have[d] {
			gone = append(gone, d)
		}
	}
	if len(gone) == 0 {
		return
	}
	if err := r.dedup.DropMarks(ctx, p.ID, gone...); err != nil {
		r.log.Warn("could not delete the dedup marks of destinations this pipeline no longer has",
			zap.String("pipeline_id", p.ID), zap.Strings("destinations", gone), zap.Error(err))
		return
	}
	if left, err := r.dedup.Destinations(ctx, p.ID); err == nil {
		for _, d := range left {
			if !have[d] {
				r.log.Warn("dedup entries of a destination this pipeline no longer has (renamed or removed) will expire unused",
					zap.String("pipeline_id", p.ID), zap.String("destination", d), zap.Duration("dedup.ttl", r.cfg.Dedup.TTL))
			}
		}
	}
}

// forgetDeleted finds pipelines that ran before but are in no pipeline file
// any more: it writes their deleted event and forgets their state (their
// positions stay, so putting the file back resumes where they were). It
// does nothing when a file could not be read at all, since the pipelines
// in it cannot be told from deleted ones.
func (r *Runtime) forgetDeleted(ctx context.Context, loaded []config.Pipeline, errs []error) {
	known := map[string]bool{}
	for _, p := range loaded {
		known[p.ID] = true
	}
	for _, err := range errs {
		var pe *config.PipelineError
		if !errors.As(err, &pe) || pe.PipelineID == "" {
			r.log.Warn("a pipeline file could not be read, so pipelines missing from the files are not treated as deleted")
			return
		}
		known[pe.PipelineID] = true
	}
	ids, err := r.states.IDs(ctx)
	if err != nil {
		r.log.Error("could not list pipeline states", zap.Error(err))
		return
	}
	for _, id := range ids {
		if known[id] {
			continue
		}
		before := ""
		if st, ok, err := r.states.Load(ctx, id); err == nil && ok {
			before = st.Status.String()
		}
		r.log.Info("pipeline is in no pipeline file any more: deleted", zap.String("pipeline_id", id))
		r.forget(ctx, id, before, lifecycle.ActorConfig, "pipeline removed from the pipeline files; its state is forgotten, its position kept")
	}
}

// configError describes an invalid configuration for the API: where it is
// and what is wrong, by pipeline when it names one (p, or the error's).
func configError(p config.Pipeline, err error) api.ConfigError {
	ce := api.ConfigError{PipelineID: p.ID, File: p.File, Line: p.Line, Err: err}
	var pe *config.PipelineError
	if errors.As(err, &pe) {
		ce.File, ce.Line = pe.File, pe.Line
		if pe.PipelineID != "" {
			ce.PipelineID = pe.PipelineID
		}
	}
	return ce
}

// origin is where a pipeline's initial state comes from.
type origin struct {
	// persisted: the state of an earlier process for the same
	// configuration, taken up again (no provisioning events).
	persisted bool
	// fresh: no state at all, a new pipeline.
	fresh bool
	// previous is the status persisted for an earlier configuration, the
	// status before the provisioned event ("" when unknown).
	previous lifecycle.Status
}

// record writes the events of provisioning to the audit log: created the
// first time a pipeline is seen, provisioned when its configuration is new
// or changed; a pipeline taken up unchanged gets neither. Both leave it
// stopped: the supervisor's first event starts it from there. It returns
// that status.
func (r *Runtime) record(id string, o origin, hash string, where reconciler.Origin, actor lifecycle.Actor) lifecycle.Status {
	var events []auditlog.Event
	previous := o.previous
	if o.fresh {
		message := "pipeline created from its configuration file"
		if where.API() {
			message = "pipeline created through the API"
		}
		events = append(events, auditlog.Event{PipelineID: id, Kind: auditlog.KindCreated, Actor: actor,
			StatusAfter: lifecycle.StatusStopped, Message: message})
		previous = lifecycle.StatusStopped
	}
	message := "pipeline configuration validated and built (" + hash + ")"
	if !o.fresh {
		message = "pipeline configuration changed: validated and built (" + hash + "); it starts afresh from its file's status"
	}
	events = append(events, auditlog.Event{PipelineID: id, Kind: auditlog.KindProvisioned, Actor: actor,
		StatusBefore: previous, StatusAfter: lifecycle.StatusStopped, Message: message})
	for _, e := range events {
		// Queued, not waited for one by one: New flushes once for every
		// pipeline, so that loading ten thousand costs a few syncs.
		if err := r.audit.Record(e); err != nil {
			r.log.Error("could not write to the audit log", zap.String("pipeline_id", id), zap.Error(err))
		}
		r.metrics.CountEvent(string(e.Kind))
	}
	return lifecycle.StatusStopped
}

// initialState decides where a pipeline starts: its persisted state when
// there is one for the same configuration (so a recovering pipeline waits
// for its persisted attempt time and a degraded one stays degraded),
// otherwise the status its file asks for. A changed configuration is
// provisioned afresh: whoever edited the file has acted on the pipeline.
// A read cut off by a shutdown is an error; so is, when strict (a take-up
// in a cluster, which is tried again), a state the store could not read
// now (unavailable): starting from the file's status would undo a stop, a
// degrade or a backoff that is only not readable right now.
func (r *Runtime) initialState(ctx context.Context, p config.Pipeline, hash string, strict bool) (lifecycle.State, origin, error) {
	fromFile := lifecycle.State{Status: lifecycle.StatusRunning}
	if p.Status == config.StatusStopped {
		fromFile.Status = lifecycle.StatusStopped
	}
	st, ok, err := r.states.Load(ctx, p.ID)
	switch {
	case err != nil && (ctx.Err() != nil || strict && !errors.Is(err, lifecycle.ErrStateUnreadable)):
		return lifecycle.State{}, origin{}, err
	case err != nil:
		// A damaged state must not keep a pipeline from running; the
		// file's status is the safe reading.
		r.log.Error("persisted pipeline state is unreadable; starting from the pipeline file's status",
			zap.String("pipeline_id", p.ID), zap.Error(err))
		return fromFile, origin{}, nil
	case !ok:
		fromFile.CreatedAt = r.clock.Now().UTC()
		return fromFile, origin{fresh: true}, nil
	case st.ConfigHash != hash:
		r.log.Info("pipeline configuration changed since the last run; starting from the file's status",
			zap.String("pipeline_id", p.ID), zap.Stringer("previous_status", st.Status), zap.String("status", p.Status))
		fromFile.LastError, fromFile.Episode, fromFile.CreatedAt = st.LastError, st.Episode, st.CreatedAt
		return fromFile, origin{previous: st.Status}, nil
	default:
		return st, origin{persisted: true}, nil
	}
}

// deadLetter answers the engine's question about a transient error that
// names its record: the first recovery rule that matches it decides, and
// only a dead-letter rule takes the record off the pipeline's hands.
func (m *managedPipeline) deadLetter(err error, kind pipeline.Kind, id string) (string, bool) {
	c := kind.Classify(err)
	rule := m.policy.Match(lifecycle.Fault{Pipeline: m.cfg.ID, Class: c.Class, Code: c.Code, Message: c.Message,
		Component: id, Plugin: m.pluginOf(id), NamesRecord: true})
	if rule == nil || rule.Action != config.ActionDeadLetter {
		return "", false
	}
	return rule.Name, true
}

// componentKind maps the kind an error info names to the engine's.
func componentKind(kind cerrors.ComponentKind) pipeline.Kind {
	switch kind {
	case cerrors.ComponentSource:
		return pipeline.KindSource
	case cerrors.ComponentDestination:
		return pipeline.KindDestination
	default:
		return pipeline.KindProcessor
	}
}

// pluginOf returns the plugin of the pipeline's connector or processor
// id, for recovery rules that match plugins. Looked up when a rule asks:
// a pipeline has a few components, and ten thousand pipelines need no map
// each.
func (m *managedPipeline) pluginOf(id string) string {
	for _, c := range m.cfg.Connectors {
		if c.ID == id {
			return c.Plugin
		}
		for _, pr := range c.Processors {
			if pr.ID == id {
				return pr.Plugin
			}
		}
	}
	for _, pr := range m.cfg.Processors {
		if pr.ID == id {
			return pr.Plugin
		}
	}
	return ""
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

// dependencyOf returns the dependency the connector id names, "" for none
// (processors name none: a processor's dependency is its error's to say).
func (m *managedPipeline) dependencyOf(id string) string {
	for _, c := range m.cfg.Connectors {
		if c.ID == id {
			return c.Dependency
		}
	}
	return ""
}

// newRun builds one run of p with fresh connectors and processors (the
// first run gets what provisioning built, see keptBuilds); a failure here
// is reported to the supervisor like a failed run.
func (r *Runtime) newRun(m *managedPipeline, hooks lifecycle.RunHooks) (lifecycle.Run, error) {
	release, left, ok := r.fds.Take(runDescriptors, runDescriptorsKept)
	if !ok {
		// Opening connectors now could take the descriptors the store
		// keeps for itself; waiting on backoff gives others time to close.
		return nil, cerrors.WithCode(fmt.Errorf("too few file descriptors left to open the pipeline's connectors: %d left, %d kept for the database and other pipelines; raise the open file limit (ulimit -n)",
			left, runDescriptorsKept), cerrors.CodeUnavailable)
	}
	var cfg pipeline.Config
	var err error
	if first := m.first.Swap(nil); first != nil {
		cfg = *first
	} else if cfg, err = r.assembler.Build(m.cfg); err != nil {
		release()
		return nil, err
	}
	cfg.OnOpen = func() {
		release()
		if hooks.OnOpen != nil {
			hooks.OnOpen()
		}
	}
	cfg.OnAck = hooks.OnAck
	m.taps.Tap(&cfg)
	if mayWrite := r.writeGuards.MayWrite; mayWrite != nil {
		id := m.cfg.ID
		cfg.WriteGuard = func() error { return mayWrite(id) }
	}
	cfg.DeadLetter = m.deadLetter
	cfg.OnDeadLettered = func(d pipeline.DeadLettered) { r.deadLettered(m, d) }
	if q := hooks.Quarantine; q != nil {
		cfg.Quarantine = map[string]pipeline.QuarantinedRecord{string(q.Position): {
			Kind: componentKind(q.Error.ComponentKind), ID: q.Error.Component,
			Err: fmt.Errorf("quarantined after %d runs in a row failed on this record: %s", q.Runs, q.Error.Message),
		}}
	}
	if cfg.Dedup != nil {
		cfg.OnDedupSkipped = func(destination string, skipped int64) { r.dedupSkipped(m, destination, skipped) }
		cfg.OnDedupUnverified = func(destination string) { r.dedupUnverified(m, destination) }
	}
	e, err := pipeline.New(cfg)
	if err != nil {
		release()
		return nil, err
	}
	return trackedRun{Engine: e, r: r, m: m, discard: release}, nil
}

// dedupSkipped writes the one dedup-skipped event of a destination's run.
// It changes no status; it carries the one the pipeline is in.
func (r *Runtime) dedupSkipped(m *managedPipeline, destination string, skipped int64) {
	pipelineID := m.cfg.ID
	r.log.Info("records already written by an earlier run were not written again",
		zap.String("pipeline_id", pipelineID), zap.String("destination", destination), zap.Int64("skipped", skipped))
	records, were := "records", "were"
	if skipped == 1 {
		records, were = "record", "was"
	}
	e := auditlog.Event{PipelineID: pipelineID, Kind: auditlog.KindDedupSkipped, Actor: lifecycle.ActorSystem,
		Component: destination, ComponentKind: "destination", Count: skipped,
		Message: fmt.Sprintf("%d %s destination %s already accepted in an earlier run %s acknowledged without being written again", skipped, records, destination, were)}
	m.recordEvent(r, &e, "")
	r.metrics.CountEvent(string(auditlog.KindDedupSkipped))
}

// dedupUnverified writes the event of a destination that could not read
// back what its last run wrote. It changes no status.
func (r *Runtime) dedupUnverified(m *managedPipeline, destination string) {
	const message = "destination %s could not say what it holds of the last run (its output was replaced or cut since): records that run wrote without seeing them acknowledged may be written again"
	r.log.Warn(fmt.Sprintf(message, destination), zap.String("pipeline_id", m.cfg.ID), zap.String("destination", destination))
	e := auditlog.Event{PipelineID: m.cfg.ID, Kind: auditlog.KindDedupUnverified, Actor: lifecycle.ActorSystem,
		Component: destination, ComponentKind: "destination", Message: fmt.Sprintf(message, destination)}
	m.recordEvent(r, &e, "")
	r.metrics.CountEvent(string(auditlog.KindDedupUnverified))
}

// pipelineJournal persists what a pipeline's supervisor hands over: the
// audit event of every transition together with the state it leads to, in
// one commit of the store's writer, so that what the log says happened is
// what a restart resumes from. It never waits for the disk: the writer
// makes them durable moments later, sharing syncs across pipelines. API
// requests that change a pipeline wait for it (managedPipeline.Start,
// Stop), and shutdown writes whatever was handed over.
type pipelineJournal struct {
	r *Runtime
	m *managedPipeline
}

func (j pipelineJournal) SaveLater(pipelineID string, st lifecycle.State) error {
	return j.r.states.SaveLater(pipelineID, st)
}

func (j pipelineJournal) RecordLater(pipelineID string, st *lifecycle.State, e *auditlog.Event) error {
	var extra []store.Op
	if st != nil {
		// st is the supervisor's copy for this event: nothing changes it.
		extra = append(extra, lifecycle.StateOp(pipelineID, *st))
	}
	ev := *e // the supervisor's: recordEvent may fill in what it left zero
	j.m.recordEvent(j.r, &ev, e.StatusAfter, extra...)
	return nil
}

// onEvent is called by every supervisor goroutine for every event, after
// the journal took it.
func (r *Runtime) onEvent(m *managedPipeline, e auditlog.Event) {
	r.metrics.PipelineEvent(m.metrics, e)
	r.figures.count(&e)
	if e.Kind == auditlog.KindDegraded && r.cfg.Pipelines.ExitOnDegraded && e.Reason != string(lifecycle.ReasonForceStop) {
		r.services.Fail(degradedError{e.PipelineID})
	}
	if r.observer != nil {
		r.observer.PipelineEvent(e)
	}
}

// durable returns once every state and audit event handed over so far is
// on disk.
func (r *Runtime) durable(ctx context.Context) error {
	return r.writer.Flush(ctx)
}

// Pipelines returns the ids of the valid pipelines, in load order.
func (r *Runtime) Pipelines() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]string, len(r.pipelines))
	for i, m := range r.pipelines {
		ids[i] = m.cfg.ID
	}
	return ids
}

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
	r.services.Add("pipelines", service.Func(func(ctx context.Context) error { return r.servePipelines(ctx, force) }))
	return r.services.Run(ctx)
}

// stopping is told when the process begins to stop, and why (nil: a
// signal); it says so, and the process is not ready any more.
func (r *Runtime) stopping(cause error) {
	r.ready.Store(false)
	var degraded degradedError
	var api apiFailure
	switch {
	case cause == nil:
		r.log.Info("stopping pipelines gracefully (send the signal again to force)",
			zap.Duration("timeout", r.cfg.Pipelines.GracefulStopTimeout))
	case errors.As(cause, &degraded):
		r.log.Error("exiting because a pipeline is degraded (pipelines.exit-on-degraded)", zap.String("pipeline_id", degraded.pipelineID))
	case errors.Is(cause, store.ErrDisowned):
		r.log.Error("stopping: nothing this process writes lands any more", zap.Error(cause))
	case errors.As(cause, &api):
		r.log.Error("the API server failed; stopping", zap.Error(api.err))
	default:
		r.log.Error("stopping", zap.Error(cause))
	}
}

// degradedError ends Run when a pipeline became degraded with
// pipelines.exit-on-degraded on.
type degradedError struct{ pipelineID string }

func (e degradedError) Error() string {
	return ErrPipelineDegraded.Error() + ": pipeline " + e.pipelineID
}

func (degradedError) Unwrap() error { return ErrPipelineDegraded }

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
	case <-r.supervising:
	case <-ctx.Done():
		return nil
	}
	stopping := r.services.Stopping()
	r.ownership.Run(ctx, stopping, func() { r.ready.Store(stopping.Err() == nil) }, r.services.Fail)
	return nil
}

// servePipelines runs a supervisor per pipeline, the reconciler, the
// notifier and the file watcher until ctx ends, then stops them: each
// supervisor stops its pipeline gracefully and records it as stopped for
// the shutdown; after pipelines.graceful-stop-timeout, or when force is
// closed, the runs are cancelled.
func (r *Runtime) servePipelines(ctx context.Context, force <-chan struct{}) error {
	r.mu.Lock()
	r.supCtx = ctx
	for _, m := range r.pipelines {
		r.supervisors.Go(func() { m.sup.Run(ctx) })
	}
	r.mu.Unlock()
	// The reconciler and the watcher are in the supervisors' group: a
	// pipeline they start while the process shuts down is waited for.
	r.supervisors.Go(func() { r.reconcileLoop(ctx) })
	r.supervisors.Go(func() { r.notifier.Run(ctx) })
	r.watchFiles(ctx)
	close(r.supervising)
	<-ctx.Done()
	stopped := make(chan struct{})
	go func() {
		r.supervisors.Wait()
		close(stopped)
	}()
	timeout := time.NewTimer(r.cfg.Pipelines.GracefulStopTimeout)
	defer timeout.Stop()
	select {
	case <-stopped:
		return nil
	case <-force:
		r.log.Warn("second signal: force-stopping pipelines")
	case <-timeout.C:
		r.log.Warn("graceful stop timed out: force-stopping pipelines")
	}
	r.mu.RLock()
	for _, m := range r.pipelines {
		m.sup.Kill()
	}
	r.mu.RUnlock()
	<-stopped
	return nil
}

// degradedAtStartup refuses to run, with exit-on-degraded on, while a
// pipeline is still degraded from an earlier run: a service manager that
// restarts conduit must not get a process that runs on with it degraded.
// It is decided before any pipeline is provisioned, so a refused start
// writes nothing. A force stop is an operator's act, not a failure, and
// does not count.
func (r *Runtime) degradedAtStartup(ctx context.Context, loaded []config.Pipeline) error {
	if !r.cfg.Pipelines.ExitOnDegraded {
		return nil
	}
	var ids []string
	for _, p := range loaded {
		st, ok, err := r.states.Load(ctx, p.ID)
		if err != nil || !ok || st.Status != lifecycle.StatusDegraded || st.DegradedReason == lifecycle.ReasonForceStop {
			continue
		}
		if hash, err := reconciler.Fingerprint(p); err == nil && hash == st.ConfigHash {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return fmt.Errorf("%w: pipeline %s was degraded when conduit started; fix the cause, then change its pipeline file (a changed configuration starts afresh) or run once with --pipelines.exit-on-degraded=false and `conduit pipelines start <id>`",
		ErrPipelineDegraded, strings.Join(ids, ", "))
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
