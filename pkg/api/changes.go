package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/conduitry/conduit/lifecycle"
	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// ActorAPI is the actor of the audit events of changes made through the
// API.
const ActorAPI lifecycle.Actor = "api"

// Changes changes the set of pipelines: the runtime's reconciler.
type Changes interface {
	// Apply plans, and unless dryRun carries out, the pipelines of files
	// as pipelines created through the API.
	Apply(ctx context.Context, files []config.FileContent, dryRun, prune bool) (reconciler.Plan, error)
	// Validate checks files; nothing changes.
	Validate(files []config.FileContent) (ids []string, problems []ConfigError)
	// Delete deletes a pipeline created through the API; a pipeline of a
	// file is a *DefinedInFileError, an unknown one ErrPipelineNotFound.
	Delete(ctx context.Context, id string) error
}

// ErrPipelineNotFound is returned for an id no pipeline has.
var ErrPipelineNotFound = errors.New("pipeline not found")

// DefinedInFileError refuses a change through the API to a pipeline that a
// file under pipelines.path defines.
type DefinedInFileError struct {
	ID   string
	File string // file:line
}

func (e *DefinedInFileError) Error() string {
	return fmt.Sprintf("pipeline %q is defined in %s: change or remove it there", e.ID, e.File)
}

// maxApplyFiles bounds the files of one ApplyPipelines or
// ValidatePipelines call; each is bounded by the size of a pipeline file.
const maxApplyFiles = 100

// WithChanges lets the service change the set of pipelines; without it
// ApplyPipelines, ValidatePipelines and DeletePipeline are unimplemented.
func (s *PipelineService) WithChanges(c Changes) *PipelineService {
	s.changes = c
	return s
}

func (s *PipelineService) changesOrUnimplemented() (Changes, error) {
	if s.changes == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server cannot change its pipelines"))
	}
	return s.changes, nil
}

// fileMessage is a file a request carries: a pipeline file or a rules
// file.
type fileMessage interface {
	GetName() string
	GetContent() string
}

// filesOf turns a request's files into config's; kind names them in
// errors ("pipeline", "rules").
func filesOf[F fileMessage](in []F, kind string) ([]config.FileContent, error) {
	if len(in) == 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("files: at least one %s file is required", kind))
	}
	if len(in) > maxApplyFiles {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("files: %d files, at most %d in one call", len(in), maxApplyFiles))
	}
	out := make([]config.FileContent, len(in))
	for i, f := range in {
		name := f.GetName()
		if name == "" {
			name = fmt.Sprintf("files[%d]", i)
		}
		out[i] = config.FileContent{Name: name, Data: []byte(f.GetContent())}
	}
	return out, nil
}

// ApplyPipelines implements the RPC.
func (s *PipelineService) ApplyPipelines(ctx context.Context, req *connect.Request[conduitv1.ApplyPipelinesRequest]) (*connect.Response[conduitv1.ApplyPipelinesResponse], error) {
	c, err := s.changesOrUnimplemented()
	if err != nil {
		return nil, err
	}
	files, err := filesOf(req.Msg.GetFiles(), "pipeline")
	if err != nil {
		return nil, err
	}
	plan, err := c.Apply(ctx, files, req.Msg.GetDryRun(), req.Msg.GetPrune())
	if err != nil {
		return nil, internalError(ctx, err)
	}
	return connect.NewResponse(&conduitv1.ApplyPipelinesResponse{Changes: planToProto(plan), Applied: !req.Msg.GetDryRun()}), nil
}

// ValidatePipelines implements the RPC.
func (s *PipelineService) ValidatePipelines(_ context.Context, req *connect.Request[conduitv1.ValidatePipelinesRequest]) (*connect.Response[conduitv1.ValidatePipelinesResponse], error) {
	c, err := s.changesOrUnimplemented()
	if err != nil {
		return nil, err
	}
	files, err := filesOf(req.Msg.GetFiles(), "pipeline")
	if err != nil {
		return nil, err
	}
	ids, problems := c.Validate(files)
	out := &conduitv1.ValidatePipelinesResponse{PipelineIds: ids}
	for _, p := range problems {
		out.Errors = append(out.Errors, configErrorToProto(p))
	}
	return connect.NewResponse(out), nil
}

// DeletePipeline implements the RPC.
func (s *PipelineService) DeletePipeline(ctx context.Context, req *connect.Request[conduitv1.DeletePipelineRequest]) (*connect.Response[conduitv1.DeletePipelineResponse], error) {
	c, err := s.changesOrUnimplemented()
	if err != nil {
		return nil, err
	}
	id := req.Msg.GetId()
	if id == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("id: a pipeline id is required"))
	}
	var inFile *DefinedInFileError
	switch err := c.Delete(ctx, id); {
	case err == nil:
		return connect.NewResponse(&conduitv1.DeletePipelineResponse{}), nil
	case errors.As(err, &inFile):
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, ErrPipelineNotFound):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("pipeline %q not found", id))
	default:
		return nil, internalError(ctx, err)
	}
}

