package managedrules

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/ownership"
	"github.com/conduitry/conduit/pkg/store"

	cerrors "github.com/conduitry/conduit/errors"
)

// fakePipeline is a supervised pipeline whose rule applications are
// scripted: a name in restarts restarts it, any other leaves it degraded.
type fakePipeline struct {
	id       string
	status   lifecycle.Status
	policy   lifecycle.Policy
	restarts []string
	asked    []string
}

func (p *fakePipeline) ID() string                { return p.id }
func (p *fakePipeline) Policy() *lifecycle.Policy { return &p.policy }
func (p *fakePipeline) PluginOf(component string) string {
	if component == "pg" {
		return "builtin:postgres"
	}
	return ""
}
func (p *fakePipeline) Status() lifecycle.Status { return p.status }
func (p *fakePipeline) ApplyRule(_ context.Context, name string, _ lifecycle.Actor) (lifecycle.ApplyOutcome, error) {
	p.asked = append(p.asked, name)
	if slices.Contains(p.restarts, name) {
		return lifecycle.ApplyOutcome{Restarted: true, Why: "matched " + name}, nil
	}
	return lifecycle.ApplyOutcome{Why: "does not match"}, nil
}

type fakePipelines struct{ list []*fakePipeline }

func (f fakePipelines) All() []Pipeline {
	out := make([]Pipeline, len(f.list))
	for i, p := range f.list {
		out[i] = p
	}
	return out
}

func (f fakePipelines) Get(id string) (Pipeline, bool) {
	for _, p := range f.list {
		if p.id == id {
			return p, true
		}
	}
	return nil, false
}

func (fakePipelines) Durable(context.Context) error { return nil }

// countingOwnership is a process alone that counts what it was told changed.
type countingOwnership struct {
	ownership.Solo
	changes []ownership.Change
}

func (o *countingOwnership) Changed(_ context.Context, what ownership.Change) {
	o.changes = append(o.changes, what)
}

