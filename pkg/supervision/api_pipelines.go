package supervision

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/assembly"
	"github.com/conduitry/conduit/pkg/catalog"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/ownership"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/store"
)

// apiFileName names an applied file in errors: "api:" and the client's
// name, so that nobody looks for it under pipelines.path.
func apiFileName(name string) string { return "api:" + name }

// loadAPIPipelines reads the stored pipelines and the files they came from.
func (ps *Pipelines) loadAPIPipelines(ctx context.Context) ([]catalog.Pipeline, map[string][]byte, error) {
	return catalog.LoadPipelines(ctx, ps.db)
}

// apiDesired parses the stored pipelines' files, each once, into desired
// pipelines and problems.
func apiDesired(stored []catalog.Pipeline, files map[string][]byte) ([]reconciler.Desired, []reconciler.Problem) {
	type parsedFile struct {
		loaded []config.Pipeline
		errs   []error
	}
	parsed := map[string]parsedFile{}
	var (
		desired  []reconciler.Desired
		problems []reconciler.Problem
	)
	for _, sp := range stored {
		name := apiFileName(sp.Name)
		pf, ok := parsed[sp.FileHash]
		if !ok && files[sp.FileHash] != nil {
			pf.loaded, pf.errs = config.ParsePipelines(config.FileContent{Name: name, Data: files[sp.FileHash]})
			parsed[sp.FileHash] = pf
		}
		i := slices.IndexFunc(pf.loaded, func(p config.Pipeline) bool { return p.ID == sp.ID })
		if i >= 0 {
			p := pf.loaded[i]
			p.File = name // the name it was applied with, if another applied the same text
			desired = append(desired, reconciler.Desired{Pipeline: p})
			continue
		}
		err := fmt.Errorf("pipeline %s created through the API (%s) can no longer be read", sp.ID, name)
		for _, e := range pf.errs {
			var pe *config.PipelineError
			if errors.As(e, &pe) && (pe.PipelineID == sp.ID || pe.PipelineID == "") {
				err = e
				break
			}
		}
		problems = append(problems, reconciler.Problem{PipelineID: sp.ID, File: name, Err: err})
	}
	return desired, problems
}

