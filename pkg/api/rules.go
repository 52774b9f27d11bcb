package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conduitry/conduit/lifecycle"
	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
	"github.com/conduitry/conduit/pkg/config"
)

// RuleInfo is a recovery rule as the API lists it.
type RuleInfo struct {
	Rule config.Rule
	// Managed: kept in the database; Builtin: one of conduit's built-in
	// rules (config.BuiltinRules); otherwise a global rule of conduit.yml.
	Managed, Builtin bool
	YAML             string
	LoadedAt         time.Time
}

// LoadResult says what a load changed.
type LoadResult struct {
	Loaded, Replaced, Removed []string
	// Warnings are what the caller should know about the rules loaded:
	// the pipelines a rule does not apply to, and why.
	Warnings []string
}

// Rules are the recovery rules: the runtime's.
type Rules interface {
	// List returns the managed rules and then the global ones, each in the
	// order they are tried.
	List() []RuleInfo
	// Base is the global policy the rules' keys apply over, to show a
	// rule's policy.
	Base() config.ErrorRecovery
	// Load adds or, with replaceAll, replaces the managed rules; a bad
	// file is an *InvalidRulesError and changes nothing.
	Load(ctx context.Context, files []config.FileContent, replaceAll bool) (LoadResult, error)
	// Delete deletes a managed rule: ErrRuleNotFound, or a
	// *RuleInFileError for a rule of conduit.yml.
	Delete(ctx context.Context, name string) error
	// Clear deletes every managed rule.
	Clear(ctx context.Context) (int, error)
	// DryRun replays the faults of the audit log since since (0: all)
	// against the rules of files; a bad file is an *InvalidRulesError.
	DryRun(ctx context.Context, files []config.FileContent, since time.Duration) (DryRunResult, error)
	// Apply hands the degraded pipelines to the managed rules names:
	// ErrRuleNotFound for a name no managed rule has, a *RuleInFileError
	// for a rule of conduit.yml.
	Apply(ctx context.Context, names []string) ([]AppliedRule, error)
}

// AppliedRule is what applying rules did to one degraded pipeline.
type AppliedRule struct {
	PipelineID, Rule string
	Restarted        bool
	NextAttemptAt    time.Time
	Reason           string
}

// DryRunResult is a dry run's report and the window of faults it read.
type DryRunResult struct {
	Report   lifecycle.DryRunReport
	From, To time.Time
}

// ErrRuleNotFound is returned for a rule name no rule has.
var ErrRuleNotFound = errors.New("recovery rule not found")

// InvalidRulesError refuses rules that do not load.
type InvalidRulesError struct{ Err error }

func (e *InvalidRulesError) Error() string { return e.Err.Error() }
func (e *InvalidRulesError) Unwrap() error { return e.Err }

// RuleInFileError refuses to change a rule of conduit.yml through the API.
type RuleInFileError struct {
	Name string
	File string // file:line
}

func (e *RuleInFileError) Error() string {
	if strings.HasPrefix(e.File, config.BuiltinRulesFile+":") {
		return fmt.Sprintf("recovery rule %q is one of conduit's built-in rules: to decide otherwise for the errors it matches, load a rule of your own that matches them (your rules are tried first)", e.Name)
	}
	return fmt.Sprintf("recovery rule %q is defined in %s: change or remove it there", e.Name, e.File)
}

// RuleService implements conduitv1connect.RecoveryRuleServiceHandler.
type RuleService struct{ rules Rules }

var _ conduitv1connect.RecoveryRuleServiceHandler = (*RuleService)(nil)

// NewRuleService returns the service.
func NewRuleService(r Rules) *RuleService { return &RuleService{rules: r} }

func (s *RuleService) toProto(ri RuleInfo) *conduitv1.ManagedRecoveryRule {
	out := &conduitv1.ManagedRecoveryRule{Rule: ruleToProto(ri.Rule, true, s.rules.Base()), Source: "file", Yaml: ri.YAML}
	switch {
	case ri.Managed:
		out.Source = "managed"
		out.LoadedAt = timestamppb.New(ri.LoadedAt)
	case ri.Builtin:
		out.Source = config.BuiltinRulesFile
	}
	out.Warning = config.FloorWarning(ri.Rule.Policy.BelowFloor())
	return out
}

// ListRecoveryRules implements the RPC.
func (s *RuleService) ListRecoveryRules(context.Context, *connect.Request[conduitv1.ListRecoveryRulesRequest]) (*connect.Response[conduitv1.ListRecoveryRulesResponse], error) {
	out := &conduitv1.ListRecoveryRulesResponse{}
	for _, ri := range s.rules.List() {
		out.Rules = append(out.Rules, s.toProto(ri))
	}
	return connect.NewResponse(out), nil
}

// GetRecoveryRule implements the RPC.
func (s *RuleService) GetRecoveryRule(_ context.Context, req *connect.Request[conduitv1.GetRecoveryRuleRequest]) (*connect.Response[conduitv1.GetRecoveryRuleResponse], error) {
	name := req.Msg.GetName()
	if name == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("name: a rule name is required"))
	}
	for _, ri := range s.rules.List() {
		if ri.Rule.Name == name {
			return connect.NewResponse(&conduitv1.GetRecoveryRuleResponse{Rule: s.toProto(ri)}), nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("recovery rule %q not found", name))
}

