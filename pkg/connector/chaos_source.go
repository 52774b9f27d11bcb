package connector

import (
	"context"
	"strings"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/record"
)

// chaosSource is the source side of builtin:chaos: a generator source that
// fails on open, read or ack as its fail.* settings say.
type chaosSource struct {
	chaosInjector
	gen Source
	log *zap.Logger
}

// newSource builds a chaos source. The settings other than fail.* are
// builtin:generator's, with format.options.id: int when no payload field is
// given, so that a chaos source works without settings.
func (st *chaosState) newSource(cfg Config) (Source, error) {
	policy, rest, err := parseChaosSettings(cfg.Settings, roleSource)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(strings.TrimSpace(rest["format.type"]), formatFile) {
		rest = chaosWithDefault(rest, "format.options.", "format.options.id", "int")
	}
	genCfg := cfg
	genCfg.Settings = rest
	gen, err := NewGeneratorSource(genCfg)
	if err != nil {
		return nil, chaosWrapSettingError(err)
	}
	return &chaosSource{
		chaosInjector: chaosInjector{
			st:     st,
			key:    chaosKey{pipelineID: cfg.PipelineID, connectorID: cfg.ConnectorID, role: roleSource},
			policy: policy,
		},
		gen: gen,
		log: loggerOf(cfg),
	}, nil
}

// Open fails when fail.on is open and a failure is due; otherwise it opens
// the generator at pos, and a successful open counts toward fail.after and
// fail.every.
func (s *chaosSource) Open(ctx context.Context, pos record.Position) error {
	s.log.Info("chaos source: "+s.policy.describe(), zap.String("fail_on", s.policy.on))
	if !s.active(chaosOpen) {
		return s.gen.Open(ctx, pos)
	}
	_, fail, now := s.plan(1)
	if fail {
		return s.commit(chaosOpen, 0, true, now)
	}
	if err := s.gen.Open(ctx, pos); err != nil {
		return err
	}
	return s.commit(chaosOpen, 1, false, now)
}

// Read returns the generator's records. With fail.on read it returns no
// more records than the next failure point allows, so that exactly
// fail.after (or fail.every) records are produced before the call that
// fails.
func (s *chaosSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	if !s.active(chaosRead) {
		return s.gen.Read(ctx, batch)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	pass, fail, now := s.plan(int64(len(batch)))
	if fail && pass == 0 {
		return 0, s.commit(chaosRead, 0, true, now)
	}
	n, err := s.gen.Read(ctx, batch[:pass])
	// A shortened batch fails on the next call, not this one.
	_ = s.commit(chaosRead, int64(n), false, now)
	return n, err
}

// Ack fails as a whole when fail.on is ack and the call would take the
// acknowledged count past the next failure point.
func (s *chaosSource) Ack(ctx context.Context, positions []record.Position) error {
	if !s.active(chaosAck) {
		return s.gen.Ack(ctx, positions)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, fail, now := s.plan(int64(len(positions)))
	if fail {
		return s.commit(chaosAck, 0, true, now)
	}
	if err := s.gen.Ack(ctx, positions); err != nil {
		return err
	}
	return s.commit(chaosAck, int64(len(positions)), false, now)
}

// Teardown tears the generator down.
func (s *chaosSource) Teardown(ctx context.Context) error { return s.gen.Teardown(ctx) }
