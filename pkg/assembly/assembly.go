// Package assembly builds a run of a pipeline from its configuration: the
// connectors and processors its file names, its dead-letter queue, the
// position store its sources resume from and the dedup store its
// destinations consult - everything pkg/pipeline's engine is given, and
// nothing it does.
//
// It is the one place where a pipeline file's entries become running parts:
// pkg/supervision builds every run through it, and so does the
// benchmark (cmd/conduit-bench), so that what is measured is what runs.
// It holds no state between builds and does no I/O: connector and processor
// constructors only parse and check their settings (connector.Plugin), so a
// build is also how a configuration is validated, and a build that is
// never run is simply dropped.
package assembly

import (
	"errors"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/dedup"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/store"
)

// Options are what an Assembler builds with.
type Options struct {
	// Connectors and Processors resolve the plugins a pipeline names.
	Connectors *connector.Registry
	Processors *processor.Registry
	// Positions is where sources resume from; nil leaves
	// pipeline.Config.Positions unset (validation only).
	Positions pipeline.Positions
	// Dedup, when set, makes restarts skip what destinations already
	// wrote (pipeline.Config.Dedup); nil is dedup off.
	Dedup *dedup.Store
	// DB and Writer keep each connector's durable state
	// (connector.Config.State); without them connectors get none, which
	// they must treat as "nothing known" (validation, benchmarks).
	DB     store.Store
	Writer *store.Batcher
	// Protected are conduit's own files, which no file destination may
	// write to (see ProtectedPaths).
	Protected []connector.ProtectedPath
	// Logger is the base logger; connectors and processors get one with
	// pipeline_id and their own id. Nil logs nothing.
	Logger *zap.Logger
}

// Assembler turns pipeline configurations into engine configurations. It
// is safe for concurrent use.
type Assembler struct {
	opts Options
}

// New returns an Assembler building with opts.
func New(opts Options) *Assembler {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Assembler{opts: opts}
}

// Build builds one run of p: fresh connectors, processors and dead-letter
// queue, with the position and dedup stores. It does no I/O (nothing is
// opened before the engine runs), so it is also how p is validated; the
// first error is returned, pointing at the file's line (see Problems for
// all of them). The caller adds the run's hooks (OnAck, OnOpen, ...).
func (a *Assembler) Build(p config.Pipeline) (pipeline.Config, error) {
	cfg := pipeline.Config{PipelineID: p.ID, Positions: a.opts.Positions, Logger: a.opts.Logger}
	if a.opts.Dedup != nil {
		cfg.Dedup = dedupStore{a.opts.Dedup}
	}
	for i, c := range p.Connectors {
		procs, err := a.processors(p, c.ID, c.Processors)
		if err != nil {
			return cfg, err
		}
		switch c.Type {
		case config.TypeSource:
			src, err := a.opts.Connectors.NewSource(c.Plugin, a.ConnectorConfig(p, c.ID, c.Settings))
			if err != nil {
				return cfg, connectorError(p, i, err)
			}
			// A source's own processors run on its records only, before
			// the pipeline's.
			cfg.Sources = append(cfg.Sources, pipeline.Source{ID: c.ID, Connector: src, Processors: procs})
		case config.TypeDestination:
			dst, err := a.opts.Connectors.NewDestination(c.Plugin, a.ConnectorConfig(p, c.ID, c.Settings))
			if err != nil {
				return cfg, connectorError(p, i, err)
			}
			cfg.Destinations = append(cfg.Destinations, pipeline.Destination{ID: c.ID, Connector: dst, Processors: procs})
		}
	}
	procs, err := a.processors(p, "", p.Processors)
	if err != nil {
		return cfg, err
	}
	cfg.Processors = procs

	dlq, err := a.opts.Connectors.NewDestination(p.DLQ.Plugin, a.ConnectorConfig(p, pipeline.DLQID, p.DLQ.Settings))
	if err != nil {
		var se *connector.SettingError
		if errors.As(err, &se) {
			return cfg, p.FieldError("dead-letter-queue.settings."+se.Setting, se.Err)
		}
		return cfg, p.FieldError("dead-letter-queue.plugin", err)
	}
	cfg.DLQ = pipeline.DeadLetterQueue{Connector: dlq, WindowSize: p.DLQ.WindowSize, WindowNackThreshold: p.DLQ.WindowNackThreshold}
	return cfg, nil
}

