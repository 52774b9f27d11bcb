// Package api serves the Connect API (PipelineService, gRPC health and
// reflection) and /metrics on one HTTP port: Connect, gRPC and gRPC-Web
// over HTTP/1.1 and cleartext HTTP/2, and plain HTTP/JSON for curl.
// Conduit's API v1 (its gRPC services, its /v1 HTTP routes, /openapi) is
// served beside it under the same rules, so Conduit's clients work (see
// apiv1.go).
//
// The handlers translate; they decide nothing. What a pipeline is and may
// do comes from the supervisor (lifecycle/), its story from the audit log
// (auditlog/), both reached through the small interfaces declared here.
package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/lifecycle"
	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/store"
)

// PipelineInfo is what the configuration says about a pipeline.
type PipelineInfo struct {
	ID, Name, Description string
	// File and Line locate its definition; File is empty for a pipeline
	// created through the API.
	File string
	Line int
	// Definition is the pipeline as a pipeline file of its own, with the
	// values of credentials masked.
	Definition string
	// Recovery is its resolved error-recovery policy.
	Recovery config.ErrorRecovery
	// Instance is the id of the conduit instance (cluster.instance-id)
	// that runs the pipeline; empty when conduit runs alone, or when no
	// instance holds the pipeline right now.
	Instance string
	// DeadLettered counts the records its dead-letter rules and quarantine
	// sent to the dead-letter queue since the process started;
	// LastDeadLettered is when the last one was, by LastDeadLetterRule.
	DeadLettered       int64
	LastDeadLettered   time.Time
	LastDeadLetterRule string
}

// Supervised is one pipeline under its supervisor.
type Supervised interface {
	Info() PipelineInfo
	State(ctx context.Context) (lifecycle.State, error)
	Start(ctx context.Context) error
	Stop(ctx context.Context, force bool) error
}

// Pipelines is the set of supervised pipelines.
type Pipelines interface {
	List() []Supervised
	Get(id string) (Supervised, bool)
	// Invalid lists the configurations that did not make a pipeline.
	Invalid() []ConfigError
}

// ConfigError is an invalid pipeline configuration.
type ConfigError struct {
	// PipelineID is empty when a whole file could not be read.
	PipelineID string
	File       string
	Line       int
	// Err names the file, the pipeline and the field.
	Err error
}

// Events is the audit log.
type Events interface {
	List(ctx context.Context, pipelineID string, q auditlog.Query) ([]auditlog.Event, error)
	Watch(ctx context.Context, pipelineID string, afterSequence uint64, kinds []auditlog.Kind) (*auditlog.Watcher, error)
	// WatchEvery follows the events of all pipelines from now on.
	WatchEvery(ctx context.Context, kinds []auditlog.Kind) (*auditlog.Watcher, error)
}

// Limits of ListPipelineEvents.
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 1000
)

// PipelineService implements conduitv1connect.PipelineServiceHandler.
type PipelineService struct {
	pipelines Pipelines
	events    Events
	changes   Changes // nil: the set of pipelines cannot be changed
	// dependencies are the breakers; nil: none.
	dependencies Dependencies
	summaries    Summaries
	now          func() time.Time
}

var _ conduitv1connect.PipelineServiceHandler = (*PipelineService)(nil)

// NewPipelineService returns the service. now may be nil (time.Now); it is
// only used for the duration of an ongoing recovery episode.
func NewPipelineService(p Pipelines, e Events, now func() time.Time) *PipelineService {
	if now == nil {
		now = time.Now
	}
	return &PipelineService{pipelines: p, events: e, now: now}
}

// ListPipelines implements the RPC.
func (s *PipelineService) ListPipelines(ctx context.Context, req *connect.Request[conduitv1.ListPipelinesRequest]) (*connect.Response[conduitv1.ListPipelinesResponse], error) {
	for i, st := range req.Msg.GetStatuses() {
		if _, ok := statusFromProto(st); !ok && st != conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("statuses[%d]: unknown status %v", i, st))
		}
	}
	wanted := func(st conduitv1.PipelineStatus) bool {
		return len(req.Msg.GetStatuses()) == 0 || slices.Contains(req.Msg.GetStatuses(), st)
	}
	invalid := s.pipelines.Invalid()
	out := &conduitv1.ListPipelinesResponse{}
	running := map[string]bool{}
	for _, p := range s.pipelines.List() {
		pb, err := s.describeOrErr(ctx, p, invalid)
		if errors.Is(err, lifecycle.ErrSupervisorDone) {
			// Retired since the listing (updated, deleted, or handed to
			// another instance of a cluster): described as it is now,
			// unless it is gone. A shutdown fails this one too.
			q, ok := s.pipelines.Get(p.Info().ID)
			if !ok {
				continue
			}
			pb, err = s.describeOrErr(ctx, q, invalid)
		}
		if err != nil {
			return nil, internalError(ctx, err)
		}
		running[pb.GetId()] = true
		if wanted(pb.GetStatus()) {
			out.Pipelines = append(out.Pipelines, pb)
		}
	}
	listed := map[string]bool{}
	for _, ce := range invalid {
		out.ConfigErrors = append(out.ConfigErrors, configErrorToProto(ce))
		id := ce.PipelineID
		if id == "" || running[id] || listed[id] || !wanted(conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID) {
			continue
		}
		listed[id] = true
		out.Pipelines = append(out.Pipelines, invalidToProto(id, invalid))
	}
	return connect.NewResponse(out), nil
}

