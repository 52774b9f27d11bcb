// Package conduit wires a process together: it opens the store, builds the
// connector registry, loads and validates the pipeline files, runs the
// pipelines and shuts everything down in order. It owns no policy of its own;
// cmd/conduit calls it, and the supervisor decides what happens to a pipeline
// that fails.
package conduit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/store"
)

// Runtime is one conduit process: its store, its registry and its pipelines.
type Runtime struct {
	cfg       config.Config
	log       *zap.Logger
	db        store.Store
	registry  *connector.Registry
	positions *pipeline.PositionStore
	pipelines []config.Pipeline
}

// Options are the parts of a Runtime that tests replace.
type Options struct {
	// Registry defaults to the built-in connectors.
	Registry *connector.Registry
}

// New opens the store and loads the pipeline files. Invalid pipelines are
// logged (each error names the file, the pipeline and the field) and left
// out; the valid ones run. Only a failure that stops everything, such as a
// store that cannot be opened, is returned.
func New(ctx context.Context, cfg config.Config, log *zap.Logger, opts Options) (*Runtime, error) {
	if opts.Registry == nil {
		opts.Registry = connector.NewRegistry(connector.Builtin()...)
	}
	db, err := openStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	r := &Runtime{
		cfg:       cfg,
		log:       log,
		db:        db,
		registry:  opts.Registry,
		positions: pipeline.NewPositionStore(db, nil),
	}
	loaded, errs := config.LoadPipelines(cfg.Pipelines.Path)
	for _, err := range errs {
		log.Error("invalid pipeline configuration; it will not run", zap.Error(err))
	}
	for _, p := range loaded {
		if err := r.validate(p); err != nil {
			log.Error("invalid pipeline configuration; it will not run",
				zap.String("pipeline_id", p.ID), zap.Error(err))
			continue
		}
		r.pipelines = append(r.pipelines, p)
	}
	log.Info("pipelines loaded",
		zap.String("path", cfg.Pipelines.Path),
		zap.Int("valid", len(r.pipelines)),
		zap.Int("invalid", len(loaded)-len(r.pipelines)+len(errs)))
	return r, nil
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
	default:
		return nil, fmt.Errorf("db.type: unknown type %q", cfg.DB.Type)
	}
}

// Pipelines returns the valid pipelines, in load order.
func (r *Runtime) Pipelines() []config.Pipeline { return r.pipelines }

// Store returns the runtime's store.
func (r *Runtime) Store() store.Store { return r.db }

// validate builds every connector of p once, which checks the plugins and
// their settings without doing any I/O, and points errors at the file line.
func (r *Runtime) validate(p config.Pipeline) error {
	if _, err := p.ResolveErrorRecovery(r.cfg.Pipelines.ErrorRecovery); err != nil {
		return err
	}
	for i, c := range p.Connectors {
		var err error
		switch c.Type {
		case config.TypeSource:
			_, err = r.registry.NewSource(c.Plugin, r.connectorConfig(p, c))
		case config.TypeDestination:
			_, err = r.registry.NewDestination(c.Plugin, r.connectorConfig(p, c))
		}
		if err != nil {
			return connectorError(p, i, err)
		}
	}
	// Processors arrive with the supervisor issue; until then a pipeline
	// that asks for one must not run without it.
	processors := p.Processors
	for _, c := range p.Connectors {
		processors = append(processors, c.Processors...)
	}
	if len(processors) > 0 {
		pr := processors[0]
		return p.ProcessorError(pr, "plugin", fmt.Errorf("unknown processor plugin %q: processors are not supported yet", pr.Plugin))
	}
	return nil
}

func connectorError(p config.Pipeline, i int, err error) error {
	var se *connector.SettingError
	if errors.As(err, &se) {
		return p.SettingError(i, se.Setting, se.Err)
	}
	return p.ConnectorError(i, "plugin", err)
}

func (r *Runtime) connectorConfig(p config.Pipeline, c config.Connector) connector.Config {
	return connector.Config{
		PipelineID:  p.ID,
		ConnectorID: c.ID,
		Settings:    c.Settings,
		Logger:      r.log.With(zap.String("pipeline_id", p.ID), zap.String("connector_id", c.ID)),
	}
}

// newEngine builds one run of p with fresh connectors.
func (r *Runtime) newEngine(p config.Pipeline) (*pipeline.Engine, error) {
	cfg := pipeline.Config{PipelineID: p.ID, Positions: r.positions, Logger: r.log}
	for i, c := range p.Connectors {
		switch c.Type {
		case config.TypeSource:
			src, err := r.registry.NewSource(c.Plugin, r.connectorConfig(p, c))
			if err != nil {
				return nil, connectorError(p, i, err)
			}
			cfg.Source = pipeline.Source{ID: c.ID, Connector: src}
		case config.TypeDestination:
			dst, err := r.registry.NewDestination(c.Plugin, r.connectorConfig(p, c))
			if err != nil {
				return nil, connectorError(p, i, err)
			}
			cfg.Destinations = append(cfg.Destinations, pipeline.Destination{ID: c.ID, Connector: dst})
		}
	}
	return pipeline.New(cfg)
}

// Run starts every pipeline whose file says `status: running` and blocks
// until ctx is done. Then it stops them gracefully: sources stop reading,
// in-flight records drain and are acknowledged, positions are persisted. If
// that takes longer than pipelines.graceful-stop-timeout, or force is closed
// (a second Ctrl-C), the pipelines are force-stopped. The store is closed
// last. Run returns nil after a clean shutdown.
func (r *Runtime) Run(ctx context.Context, force <-chan struct{}) error {
	defer r.closeStore()
	// runCtx is cancelled only to force-stop; a graceful stop goes through
	// Engine.Stop so that in-flight records drain.
	runCtx, forceStop := context.WithCancel(context.WithoutCancel(ctx))
	defer forceStop()

	var wg sync.WaitGroup
	var engines []*pipeline.Engine
	for _, p := range r.pipelines {
		log := r.log.With(zap.String("pipeline_id", p.ID))
		if p.Status != config.StatusRunning {
			log.Info("pipeline is stopped (status in its file); not starting it")
			continue
		}
		e, err := r.newEngine(p)
		if err != nil {
			log.Error("pipeline cannot start", zap.Error(err))
			continue
		}
		engines = append(engines, e)
		wg.Go(func() {
			start := time.Now()
			err := e.Run(runCtx)
			switch {
			case err == nil:
				log.Info("pipeline stopped", zap.Duration("ran", time.Since(start)),
					zap.Int64("records_acked", e.Stats().RecordsAcked.Load()))
			case errors.Is(err, pipeline.ErrForceStopped):
				log.Warn("pipeline force-stopped; in-flight records will be read again on the next start",
					zap.Int64("records_acked", e.Stats().RecordsAcked.Load()))
			default:
				log.Error("pipeline failed", zap.Error(err),
					zap.Int64("records_acked", e.Stats().RecordsAcked.Load()))
			}
		})
	}

	<-ctx.Done()
	r.log.Info("stopping pipelines gracefully (send the signal again to force)",
		zap.Duration("timeout", r.cfg.Pipelines.GracefulStopTimeout))
	for _, e := range engines {
		e.Stop()
	}
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
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
	forceStop()
	<-stopped
	return nil
}

func (r *Runtime) closeStore() {
	if err := r.db.Close(); err != nil {
		r.log.Error("closing the store", zap.Error(err))
	}
}

// Close releases the store when Run was never called.
func (r *Runtime) Close() error { return r.db.Close() }
