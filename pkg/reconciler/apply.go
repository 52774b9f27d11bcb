package reconciler

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/config"
)

// Target is what a plan is applied to: the process's pipelines. Apply calls
// it once per change that applies here, in the plan's order.
type Target interface {
	// AppliesHere reports whether this process carries c out. In a
	// cluster a pipeline another instance runs is updated, deleted or
	// taken up there; alone, every change applies.
	AppliesHere(c Change) bool
	// Create provisions and starts d's pipeline; an error makes the entry
	// invalid.
	Create(ctx context.Context, d Desired, actor auditlog.Actor) error
	// Update drains c's running pipeline and starts it with the desired
	// configuration; an error makes the entry invalid.
	Update(ctx context.Context, c Change, actor auditlog.Actor) error
	// Delete stops the pipeline id and forgets it.
	Delete(ctx context.Context, id string, actor auditlog.Actor)
	// Keep records where an unchanged pipeline is defined now (a file
	// renamed, an entry moved).
	Keep(id string, origin Origin)
}

// InvalidEntry is an entry of a plan that does not run as desired: a
// configuration that does not parse or build, a second definition of an
// id, a pipeline whose creation or update failed.
type InvalidEntry struct {
	// Pipeline names the entry: its id (when known), file and line.
	Pipeline config.Pipeline
	Err      error
	// Kept says that a pipeline of that id keeps running as it was until
	// the entry is fixed.
	Kept bool
}

// ErrNotApplied is returned by Apply when ctx ended before every change
// was carried out; the changes before were.
var ErrNotApplied = errors.New("plan not applied completely")

// Apply carries plan out on t, one change after the other (Make orders
// deletes first, then updates and creates), and returns the entries that
// are not valid, each said once; an invalid entry leaves a running pipeline
// of its id as it is. asked is who asked for the plan, for the audit log
// (see ActorFor). log tells about each invalid entry and about the
// warnings of the pipelines taken up.
func Apply(ctx context.Context, plan Plan, t Target, asked auditlog.Actor, log *zap.Logger) ([]InvalidEntry, error) {
	var invalid []InvalidEntry
	invalidate := func(p config.Pipeline, err error, kept bool) {
		msg := "invalid pipeline configuration; it will not run"
		if kept {
			msg = "invalid pipeline configuration; the pipeline keeps running as it was until it is fixed"
		}
		log.Error(msg, zap.String("pipeline_id", p.ID), zap.Error(err))
		invalid = append(invalid, InvalidEntry{Pipeline: p, Err: err, Kept: kept})
	}
	for _, c := range plan.Changes {
		if err := ctx.Err(); err != nil {
			return invalid, errors.Join(ErrNotApplied, err)
		}
		if c.Desired != nil && (c.Action == Create || c.Action == Update) {
			// Said when the pipeline is taken up with them, not at every
			// reload that leaves it as it is.
			for _, w := range c.Desired.Pipeline.Warnings {
				log.Warn("pipeline file: "+w.Message, zap.String("pipeline_id", c.ID), zap.String("at", w.Source))
			}
		}
		actor := ActorFor(c, asked)
		switch c.Action {
		case Delete:
			if !t.AppliesHere(c) {
				continue // handed over to the instances that still know it
			}
			t.Delete(ctx, c.ID, actor)
		case Update:
			if !t.AppliesHere(c) {
				break // run elsewhere, which updates it
			}
			if err := t.Update(ctx, c, actor); err != nil {
				invalidate(c.Desired.Pipeline, err, false)
			}
		case Create:
			if !t.AppliesHere(c) {
				continue // the instance it belongs to takes it up
			}
			if err := t.Create(ctx, *c.Desired, actor); err != nil {
				invalidate(c.Desired.Pipeline, err, false)
			}
		case Invalid:
			for _, p := range c.Problems {
				invalidate(config.Pipeline{ID: c.ID, File: p.File, Line: p.Line}, p.Err, c.Kept)
			}
		case Unchanged:
			if c.Desired != nil {
				t.Keep(c.ID, c.Desired.Origin)
			}
		}
		// A second definition of an id beside the valid one that runs. (A
		// pipeline kept because its file could not be read has that
		// file's problem, which is listed once, below.)
		if c.Desired != nil && !c.Kept {
			for _, p := range c.Problems {
				invalidate(config.Pipeline{ID: c.ID, File: p.File, Line: p.Line}, p.Err, false)
			}
		}
	}
	for _, p := range plan.Problems {
		var held *DeletionHeldError
		if errors.As(p.Err, &held) {
			log.Error("pipelines not deleted: the pipeline files define none any more", zap.String("path", held.Path),
				zap.Strings("kept_running", held.IDs), zap.Error(p.Err))
			invalid = append(invalid, InvalidEntry{Pipeline: config.Pipeline{File: p.File}, Err: p.Err, Kept: true})
			continue
		}
		invalidate(config.Pipeline{File: p.File, Line: p.Line}, p.Err, false)
	}
	return invalid, nil
}

// ActorFor is who a change is by: whoever asked, for the pipelines of
// their source; a change to a file's pipeline that a reconciliation asked
// for through the API finds is the files', by config.
func ActorFor(c Change, asked auditlog.Actor) auditlog.Actor {
	switch {
	case c.Desired != nil && !c.Desired.Origin.API():
		return auditlog.ActorConfig
	case c.Desired == nil && c.Before != nil && !c.Before.Origin.API():
		return auditlog.ActorConfig
	}
	return asked
}