type fixture struct {
	db        store.Store
	writer    *store.Batcher
	effective *lifecycle.ManagedRules
	policies  *lifecycle.Policies
	base      config.ErrorRecovery
	owner     *countingOwnership
	pipelines fakePipelines
	audit     *auditlog.Log
	clock     *clocktest.Clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := store.NewInMemory()
	f := &fixture{db: db, writer: store.NewBatcher(db, nil), effective: lifecycle.NewManagedRules(), owner: &countingOwnership{},
		clock: clocktest.NewAt(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))}
	t.Cleanup(f.writer.Close)
	f.base = config.Default().Pipelines.ErrorRecovery
	f.base.Rules = []config.Rule{{Name: "global-429", File: "conduit.yml", Line: 7, Action: config.ActionRetry,
		Match: config.RuleMatch{Codes: []config.CodeRange{{From: 429, To: 429}}}}}
	f.policies = lifecycle.NewPolicies().WithManaged(f.effective)
	audit, err := auditlog.Open(context.Background(), db, f.writer, auditlog.Options{Logger: zap.NewNop(), Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.audit = audit
	return f
}

func (f *fixture) rules() *Rules {
	return New(Options{Base: f.base, DB: f.db, Writer: f.writer, Effective: f.effective, Audit: f.audit,
		Ownership: f.owner, Pipelines: f.pipelines, Clock: f.clock, Log: zap.NewNop()})
}

// policy compiles the base policy, as a pipeline without its own block
// has it, to see which managed rules are effective.
func (f *fixture) policy(t *testing.T) *lifecycle.Policy {
	t.Helper()
	p, err := f.policies.From(f.base)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func file(name, data string) config.FileContent {
	return config.FileContent{Name: name, Data: []byte(data)}
}

const twoRules = `- name: slow-503
  match: {codes: ["503"]}
  strategy: fixed
  min-delay: 5s
- name: drop-bad
  match: {codes: ["422"]}
  action: dead-letter
  priority: 500
`

func managedNames(infos []api.RuleInfo) []string {
	var out []string
	for _, ri := range infos {
		if ri.Managed {
			out = append(out, ri.Rule.Name)
		}
	}
	return out
}

// Loaded rules are stored, effective in every policy at once, listed in
// the order they are tried before the global and built-in ones, and read
// back by the next process; the other instances are told.
func TestLoadedRulesAreStoredEffectiveAndListed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := f.rules()
	if err := r.LoadStored(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := r.Load(ctx, []config.FileContent{file("ops.yml", twoRules)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Loaded, []string{"slow-503", "drop-bad"}) || len(res.Replaced)+len(res.Removed) != 0 {
		t.Errorf("load result %+v", res)
	}
	p := f.policy(t)
	if p.ManagedRule("slow-503") == nil || p.ManagedRule("drop-bad") == nil {
		t.Error("loaded rules are not effective in a pipeline's policy")
	}
	list := r.List()
	if got := managedNames(list); !slices.Equal(got, []string{"drop-bad", "slow-503"}) {
		t.Errorf("managed rules listed %v, want by priority", got)
	}
	if list[2].Rule.Name != "global-429" || list[2].Managed || list[2].Builtin || !list[len(list)-1].Builtin {
		t.Errorf("after the managed rules: %+v, then the built-in ones", list[2:])
	}
	if ri := list[1]; ri.Rule.File != "managed:ops.yml" || ri.Rule.Line != 1 || !ri.LoadedAt.Equal(f.clock.Now()) || !strings.Contains(ri.YAML, "min-delay: 5s") {
		t.Errorf("slow-503 as listed: %+v", ri)
	}
	if !slices.Equal(f.owner.changes, []ownership.Change{ownership.RulesChanged}) {
		t.Errorf("changes told: %v", f.owner.changes)
	}

	// The next process reads them back as they were listed.
	next := newFixture(t)
	next.db, next.writer = f.db, f.writer
	again := next.rules()
	if err := again.LoadStored(ctx); err != nil {
		t.Fatal(err)
	}
	if got := again.List(); !slices.EqualFunc(got[:2], list[:2], func(a, b api.RuleInfo) bool {
		return a.Rule.Name == b.Rule.Name && a.Rule.File == b.Rule.File && a.Rule.Line == b.Rule.Line && a.YAML == b.YAML && a.LoadedAt.Equal(b.LoadedAt)
	}) {
		t.Errorf("read back %+v, want %+v", got[:2], list[:2])
	}
	if next.policy(t).ManagedRule("slow-503") == nil {
		t.Error("rules read back are not effective")
	}
}

// Loading again replaces rules of the same name; with replaceAll, the
// others are deleted too.
func TestLoadReplaces(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := f.rules()
	if _, err := r.Load(ctx, []config.FileContent{file("ops.yml", twoRules)}, false); err != nil {
		t.Fatal(err)
	}
	res, err := r.Load(ctx, []config.FileContent{file("new.yml", "- name: slow-503\n  match: {codes: [\"503\"]}\n")}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Replaced, []string{"slow-503"}) || len(res.Removed) != 0 {
		t.Errorf("load result %+v", res)
	}
	if got := managedNames(r.List()); !slices.Equal(got, []string{"drop-bad", "slow-503"}) {
		t.Errorf("managed rules %v", got)
	}
	res, err = r.Load(ctx, []config.FileContent{file("only.yml", "- name: only-500\n  match: {codes: [\"500\"]}\n")}, true)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.Removed)
	if !slices.Equal(res.Removed, []string{"drop-bad", "slow-503"}) {
		t.Errorf("removed %v", res.Removed)
	}
	if got := managedNames(r.List()); !slices.Equal(got, []string{"only-500"}) {
		t.Errorf("managed rules after replacing all: %v", got)
	}
	if f.policy(t).ManagedRule("drop-bad") != nil {
		t.Error("a removed rule is still effective")
	}
}

// A rules file that does not load changes nothing and says where it is
// wrong.
func TestBadRulesAreRefusedWithWhereAndChangeNothing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		files []config.FileContent
		want  string
	}{
		{"a bad key", []config.FileContent{file("bad.yml", "- name: broken\n  match: {codes: [\"429\"]}\n  max-retries: many\n")}, "bad.yml"},
		{"a name twice", []config.FileContent{file("a.yml", "- name: x\n  match: {codes: [\"500\"]}\n"), file("b.yml", "- name: x\n  match: {codes: [\"501\"]}\n")}, "b.yml:1: rule \"x\" is defined twice (first at a.yml:1)"},
		{"a global rule's name", []config.FileContent{file("g.yml", "- name: global-429\n  match: {codes: [\"500\"]}\n")}, "g.yml:1: rule \"global-429\": a global rule of conduit.yml:7 has that name"},
		{"keys over the global policy", []config.FileContent{file("k.yml", "- name: slow\n  match: {codes: [\"500\"]}\n  min-delay: 2h\n  max-delay: 1h\n")}, "k.yml:1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			r := f.rules()
			_, err := r.Load(ctx, tc.files, true)
			var invalid *api.InvalidRulesError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want an InvalidRulesError with %q", err, tc.want)
			}
			if got := managedNames(r.List()); len(got) != 0 || len(f.owner.changes) != 0 {
				t.Errorf("a refused load changed the rules: %v, told %v", got, f.owner.changes)
			}
		})
	}
}