// invalidToProto is an invalid pipeline that does not run.
func invalidToProto(id string, invalid []ConfigError) *conduitv1.Pipeline {
	pb := &conduitv1.Pipeline{Id: id, Name: id, Status: conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID,
		ConfigErrors: configErrorsOf(id, invalid)}
	if len(pb.ConfigErrors) > 0 {
		pb.ConfigFile = pb.ConfigErrors[0].GetConfigFile()
		pb.Origin = originOf(pb.ConfigFile)
	}
	return pb
}

// originOf tells a file's pipeline from one created through the API,
// whose errors name the client's file as "api:<name>".
func originOf(file string) string {
	if file == "" || strings.HasPrefix(file, "api:") {
		return "api"
	}
	return "file"
}

func configErrorsOf(id string, invalid []ConfigError) []*conduitv1.ConfigError {
	var out []*conduitv1.ConfigError
	for _, ce := range invalid {
		if ce.PipelineID == id {
			out = append(out, configErrorToProto(ce))
		}
	}
	return out
}

// GetPipeline implements the RPC. An invalid pipeline that does not run
// is returned with status invalid and its errors.
func (s *PipelineService) GetPipeline(ctx context.Context, req *connect.Request[conduitv1.GetPipelineRequest]) (*connect.Response[conduitv1.GetPipelineResponse], error) {
	id := req.Msg.GetId()
	p, err := s.find(id)
	if connect.CodeOf(err) == connect.CodeFailedPrecondition {
		return connect.NewResponse(&conduitv1.GetPipelineResponse{Pipeline: invalidToProto(id, s.pipelines.Invalid())}), nil
	}
	if err != nil {
		return nil, err
	}
	pb, err := s.describe(ctx, p, s.pipelines.Invalid())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&conduitv1.GetPipelineResponse{Pipeline: pb}), nil
}

// StartPipeline implements the RPC.
func (s *PipelineService) StartPipeline(ctx context.Context, req *connect.Request[conduitv1.StartPipelineRequest]) (*connect.Response[conduitv1.StartPipelineResponse], error) {
	p, err := s.find(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, transitionError(err)
	}
	pb, err := s.describe(ctx, p, s.pipelines.Invalid())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&conduitv1.StartPipelineResponse{Pipeline: pb}), nil
}

// StopPipeline implements the RPC.
func (s *PipelineService) StopPipeline(ctx context.Context, req *connect.Request[conduitv1.StopPipelineRequest]) (*connect.Response[conduitv1.StopPipelineResponse], error) {
	p, err := s.find(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	if err := p.Stop(ctx, req.Msg.GetForce()); err != nil {
		return nil, transitionError(err)
	}
	pb, err := s.describe(ctx, p, s.pipelines.Invalid())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&conduitv1.StopPipelineResponse{Pipeline: pb}), nil
}

// ListPipelineEvents implements the RPC.
func (s *PipelineService) ListPipelineEvents(ctx context.Context, req *connect.Request[conduitv1.ListPipelineEventsRequest]) (*connect.Response[conduitv1.ListPipelineEventsResponse], error) {
	m := req.Msg
	if err := s.hasEvents(ctx, m.GetPipelineId()); err != nil {
		return nil, err
	}
	limit := int(m.GetLimit())
	switch {
	case limit == 0:
		limit = DefaultEventLimit
	case limit < 0 || limit > MaxEventLimit:
		return nil, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("limit: %d is out of range (1-%d, or 0 for %d)", limit, MaxEventLimit, DefaultEventLimit))
	}
	kinds, err := kindsFromProto(m.GetKinds())
	if err != nil {
		return nil, err
	}
	events, err := s.events.List(ctx, m.GetPipelineId(), auditlog.Query{
		AfterSequence: m.GetAfterSequence(), Limit: limit, Kinds: kinds, NewestFirst: m.GetNewestFirst(),
	})
	if err != nil {
		return nil, internalError(ctx, err)
	}
	out := &conduitv1.ListPipelineEventsResponse{Events: make([]*conduitv1.PipelineEvent, len(events))}
	for i, e := range events {
		out.Events[i] = eventToProto(e)
	}
	return connect.NewResponse(out), nil
}