// desiredState is every pipeline that should run: those of the files and
// those created through the API.
func (ps *Pipelines) desiredState(ctx context.Context) (files, apiPipelines []reconciler.Desired, problems []reconciler.Problem, err error) {
	loaded, errs := config.LoadPipelines(ps.cfg.Pipelines.Path)
	files, problems = reconciler.FromFiles(loaded, errs)
	stored, contents, err := ps.loadAPIPipelines(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	apiPipelines, apiProblems := apiDesired(stored, contents)
	return files, apiPipelines, append(problems, apiProblems...), nil
}

// apiChanges is the pipelines as the API's Changes.
type apiChanges struct{ ps *Pipelines }

var _ api.Changes = apiChanges{}

// parseApplied parses applied files and refuses ids that a file under
// pipelines.path defines: a pipeline has one source.
func (ps *Pipelines) parseApplied(files []config.FileContent, fromFiles []reconciler.Desired, fileProblems []reconciler.Problem) ([]reconciler.Desired, []reconciler.Problem) {
	named := make([]config.FileContent, len(files))
	for i, f := range files {
		named[i] = config.FileContent{Name: apiFileName(f.Name), Data: f.Data}
	}
	loaded, errs := config.ParsePipelines(named...)
	_, problems := reconciler.FromFiles(nil, errs)
	inFile := map[string]string{}
	for _, d := range fromFiles {
		inFile[d.Pipeline.ID] = d.Origin.String()
	}
	// An entry of a file that is invalid now still claims its id: fixed,
	// it would take the id from the API's pipeline.
	for _, p := range fileProblems {
		if p.PipelineID != "" && !isAPIFile(p.File) {
			if _, ok := inFile[p.PipelineID]; !ok {
				inFile[p.PipelineID] = fmt.Sprintf("%s:%d (invalid there now)", p.File, p.Line)
			}
		}
	}
	var applied []reconciler.Desired
	for _, p := range loaded {
		if where, ok := inFile[p.ID]; ok {
			problems = append(problems, reconciler.Problem{PipelineID: p.ID, File: p.File, Line: p.Line,
				Err: &api.DefinedInFileError{ID: p.ID, File: where}})
			continue
		}
		applied = append(applied, reconciler.Desired{Pipeline: p})
	}
	return applied, problems
}

// Apply implements api.Changes.
func (a apiChanges) Apply(ctx context.Context, files []config.FileContent, dryRun, prune bool) (reconciler.Plan, error) {
	ps := a.ps
	ps.reconciling.Lock()
	defer ps.reconciling.Unlock()
	if !dryRun && ps.shuttingDown() {
		return reconciler.Plan{}, fmt.Errorf("not applied: %w", lifecycle.ErrSupervisorDone)
	}
	fromFiles, stored, problems, err := ps.desiredState(ctx)
	if err != nil {
		return reconciler.Plan{}, err
	}
	applied, appliedProblems := ps.parseApplied(files, fromFiles, problems)
	appliedIDs := map[string]bool{}
	for _, d := range applied {
		appliedIDs[d.Pipeline.ID] = true
	}
	for _, p := range appliedProblems {
		if p.PipelineID != "" {
			appliedIDs[p.PipelineID] = true
		}
	}
	// What was stored stays unless applied again, or pruned.
	desired := slices.Clone(fromFiles)
	for _, d := range stored {
		if !appliedIDs[d.Pipeline.ID] && !prune {
			desired = append(desired, d)
		}
	}
	desired = append(desired, applied...)
	// An applied pipeline that is invalid keeps the version that runs:
	// its stored version stays desired.
	plan, err := ps.plan(desired, append(problems, appliedProblems...))
	if err != nil {
		return plan, err
	}
	relevant := reconciler.Plan{Problems: appliedPlanProblems(plan.Problems, files)}
	for _, c := range plan.Changes {
		if !appliedIDs[c.ID] && (c.Action != reconciler.Delete || !c.Before.Origin.API()) {
			continue
		}
		// An applied entry that lost to another definition of its id (a
		// file's) is invalid as far as the caller is concerned.
		if c.Action != reconciler.Invalid && slices.ContainsFunc(c.Problems, func(p reconciler.Problem) bool { return isAPIFile(p.File) }) {
			c = reconciler.Change{Action: reconciler.Invalid, ID: c.ID, Before: c.Before, Kept: c.Before != nil, Problems: c.Problems}
		}
		relevant.Changes = append(relevant.Changes, c)
	}
	if dryRun {
		return relevant, nil
	}
	ops, err := ps.storeOps(ctx, plan, appliedIDs, files, "")
	if err != nil {
		return reconciler.Plan{}, err
	}
	if len(ops) > 0 {
		if err := ps.writer.Apply(ctx, ops...); err != nil {
			return reconciler.Plan{}, fmt.Errorf("storing the applied pipelines: %w", err)
		}
	}
	// Carried out to the end even if the caller gives up waiting: a plan
	// half applied would leave pipelines drained and not started again.
	if _, err := ps.applyPlan(context.WithoutCancel(ctx), plan, api.ActorAPI); err != nil {
		return reconciler.Plan{}, err
	}
	ps.ownership.Changed(ctx, ownership.PipelinesChanged)
	if err := ps.audit.Flush(ctx); err != nil {
		return reconciler.Plan{}, err
	}
	ps.log.Info("pipelines applied through the API",
		zap.Int("created", relevant.Count(reconciler.Create)), zap.Int("updated", relevant.Count(reconciler.Update)),
		zap.Int("deleted", relevant.Count(reconciler.Delete)), zap.Int("unchanged", relevant.Count(reconciler.Unchanged)),
		zap.Int("invalid", relevant.Count(reconciler.Invalid)+len(relevant.Problems)))
	return relevant, nil
}

// storeOps are the writes that make the store hold what plan applies:
// each applied pipeline with the file it came from, no pipeline that is
// deleted, and no file that no pipeline needs any more.
func (ps *Pipelines) storeOps(ctx context.Context, plan reconciler.Plan, appliedIDs map[string]bool, files []config.FileContent, removed string) ([]store.Op, error) {
	stored, _, err := ps.loadAPIPipelines(ctx)
	if err != nil {
		return nil, err
	}
	fileOf := map[string]string{} // pipeline id -> file hash, after the plan
	before := map[string]catalog.Pipeline{}
	for _, sp := range stored {
		fileOf[sp.ID] = sp.FileHash
		before[sp.ID] = sp
	}
	hashes := map[string]string{} // applied file name -> hash
	hashOf := func(name string, data []byte) string {
		h, ok := hashes[name]
		if !ok {
			h = catalog.FileHash(data)
			hashes[name] = h
		}
		return h
	}
	var ops []store.Op
	if removed != "" {
		delete(fileOf, removed)
		ops = append(ops, store.Op{Key: catalog.PipelineKey(removed), Delete: true})
	}
	written := map[string]bool{}
	for _, c := range plan.Changes {
		switch {
		case c.Action == reconciler.Delete && c.Before.Origin.API() && c.ID != removed:
			delete(fileOf, c.ID)
			ops = append(ops, store.Op{Key: catalog.PipelineKey(c.ID), Delete: true})
		case appliedIDs[c.ID] && c.Desired != nil && c.Desired.Origin.API() && c.Action != reconciler.Invalid:
			data, name := appliedSource(files, c.Desired.Pipeline.File)
			hash := hashOf(name, data)
			if !written[hash] {
				written[hash] = true
				ops = append(ops, store.Op{Key: catalog.FileKey(hash), Value: data})
			}
			fileOf[c.ID] = hash
			if old, ok := before[c.ID]; ok && c.Action == reconciler.Unchanged && old.FileHash == hash && old.Name == name {
				continue // applied again as it is
			}
			b, err := catalog.EncodePipeline(catalog.Pipeline{ID: c.ID, Name: name, FileHash: hash, AppliedAt: ps.clock.Now().UTC()})
			if err != nil {
				return nil, err
			}
			ops = append(ops, store.Op{Key: catalog.PipelineKey(c.ID), Value: b})
		}
	}
	needed := map[string]bool{}
	for _, h := range fileOf {
		needed[h] = true
	}
	for _, sp := range stored {
		if !needed[sp.FileHash] && !written[sp.FileHash] && sp.FileHash != "" {
			written[sp.FileHash] = true // delete once
			ops = append(ops, store.Op{Key: catalog.FileKey(sp.FileHash), Delete: true})
		}
	}
	return ops, nil
}

// appliedPlanProblems keeps the problems of the applied files.
func appliedPlanProblems(problems []reconciler.Problem, files []config.FileContent) []reconciler.Problem {
	var out []reconciler.Problem
	for _, p := range problems {
		for _, f := range files {
			if p.File == apiFileName(f.Name) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// appliedSource returns the text and the client's name of the applied
// file called file.
func appliedSource(files []config.FileContent, file string) (data []byte, name string) {
	for _, f := range files {
		if apiFileName(f.Name) == file {
			return f.Data, f.Name
		}
	}
	return nil, file
}

// Validate implements api.Changes.
func (a apiChanges) Validate(files []config.FileContent) ([]string, []api.ConfigError) {
	ps := a.ps
	loaded, errs := config.LoadPipelines(ps.cfg.Pipelines.Path)
	fromFiles, fileProblems := reconciler.FromFiles(loaded, errs)
	applied, problems := ps.parseApplied(files, fromFiles, fileProblems)
	return ps.validateAll(applied, problems)
}

// validateAll validates desired pipelines and returns the valid ids and
// every problem.
func (ps *Pipelines) validateAll(desired []reconciler.Desired, problems []reconciler.Problem) ([]string, []api.ConfigError) {
	var ids []string
	var out []api.ConfigError
	for _, p := range problems {
		out = append(out, api.ConfigError{PipelineID: p.PipelineID, File: p.File, Line: p.Line, Err: p.Err})
	}
	for _, d := range desired {
		if _, errs := ps.check(d.Pipeline); len(errs) > 0 {
			for _, err := range errs {
				out = append(out, configError(d.Pipeline, err))
			}
			continue
		}
		ids = append(ids, d.Pipeline.ID)
	}
	return ids, out
}

// Delete implements api.Changes.
func (a apiChanges) Delete(ctx context.Context, id string) error {
	ps := a.ps
	ps.reconciling.Lock()
	defer ps.reconciling.Unlock()
	if ps.shuttingDown() {
		return fmt.Errorf("not deleted: %w", lifecycle.ErrSupervisorDone)
	}
	fromFiles, stored, problems, err := ps.desiredState(ctx)
	if err != nil {
		return err
	}
	for _, d := range fromFiles {
		if d.Pipeline.ID == id {
			return &api.DefinedInFileError{ID: id, File: d.Origin.String()}
		}
	}
	if m := ps.get(id); m != nil && !m.origin.Load().API() {
		return &api.DefinedInFileError{ID: id, File: m.origin.Load().String()}
	}
	keep := slices.DeleteFunc(slices.Clone(stored), func(d reconciler.Desired) bool { return d.Pipeline.ID == id })
	storedProblem := slices.ContainsFunc(problems, func(p reconciler.Problem) bool { return p.PipelineID == id && p.File != "" && isAPIFile(p.File) })
	if len(keep) == len(stored) && !storedProblem {
		return api.ErrPipelineNotFound
	}
	problems = slices.DeleteFunc(problems, func(p reconciler.Problem) bool { return p.PipelineID == id && isAPIFile(p.File) })
	plan, err := ps.plan(append(fromFiles, keep...), problems)
	if err != nil {
		return err
	}
	ops, err := ps.storeOps(ctx, plan, nil, nil, id)
	if err != nil {
		return err
	}
	if err := ps.writer.Apply(ctx, ops...); err != nil {
		return fmt.Errorf("deleting pipeline %s: %w", id, err)
	}
	if _, err := ps.applyPlan(context.WithoutCancel(ctx), plan, api.ActorAPI); err != nil {
		return err
	}
	ps.ownership.Changed(ctx, ownership.PipelinesChanged)
	return ps.audit.Flush(ctx)
}

func isAPIFile(file string) bool { return len(file) > 4 && file[:4] == "api:" }

// Validate checks pipeline files as `conduit run` reads them, against
// connectors and processors; it opens no store and starts nothing. It
// returns the ids of the valid pipelines and every problem.
func Validate(cfg config.Config, connectors *connector.Registry, processors *processor.Registry, files []config.FileContent) ([]string, []api.ConfigError) {
	ps := &Pipelines{cfg: cfg, log: zap.NewNop(), connectors: connectors, processors: processors,
		policies: lifecycle.NewPolicies(), assembler: assembly.New(assembly.Options{Connectors: connectors, Processors: processors,
			Protected: assembly.ProtectedPaths(cfg)})}
	loaded, errs := config.ParsePipelines(files...)
	desired, problems := reconciler.FromFiles(loaded, errs)
	return ps.validateAll(desired, problems)
}
