package connector

import (
	"context"
	"strings"

	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/plugin"
	"github.com/conduitry/conduit/pkg/record"
)

// chaosDestination is the destination side of builtin:chaos: it discards
// records, or appends them like builtin:file when path is set, and fails on
// open or write as its fail.* settings say.
type chaosDestination struct {
	chaosInjector
	file Destination // nil: discard
	log  *zap.Logger
}

// newDestination builds a chaos destination. With path set, the settings
// other than fail.* are builtin:file's; without it, only sdk.* is accepted.
func (st *chaosState) newDestination(cfg Config) (Destination, error) {
	policy, rest, err := parseChaosSettings(cfg.Settings, roleDestination)
	if err != nil {
		return nil, err
	}
	d := &chaosDestination{
		chaosInjector: chaosInjector{
			st:     st,
			key:    chaosKey{pipelineID: cfg.PipelineID, connectorID: cfg.ConnectorID, role: roleDestination},
			policy: policy,
		},
		log: loggerOf(cfg),
	}
	if strings.TrimSpace(rest["path"]) != "" {
		fileCfg := cfg
		fileCfg.Settings = rest
		if d.file, err = NewFileDestination(fileCfg); err != nil {
			return nil, chaosWrapSettingError(err)
		}
		return d, nil
	}
	s := plugin.NewSettings(rest)
	s.Raw("path")
	if _, ok := s.Raw("sync"); ok {
		s.Failf("sync", "only applies with path (without path the chaos destination discards records)")
	}
	sdkSettings(s, roleDestination)
	if err := s.Done(); err != nil {
		return nil, chaosWrapSettingError(err)
	}
	return d, nil
}

// Open fails when fail.on is open and a failure is due; otherwise it opens
// the file (if any), and a successful open counts toward fail.after and
// fail.every.
func (d *chaosDestination) Open(ctx context.Context) error {
	d.log.Info("chaos destination: "+d.policy.describe(), zap.String("fail_on", d.policy.on))
	if !d.active(chaosOpen) {
		return d.open(ctx)
	}
	_, fail, now := d.plan(1)
	if fail {
		return d.commit(chaosOpen, 0, true, now)
	}
	if err := d.open(ctx); err != nil {
		return err
	}
	return d.commit(chaosOpen, 1, false, now)
}

func (d *chaosDestination) open(ctx context.Context) error {
	if d.file == nil {
		return nil
	}
	return d.file.Open(ctx)
}

// Write writes (or discards) the batch. With fail.on write, the records up
// to the failure point are written and the call fails at the next one; with
// fail.partial, half of the records from the failure point on are written
// too, and n says how many were.
func (d *chaosDestination) Write(ctx context.Context, batch []record.Record) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if !d.active(chaosWrite) {
		return d.write(ctx, batch)
	}
	pass, fail, now := d.plan(int64(len(batch)))
	if fail && d.policy.partial {
		pass += (int64(len(batch)) - pass) / 2
	}
	n, err := d.write(ctx, batch[:pass])
	if err != nil {
		_ = d.commit(chaosWrite, int64(n), false, now)
		return n, err
	}
	err = d.commit(chaosWrite, int64(n), fail, now)
	if err != nil && d.policy.record && n < len(batch) {
		err = cerrors.ForRecord(batch[n].Position, err)
	}
	return n, err
}

func (d *chaosDestination) write(ctx context.Context, batch []record.Record) (int, error) {
	if d.file == nil {
		return len(batch), nil
	}
	return d.file.Write(ctx, batch)
}

// Teardown closes the file, if any.
func (d *chaosDestination) Teardown(ctx context.Context) error {
	if d.file == nil {
		return nil
	}
	return d.file.Teardown(ctx)
}