// WatchPipelineEvents implements the RPC. A watcher that falls too far
// behind ends with RESOURCE_EXHAUSTED; the client reconnects after the last
// sequence it received.
func (s *PipelineService) WatchPipelineEvents(ctx context.Context, req *connect.Request[conduitv1.WatchPipelineEventsRequest], stream *connect.ServerStream[conduitv1.WatchPipelineEventsResponse]) error {
	m := req.Msg
	kinds, err := kindsFromProto(m.GetKinds())
	if err != nil {
		return err
	}
	var w *auditlog.Watcher
	if m.GetPipelineId() == "" {
		// Every pipeline, live: sequences are per pipeline, so there is
		// nothing to resume after.
		if m.GetAfterSequence() != 0 {
			return connect.NewError(connect.CodeInvalidArgument,
				errors.New("after_sequence: sequences are per pipeline; give a pipeline_id to resume after one, or none to follow every pipeline from now on"))
		}
		w, err = s.events.WatchEvery(ctx, kinds)
	} else {
		if err := s.hasEvents(ctx, m.GetPipelineId()); err != nil {
			return err
		}
		w, err = s.events.Watch(ctx, m.GetPipelineId(), m.GetAfterSequence(), kinds)
	}
	if err != nil {
		return internalError(ctx, err)
	}
	for e := range w.C {
		if err := stream.Send(&conduitv1.WatchPipelineEventsResponse{Event: eventToProto(e)}); err != nil {
			return err
		}
	}
	switch err := w.Err(); {
	case errors.Is(err, auditlog.ErrWatcherTooSlow):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, auditlog.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))
	case ctx.Err() != nil:
		return nil
	default:
		return internalError(ctx, err)
	}
}

func (s *PipelineService) find(id string) (Supervised, error) {
	if id == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("id: a pipeline id is required"))
	}
	p, ok := s.pipelines.Get(id)
	if !ok {
		for _, ce := range s.pipelines.Invalid() {
			if ce.PipelineID == id {
				return nil, connect.NewError(connect.CodeFailedPrecondition,
					fmt.Errorf("pipeline %q is invalid and does not run until its file is fixed: %w", id, ce.Err))
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("pipeline %q not found", id))
	}
	return p, nil
}

// hasEvents accepts a pipeline id whose audit log can be read: a pipeline
// that exists, is invalid, or was deleted and still has events kept.
func (s *PipelineService) hasEvents(ctx context.Context, id string) error {
	_, err := s.find(id)
	if code := connect.CodeOf(err); err == nil || (code != connect.CodeNotFound && code != connect.CodeFailedPrecondition) {
		return err
	}
	kept, listErr := s.events.List(ctx, id, auditlog.Query{Limit: 1})
	if listErr != nil {
		return internalError(ctx, listErr)
	}
	if len(kept) == 0 && connect.CodeOf(err) == connect.CodeNotFound {
		return err
	}
	return nil
}

func fileLine(file string, line int) string {
	if file == "" || line == 0 {
		return file
	}
	return fmt.Sprintf("%s:%d", file, line)
}

// describe is p as the API shows it, with the errors of a newer version of
// its configuration that is not applied (from invalid, when given).
func (s *PipelineService) describe(ctx context.Context, p Supervised, invalid []ConfigError) (*conduitv1.Pipeline, error) {
	pb, err := s.describeOrErr(ctx, p, invalid)
	if err != nil {
		return nil, internalError(ctx, err)
	}
	return pb, nil
}

// describeOrErr is describe with the error of reading the state as it
// is.
func (s *PipelineService) describeOrErr(ctx context.Context, p Supervised, invalid []ConfigError) (*conduitv1.Pipeline, error) {
	st, err := p.State(ctx)
	if err != nil {
		return nil, err
	}
	info := p.Info()
	pb := pipelineToProto(info, st, s.now())
	pb.Origin = "file"
	if info.File == "" {
		pb.Origin = "api"
	}
	pb.ConfigErrors = configErrorsOf(info.ID, invalid)
	return pb, nil
}