// Problems is every reason Build would refuse p, each connector, processor
// and the dead-letter queue checked on its own, so that one problem does
// not hide the next and a file is fixed in one pass; nil when Build
// succeeds. It builds each part once and keeps nothing.
func (a *Assembler) Problems(p config.Pipeline) []error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for i, c := range p.Connectors {
		for _, pr := range c.Processors {
			_, err := a.processors(p, "", []config.Processor{pr})
			add(err)
		}
		var err error
		switch c.Type {
		case config.TypeSource:
			_, err = a.opts.Connectors.NewSource(c.Plugin, a.ConnectorConfig(p, c.ID, c.Settings))
		case config.TypeDestination:
			_, err = a.opts.Connectors.NewDestination(c.Plugin, a.ConnectorConfig(p, c.ID, c.Settings))
		}
		if err != nil {
			add(connectorError(p, i, err))
		}
	}
	for _, pr := range p.Processors {
		_, err := a.processors(p, "", []config.Processor{pr})
		add(err)
	}
	if _, err := a.opts.Connectors.NewDestination(p.DLQ.Plugin, a.ConnectorConfig(p, pipeline.DLQID, p.DLQ.Settings)); err != nil {
		var se *connector.SettingError
		if errors.As(err, &se) {
			add(p.FieldError("dead-letter-queue.settings."+se.Setting, se.Err))
		} else {
			add(p.FieldError("dead-letter-queue.plugin", err))
		}
	}
	return errs
}

// processors builds the processors of list, the connector connectorID's
// or, when it is empty, the pipeline's.
func (a *Assembler) processors(p config.Pipeline, connectorID string, list []config.Processor) ([]pipeline.Processor, error) {
	out := make([]pipeline.Processor, 0, len(list))
	for _, pr := range list {
		proc, err := a.opts.Processors.New(pr.Plugin, processor.Config{
			PipelineID:  p.ID,
			ProcessorID: pr.ID,
			Settings:    pr.Settings,
			Condition:   pr.Condition,
			Logger:      a.opts.Logger.With(zap.String("pipeline_id", p.ID), zap.String("processor_id", pr.ID)),
		})
		if err != nil {
			var se *processor.SettingError
			var ce *processor.ConditionError
			switch {
			case errors.As(err, &se):
				return nil, p.ProcessorError(pr, "settings."+se.Setting, se.Err)
			case errors.As(err, &ce):
				return nil, p.ProcessorError(pr, "condition", err)
			default:
				return nil, p.ProcessorError(pr, "plugin", err)
			}
		}
		out = append(out, pipeline.Processor{ID: pr.ID, Processor: proc, Connector: connectorID})
	}
	return out, nil
}

// connectorError locates a connector constructor's error in the file: a
// bad setting at the setting, anything else at the plugin.
func connectorError(p config.Pipeline, i int, err error) error {
	var se *connector.SettingError
	if errors.As(err, &se) {
		return p.SettingError(i, se.Setting, se.Err)
	}
	return p.ConnectorError(i, "plugin", err)
}

// ConnectorConfig is what the connector id of p is built from: its
// settings, a logger naming it, its durable state and conduit's protected
// files. The runtime also builds a deleted pipeline's connectors with it,
// so that they can clean up after themselves.
func (a *Assembler) ConnectorConfig(p config.Pipeline, id string, settings map[string]string) connector.Config {
	cfg := connector.Config{
		PipelineID:  p.ID,
		ConnectorID: id,
		Settings:    settings,
		Logger:      a.opts.Logger.With(zap.String("pipeline_id", p.ID), zap.String("connector_id", id)),
		Protected:   a.opts.Protected,
	}
	if a.opts.DB != nil && a.opts.Writer != nil {
		cfg.State = newConnectorState(a.opts.DB, a.opts.Writer, p.ID, id)
	}
	return cfg
}

// ProtectedPaths are the files of conduit's own that no file destination
// may write to: its store, its configuration, the pipeline files, the
// connector executables and the processor modules, each resolved through
// symbolic links once, here.
func ProtectedPaths(cfg config.Config) []connector.ProtectedPath {
	var ps []connector.ProtectedPath
	if cfg.DB.Type == config.DBTypeBadger && cfg.DB.Badger.Path != "" {
		ps = append(ps, connector.NewProtectedPath(cfg.DB.Badger.Path, "the store's directory (db.badger.path)"))
	}
	if cfg.ConfigPath != "" {
		ps = append(ps, connector.NewProtectedPath(cfg.ConfigPath, "the configuration file"))
	}
	if cfg.Pipelines.Path != "" {
		ps = append(ps, connector.NewProtectedPath(cfg.Pipelines.Path, "the pipeline files (pipelines.path)"))
	}
	if cfg.Connectors.Path != "" {
		ps = append(ps, connector.NewProtectedPath(cfg.Connectors.Path, "the connector executables (connectors.path)"))
	}
	if cfg.Processors.Path != "" {
		ps = append(ps, connector.NewProtectedPath(cfg.Processors.Path, "the processor modules (processors.path)"))
	}
	return ps
}