// Delete and Clear remove managed rules; rules of conduit.yml and built-in
// ones are named with their file instead.
func TestDeleteAndClear(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := f.rules()
	if _, err := r.Load(ctx, []config.FileContent{file("ops.yml", twoRules)}, false); err != nil {
		t.Fatal(err)
	}
	var inFile *api.RuleInFileError
	if err := r.Delete(ctx, "global-429"); !errors.As(err, &inFile) || inFile.File != "conduit.yml:7" {
		t.Errorf("delete of a global rule: %v", err)
	}
	if err := r.Delete(ctx, "nope"); !errors.Is(err, api.ErrRuleNotFound) {
		t.Errorf("delete of no rule: %v", err)
	}
	if err := r.Delete(ctx, "drop-bad"); err != nil {
		t.Fatal(err)
	}
	if got := managedNames(r.List()); !slices.Equal(got, []string{"slow-503"}) || f.policy(t).ManagedRule("drop-bad") != nil {
		t.Errorf("after delete: %v", got)
	}
	n, err := r.Clear(ctx)
	if err != nil || n != 1 {
		t.Fatalf("clear: %d, %v", n, err)
	}
	if n, err := r.Clear(ctx); err != nil || n != 0 {
		t.Errorf("clear of nothing: %d, %v", n, err)
	}
	again := f.rules()
	if err := again.LoadStored(ctx); err != nil {
		t.Fatal(err)
	}
	if got := managedNames(again.List()); len(got) != 0 {
		t.Errorf("deleted rules read back: %v", got)
	}
	if want := []ownership.Change{ownership.RulesChanged, ownership.RulesChanged, ownership.RulesChanged}; !slices.Equal(f.owner.changes, want) {
		t.Errorf("changes told %v, want one per change", f.owner.changes)
	}
}

// Apply hands each degraded pipeline to the first named rule that
// restarts it, leaves the others alone, and refuses names of rules that
// are not managed.
func TestApplyRestartsDegradedPipelinesOnly(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	healthy := &fakePipeline{id: "healthy", status: lifecycle.StatusRunning}
	stuck := &fakePipeline{id: "stuck", status: lifecycle.StatusDegraded}
	second := &fakePipeline{id: "second", status: lifecycle.StatusDegraded, restarts: []string{"drop-bad"}}
	first := &fakePipeline{id: "first", status: lifecycle.StatusDegraded, restarts: []string{"slow-503", "drop-bad"}}
	f.pipelines = fakePipelines{list: []*fakePipeline{healthy, stuck, second, first}}
	r := f.rules()
	if _, err := r.Load(ctx, []config.FileContent{file("ops.yml", twoRules)}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, []string{"global-429"}); err == nil {
		t.Error("applying a rule of conduit.yml was accepted")
	}
	if _, err := r.Apply(ctx, []string{"slow-503", "nope"}); !errors.Is(err, api.ErrRuleNotFound) || len(first.asked) != 0 {
		t.Errorf("applying an unknown rule: %v (asked %v)", err, first.asked)
	}
	out, err := r.Apply(ctx, []string{"slow-503", "drop-bad"})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]api.AppliedRule{}
	for _, a := range out {
		byID[a.PipelineID] = a
	}
	if len(out) != 3 || len(healthy.asked) != 0 {
		t.Fatalf("applied to %+v; the running pipeline was asked %v", out, healthy.asked)
	}
	if a := byID["first"]; !a.Restarted || a.Rule != "slow-503" || !slices.Equal(first.asked, []string{"slow-503"}) {
		t.Errorf("first: %+v, asked %v", a, first.asked)
	}
	if a := byID["second"]; !a.Restarted || a.Rule != "drop-bad" {
		t.Errorf("second: %+v", a)
	}
	if a := byID["stuck"]; a.Restarted || a.Reason != "slow-503: does not match; drop-bad: does not match" {
		t.Errorf("stuck: %+v", a)
	}
}

// A dry run decides the recorded faults with the rules sent, within the
// window asked for, with the plugin of the component that failed.
func TestDryRunReplaysTheAuditLog(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.pipelines = fakePipelines{list: []*fakePipeline{{id: "orders", status: lifecycle.StatusRunning}}}
	r := f.rules()
	fault := func(at time.Duration, code int) {
		e := auditlog.Event{Time: f.clock.Now().Add(at), PipelineID: "orders", Kind: auditlog.KindFault, ErrorCode: code,
			ErrorClass: cerrors.ClassTransient, ErrorSource: cerrors.SourceTyped, ErrorMessage: "boom", Component: "pg",
			ComponentKind: cerrors.ComponentSource, Action: "restart"}
		if _, err := f.audit.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	fault(-3*time.Hour, 503) // before the window
	fault(-30*time.Minute, 503)
	fault(-20*time.Minute, 500)
	res, err := r.DryRun(ctx, []config.FileContent{file("try.yml", "- name: pg-503\n  match: {codes: [\"503\"], plugins: [\"builtin:postgres\"]}\n  action: degrade\n")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !res.To.Equal(f.clock.Now()) || !res.From.Equal(f.clock.Now().Add(-time.Hour)) {
		t.Errorf("window %v - %v", res.From, res.To)
	}
	if res.Report.Faults != 2 || res.Report.Unmatched != 1 || len(res.Report.Rules) != 1 || res.Report.Rules[0].Matched != 1 {
		t.Errorf("report %+v", res.Report)
	}
	if _, err := r.DryRun(ctx, []config.FileContent{file("bad.yml", "- name: x\n")}, 0); !errors.As(err, new(*api.InvalidRulesError)) {
		t.Errorf("a bad file: %v", err)
	}
}