// transitionError maps the supervisor's refusals to Connect codes.
// ErrPipelineMoving refuses a start or stop of a pipeline that no instance
// of a cluster runs at this moment (it is moving to another one); the
// caller tries again.
var ErrPipelineMoving = errors.New("no instance runs the pipeline right now (it is moving to another instance); try again in a moment")

// ErrNotCarriedOut is a start or stop that timed out and was withdrawn:
// unlike other timeouts, it will not complete later.
var ErrNotCarriedOut = errors.New("not carried out")

func transitionError(err error) error {
	switch {
	case errors.Is(err, ErrNotCarriedOut):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, ErrPipelineMoving):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, lifecycle.ErrInvalidTransition), errors.Is(err, lifecycle.ErrStillStopping):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded,
			fmt.Errorf("gave up waiting; the request may still complete: %w", err))
	case errors.Is(err, lifecycle.ErrSupervisorDone):
		return connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))
	case errors.Is(err, store.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, store.ErrValueTooLarge):
		// The caller's input (a pipeline, a rule) is too large to keep:
		// theirs to shorten, not a fault of the server.
		return connect.NewError(connect.CodeInvalidArgument, err)
	default:
		return connect.NewError(connect.CodeInternal, err)
	}
}

func internalError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	case errors.Is(err, lifecycle.ErrSupervisorDone), errors.Is(err, auditlog.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))
	case errors.Is(err, store.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, store.ErrValueTooLarge):
		// The caller's input (a pipeline, a rule) is too large to keep:
		// theirs to shorten, not a fault of the server.
		return connect.NewError(connect.CodeInvalidArgument, err)
	default:
		return connect.NewError(connect.CodeInternal, err)
	}
}

func kindsFromProto(in []string) ([]auditlog.Kind, error) {
	kinds := make([]auditlog.Kind, 0, len(in))
	for i, k := range in {
		kind := auditlog.Kind(k)
		if !kind.Known() {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("kinds[%d]: unknown event kind %q", i, k))
		}
		kinds = append(kinds, kind)
	}
	return kinds, nil
}

var statusToProto = map[lifecycle.Status]conduitv1.PipelineStatus{
	lifecycle.StatusRunning:    conduitv1.PipelineStatus_PIPELINE_STATUS_RUNNING,
	lifecycle.StatusRecovering: conduitv1.PipelineStatus_PIPELINE_STATUS_RECOVERING,
	lifecycle.StatusDegraded:   conduitv1.PipelineStatus_PIPELINE_STATUS_DEGRADED,
	lifecycle.StatusStopped:    conduitv1.PipelineStatus_PIPELINE_STATUS_STOPPED,
}

func statusFromProto(s conduitv1.PipelineStatus) (lifecycle.Status, bool) {
	for k, v := range statusToProto {
		if v == s {
			return k, true
		}
	}
	return "", false
}

func classToProto(c cerrors.Class) conduitv1.ErrorClass {
	switch c {
	case cerrors.ClassTransient:
		return conduitv1.ErrorClass_ERROR_CLASS_TRANSIENT
	case cerrors.ClassFatal:
		return conduitv1.ErrorClass_ERROR_CLASS_FATAL
	default:
		return conduitv1.ErrorClass_ERROR_CLASS_UNSPECIFIED
	}
}

func timeToProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func durationToProto(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func errorToProto(e *lifecycle.ErrorInfo) *conduitv1.PipelineError {
	if e == nil {
		return nil
	}
	return &conduitv1.PipelineError{
		Code: int32(e.Code), Class: classToProto(e.Class), ClassifiedBy: string(e.Source), Message: e.Message,
		Component: e.Component, ComponentKind: string(e.ComponentKind), Time: timeToProto(e.At), Rule: e.Rule,
	}
}

// policyToProto shows a resolved policy; sources is nil for a rule's.
func policyToProto(r config.ErrorRecovery, withSources bool) *conduitv1.RecoveryPolicy {
	pb := &conduitv1.RecoveryPolicy{
		Preset: r.Preset, Strategy: r.Strategy, MinDelay: durationpb.New(r.MinDelay), MaxDelay: durationpb.New(r.MaxDelay),
		BackoffFactor: r.BackoffFactor, MaxRetries: int32(r.MaxRetries), MaxRetriesWindow: durationpb.New(r.MaxRetriesWindow),
		Jitter: r.Jitter, MaxDuration: durationToProto(r.MaxDuration), MaxFlaps: int32(r.MaxFlaps),
		FlapWindow: durationpb.New(r.FlapWindow), QuarantineAfter: int32(r.QuarantineAfter),
		Probation: durationpb.New(r.Probation),
	}
	if withSources {
		pb.Sources = r.Sources()
	}
	for _, d := range r.Schedule {
		pb.Schedule = append(pb.Schedule, durationpb.New(d))
	}
	for _, list := range []struct {
		rules  []config.Rule
		global bool
	}{{r.Rules, false}, {r.GlobalRules, true}} {
		rules := slices.Clone(list.rules)
		config.SortRules(rules)
		for _, rule := range rules {
			pb.Rules = append(pb.Rules, ruleToProto(rule, list.global, r))
		}
	}
	return pb
}

// ruleToProto is rule as the API shows it; its policy is its keys over
// base.
func ruleToProto(rule config.Rule, global bool, base config.ErrorRecovery) *conduitv1.RecoveryRule {
	rp := &conduitv1.RecoveryRule{
		Name: rule.Name, Priority: int32(rule.Priority), Action: rule.Action, Class: rule.Match.Class,
		Message: rule.Match.Message, Pipelines: rule.Match.Pipelines, Components: rule.Match.Components,
		Plugins: rule.Match.Plugins, Global: global, DefinedAt: fileLine(rule.File, rule.Line),
	}
	for _, c := range rule.Match.Codes {
		rp.Codes = append(rp.Codes, c.String())
	}
	if own, err := base.ForRule(rule); err == nil && rule.Action == config.ActionRetry {
		rp.Policy = policyToProto(own, false)
	}
	return rp
}

func pipelineToProto(info PipelineInfo, st lifecycle.State, now time.Time) *conduitv1.Pipeline {
	pb := &conduitv1.Pipeline{
		Id: info.ID, Name: info.Name, Description: info.Description,
		Status:         statusToProto[st.Status],
		FailCount:      int32(st.FailCount),
		NextAttemptAt:  timeToProto(st.NextAttemptAt),
		LastError:      errorToProto(st.LastError),
		DegradedReason: string(st.DegradedReason),
		Probation:      st.Probation,
		Stopping:       st.Stopping,
		HeldBy:         st.HeldBy,
		UpdatedAt:      timeToProto(st.UpdatedAt),
		Flaps:          int32(st.Flaps),
		Instance:       info.Instance,
		DeadLettered:   info.DeadLettered,
	}
	if info.DeadLettered > 0 {
		pb.LastDeadLetteredAt, pb.LastDeadLetterRule = timeToProto(info.LastDeadLettered), info.LastDeadLetterRule
	}
	if info.Recovery.Strategy != "" {
		pb.Policy = policyToProto(info.Recovery, true)
	}
	pb.ConfigFile = fileLine(info.File, info.Line)
	pb.Definition = info.Definition
	if ep := st.Episode; ep != nil {
		e := &conduitv1.RecoveryEpisode{
			StartedAt: timeToProto(ep.StartedAt), EndedAt: timeToProto(ep.EndedAt), Outcome: ep.Outcome,
			DroppedAttempts: int32(ep.DroppedAttempts), Duration: durationpb.New(ep.Duration(now)),
		}
		for _, a := range ep.Attempts {
			e.Attempts = append(e.Attempts, &conduitv1.RecoveryAttempt{
				Number: int32(a.Number), FailedAt: timeToProto(a.FailedAt), Error: errorToProto(&a.Error),
				Delay: durationToProto(a.Delay), NextAttemptAt: timeToProto(a.NextAttemptAt), Strategy: a.Strategy,
			})
		}
		pb.Episode = e
	}
	return pb
}

func eventToProto(e auditlog.Event) *conduitv1.PipelineEvent {
	pb := &conduitv1.PipelineEvent{
		Sequence: e.Sequence, Time: timeToProto(e.Time), PipelineId: e.PipelineID, Kind: string(e.Kind),
		StatusBefore: statusToProto[e.StatusBefore], StatusAfter: statusToProto[e.StatusAfter],
		Message: e.Message, Actor: string(e.Actor), Attempt: int32(e.Attempt), Delay: durationToProto(e.Delay),
		NextAttemptAt: timeToProto(e.NextAttemptAt), Reason: e.Reason, Count: e.Count,
		Action: e.Action, Strategy: e.Strategy, Component: e.Component, ComponentKind: string(e.ComponentKind),
	}
	if e.HasError() {
		pb.Error = &conduitv1.PipelineError{
			Code: int32(e.ErrorCode), Class: classToProto(e.ErrorClass), ClassifiedBy: string(e.ErrorSource),
			Message: e.ErrorMessage, Component: e.Component, ComponentKind: string(e.ComponentKind), Rule: e.ErrorRule,
		}
	}
	return pb
}