// LoadRecoveryRules implements the RPC.
func (s *RuleService) LoadRecoveryRules(ctx context.Context, req *connect.Request[conduitv1.LoadRecoveryRulesRequest]) (*connect.Response[conduitv1.LoadRecoveryRulesResponse], error) {
	files, err := filesOf(req.Msg.GetFiles(), "rules")
	if err != nil {
		return nil, err
	}
	res, err := s.rules.Load(ctx, files, req.Msg.GetReplaceAll())
	if err != nil {
		return nil, rulesError(ctx, err)
	}
	out := &conduitv1.LoadRecoveryRulesResponse{Loaded: res.Loaded, Replaced: res.Replaced, Removed: res.Removed, Warnings: res.Warnings}
	loaded := make(map[string]bool, len(res.Loaded))
	for _, name := range res.Loaded {
		loaded[name] = true
	}
	for _, ri := range s.rules.List() {
		if !ri.Managed || !loaded[ri.Rule.Name] {
			continue
		}
		if w := config.FloorWarning(ri.Rule.Policy.BelowFloor()); w != "" {
			out.Warnings = append(out.Warnings, fmt.Sprintf("rule %q: %s", ri.Rule.Name, w))
		}
	}
	return connect.NewResponse(out), nil
}

// DeleteRecoveryRule implements the RPC.
func (s *RuleService) DeleteRecoveryRule(ctx context.Context, req *connect.Request[conduitv1.DeleteRecoveryRuleRequest]) (*connect.Response[conduitv1.DeleteRecoveryRuleResponse], error) {
	name := req.Msg.GetName()
	if name == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("name: a rule name is required"))
	}
	var inFile *RuleInFileError
	switch err := s.rules.Delete(ctx, name); {
	case err == nil:
		return connect.NewResponse(&conduitv1.DeleteRecoveryRuleResponse{}), nil
	case errors.As(err, &inFile):
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, ErrRuleNotFound):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("recovery rule %q not found", name))
	default:
		return nil, internalError(ctx, err)
	}
}

// ClearRecoveryRules implements the RPC.
func (s *RuleService) ClearRecoveryRules(ctx context.Context, _ *connect.Request[conduitv1.ClearRecoveryRulesRequest]) (*connect.Response[conduitv1.ClearRecoveryRulesResponse], error) {
	n, err := s.rules.Clear(ctx)
	if err != nil {
		return nil, internalError(ctx, err)
	}
	return connect.NewResponse(&conduitv1.ClearRecoveryRulesResponse{Deleted: int32(n)}), nil
}

// DryRunRecoveryRules implements the RPC.
func (s *RuleService) DryRunRecoveryRules(ctx context.Context, req *connect.Request[conduitv1.DryRunRecoveryRulesRequest]) (*connect.Response[conduitv1.DryRunRecoveryRulesResponse], error) {
	files, err := filesOf(req.Msg.GetFiles(), "rules")
	if err != nil {
		return nil, err
	}
	var since time.Duration
	if d := req.Msg.GetSince(); d != nil {
		if since = d.AsDuration(); since <= 0 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("since: %s, want a positive duration or none", since))
		}
	}
	res, err := s.rules.DryRun(ctx, files, since)
	if err != nil {
		return nil, rulesError(ctx, err)
	}
	rep := res.Report
	out := &conduitv1.DryRunRecoveryRulesResponse{Faults: int32(rep.Faults), Unmatched: int32(rep.Unmatched),
		From: timeToProto(res.From), To: timeToProto(res.To)}
	for _, r := range rep.Rules {
		out.Rules = append(out.Rules, &conduitv1.DryRunRule{Name: r.Name, Action: r.Action, Schedule: r.Schedule,
			Matched: int32(r.Matched), Pipelines: counts32(r.Pipelines), Actual: counts32(r.Actual), Warning: r.Warning})
	}
	for _, u := range rep.UnmatchedKinds {
		out.UnmatchedKinds = append(out.UnmatchedKinds, &conduitv1.UnmatchedFaults{Code: int32(u.Code), Class: string(u.Class),
			Message: u.Message, Count: int32(u.Count), Pipelines: counts32(u.Pipelines)})
	}
	return connect.NewResponse(out), nil
}

func counts32(m map[string]int) map[string]int32 {
	out := make(map[string]int32, len(m))
	for k, v := range m {
		out[k] = int32(v)
	}
	return out
}

// ApplyRecoveryRules implements the RPC.
func (s *RuleService) ApplyRecoveryRules(ctx context.Context, req *connect.Request[conduitv1.ApplyRecoveryRulesRequest]) (*connect.Response[conduitv1.ApplyRecoveryRulesResponse], error) {
	names := req.Msg.GetNames()
	if len(names) == 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("names: at least one managed rule is required"))
	}
	res, err := s.rules.Apply(ctx, names)
	var inFile *RuleInFileError
	switch {
	case errors.As(err, &inFile):
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, ErrRuleNotFound):
		return nil, connect.NewError(connect.CodeNotFound, err)
	case err != nil:
		return nil, internalError(ctx, err)
	}
	out := &conduitv1.ApplyRecoveryRulesResponse{}
	for _, a := range res {
		out.Pipelines = append(out.Pipelines, &conduitv1.AppliedRule{PipelineId: a.PipelineID, Rule: a.Rule,
			Restarted: a.Restarted, NextAttemptAt: timeToProto(a.NextAttemptAt), Reason: a.Reason})
	}
	return connect.NewResponse(out), nil
}

// rulesError maps the error of a call with rules files: rules that do
// not load are the caller's to fix.
func rulesError(ctx context.Context, err error) error {
	var invalid *InvalidRulesError
	if errors.As(err, &invalid) {
		return connect.NewError(connect.CodeInvalidArgument, invalid.Err)
	}
	return internalError(ctx, err)
}