var planActionToProto = map[reconciler.Action]conduitv1.PlanAction{
	reconciler.Create:    conduitv1.PlanAction_PLAN_ACTION_CREATE,
	reconciler.Update:    conduitv1.PlanAction_PLAN_ACTION_UPDATE,
	reconciler.Delete:    conduitv1.PlanAction_PLAN_ACTION_DELETE,
	reconciler.Unchanged: conduitv1.PlanAction_PLAN_ACTION_UNCHANGED,
	reconciler.Invalid:   conduitv1.PlanAction_PLAN_ACTION_INVALID,
}

func planToProto(plan reconciler.Plan) []*conduitv1.PlannedChange {
	out := make([]*conduitv1.PlannedChange, 0, len(plan.Changes)+len(plan.Problems))
	for _, c := range plan.Changes {
		pc := &conduitv1.PlannedChange{PipelineId: c.ID, Action: planActionToProto[c.Action], ChangedFields: c.Fields, Kept: c.Kept}
		if c.Desired != nil && (c.Action == reconciler.Create || c.Action == reconciler.Update) {
			for _, w := range c.Desired.Pipeline.Warnings {
				pc.Warnings = append(pc.Warnings, w.String())
			}
		}
		for _, p := range c.Problems {
			pc.Errors = append(pc.Errors, configErrorToProto(ConfigError{PipelineID: c.ID, File: p.File, Line: p.Line, Err: p.Err}))
		}
		out = append(out, pc)
	}
	for _, p := range plan.Problems {
		out = append(out, &conduitv1.PlannedChange{Action: conduitv1.PlanAction_PLAN_ACTION_INVALID,
			Errors: []*conduitv1.ConfigError{configErrorToProto(ConfigError{File: p.File, Line: p.Line, Err: p.Err})}})
	}
	return out
}

func configErrorToProto(ce ConfigError) *conduitv1.ConfigError {
	return &conduitv1.ConfigError{PipelineId: ce.PipelineID, ConfigFile: fileLine(ce.File, ce.Line), Message: ce.Err.Error()}
}

// Dependencies are the dependency breakers.
type Dependencies interface {
	States() []lifecycle.BreakerState
}

// WithDependencies lets the service list the dependency breakers; without
// it the list is empty.
func (s *PipelineService) WithDependencies(d Dependencies) *PipelineService {
	s.dependencies = d
	return s
}

// ListDependencies implements the RPC.
func (s *PipelineService) ListDependencies(context.Context, *connect.Request[conduitv1.ListDependenciesRequest]) (*connect.Response[conduitv1.ListDependenciesResponse], error) {
	out := &conduitv1.ListDependenciesResponse{}
	if s.dependencies == nil {
		return connect.NewResponse(out), nil
	}
	for _, st := range s.dependencies.States() {
		out.Dependencies = append(out.Dependencies, &conduitv1.Dependency{Name: st.Dependency, Open: st.Open,
			OpenedAt: timeToProto(st.OpenedAt), Canary: st.Canary, Held: st.Held, RecentFailures: st.RecentFailures})
	}
	return connect.NewResponse(out), nil
}

// RecoverySummary are the process's recovery figures.
type RecoverySummary struct {
	PendingRestarts                     int
	EarliestNextAttempt, LatestAttempt  time.Time
	HeldByBreakers                      int
	EpisodesRecovered, EpisodesDegraded int64
	RestartsByRule                      map[string]int64
	Since                               time.Time
}

// Summaries give the recovery figures.
type Summaries interface {
	RecoverySummary() RecoverySummary
}

// WithSummaries lets the service answer GetRecoverySummary.
func (s *PipelineService) WithSummaries(sm Summaries) *PipelineService {
	s.summaries = sm
	return s
}

// GetRecoverySummary implements the RPC.
func (s *PipelineService) GetRecoverySummary(context.Context, *connect.Request[conduitv1.GetRecoverySummaryRequest]) (*connect.Response[conduitv1.GetRecoverySummaryResponse], error) {
	if s.summaries == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server keeps no recovery figures"))
	}
	sm := s.summaries.RecoverySummary()
	out := &conduitv1.GetRecoverySummaryResponse{PendingRestarts: int32(sm.PendingRestarts),
		EarliestNextAttempt: timeToProto(sm.EarliestNextAttempt), LatestNextAttempt: timeToProto(sm.LatestAttempt),
		HeldByBreakers: int32(sm.HeldByBreakers), EpisodesRecovered: sm.EpisodesRecovered, EpisodesDegraded: sm.EpisodesDegraded,
		RestartsByRule: sm.RestartsByRule, Since: timeToProto(sm.Since)}
	if ended := sm.EpisodesRecovered + sm.EpisodesDegraded; ended > 0 {
		rate := float64(sm.EpisodesRecovered) / float64(ended)
		out.RecoverySuccessRate = &rate
	}
	return connect.NewResponse(out), nil
}
