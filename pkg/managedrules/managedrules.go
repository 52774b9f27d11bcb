// Package managedrules is the recovery rules operators manage while conduit
// runs (`conduit recovery-rules load|delete|clear|dry-run|apply`, the
// RecoveryRules RPCs): loading and checking them, storing them in the
// catalog, making them effective in every pipeline's policy, dry-running
// rules against the audit history, and applying them to degraded
// pipelines. It serves the API's Rules; the runtime wires it to the
// pipelines it supervises (Pipelines) and to the process's ownership, which
// tells the other instances of a cluster that the rules changed.
package managedrules

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/catalog"
	"github.com/conduitry/conduit/pkg/clock"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/ownership"
	"github.com/conduitry/conduit/pkg/store"
)

// Pipeline is what the managed rules need of one supervised pipeline.
type Pipeline interface {
	ID() string
	// Policy is its compiled recovery policy, which says which rules
	// clash with its keys.
	Policy() *lifecycle.Policy
	// PluginOf names the plugin of its connector or processor id ("" when
	// it has none of that id).
	PluginOf(component string) string
	// Status is its status as last recorded.
	Status() lifecycle.Status
	// ApplyRule hands it, degraded, to the managed rule called name.
	ApplyRule(ctx context.Context, name string, actor lifecycle.Actor) (lifecycle.ApplyOutcome, error)
}

// Pipelines are the pipelines this process supervises.
type Pipelines interface {
	All() []Pipeline
	Get(id string) (Pipeline, bool)
	// Durable returns once the states and events handed over so far are
	// written.
	Durable(ctx context.Context) error
}

// Options are what Rules is built from.
type Options struct {
	// Base is conduit.yml's pipelines.error-recovery: its global rules
	// and the keys every rule is checked against.
	Base config.ErrorRecovery
	// DB is read for the stored rules; Writer writes changes to them.
	DB     store.Store
	Writer *store.Batcher
	// Effective receives the managed rules in the order they are tried;
	// every pipeline's policy tries them at each fault.
	Effective *lifecycle.ManagedRules
	// Audit is the history a dry run replays.
	Audit     *auditlog.Log
	Ownership ownership.Ownership
	Pipelines Pipelines
	Clock     clock.Clock
	Log       *zap.Logger
}

// Rules are the managed recovery rules of a process. It implements
// api.Rules.
type Rules struct {
	o Options
	// mu serializes changes to the managed rules; infos is what the API
	// lists of them, in the order they are tried.
	mu    sync.Mutex
	infos []api.RuleInfo
}

var _ api.Rules = (*Rules)(nil)

// New returns the managed rules of o; LoadStored reads the stored ones.
func New(o Options) *Rules {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Rules{o: o}
}

// fileName names a loaded file in errors and in a rule's place.
func fileName(name string) string { return "managed:" + name }

// LoadStored reads the stored managed rules and makes them effective: at
// startup, and when another instance of a cluster changed them. A stored
// rule that no longer reads (a newer version refuses what an older one
// accepted) is left out with an error naming it, rather than stopping the
// process.
func (r *Rules) LoadStored(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var infos []api.RuleInfo
	err := catalog.ScanRules(ctx, r.o.DB, func(key []byte, sr catalog.Rule, err error) {
		if err != nil {
			r.o.Log.Error("a managed recovery rule in the store is unreadable; it is left out", zap.ByteString("key", key), zap.Error(err))
			return
		}
		rules, err := config.ParseRulesFile(fileName(sr.File), []byte(listOf(sr.YAML)))
		if err != nil || len(rules) != 1 {
			r.o.Log.Error("a managed recovery rule no longer reads; it is left out until it is loaded again",
				zap.String("rule", sr.Name), zap.Error(err))
			return
		}
		rule := rules[0].Rule
		rule.File, rule.Line = fileName(sr.File), sr.Line
		infos = append(infos, api.RuleInfo{Rule: rule, Managed: true, YAML: sr.YAML, LoadedAt: sr.LoadedAt})
	})
	if err != nil {
		return err
	}
	r.set(infos)
	if len(infos) > 0 {
		r.o.Log.Info("managed recovery rules loaded", zap.Int("rules", len(infos)))
	}
	return nil
}

// listOf makes one rule's YAML (a map) a list of one rule.
func listOf(ruleYAML string) string {
	return "- " + strings.ReplaceAll(strings.TrimSuffix(ruleYAML, "\n"), "\n", "\n  ") + "\n"
}

// set makes infos the managed rules, in the order they are tried. The
// caller holds mu.
func (r *Rules) set(infos []api.RuleInfo) {
	slices.SortStableFunc(infos, func(a, b api.RuleInfo) int { return b.Rule.Priority - a.Rule.Priority })
	rules := make([]config.Rule, len(infos))
	for i, ri := range infos {
		rules[i] = ri.Rule
	}
	r.o.Effective.Set(rules)
	r.infos = infos
}

// changed tells the other instances of a cluster that the rules changed.
func (r *Rules) changed(ctx context.Context) { r.o.Ownership.Changed(ctx, ownership.RulesChanged) }

// Base implements api.Rules.
func (r *Rules) Base() config.ErrorRecovery { return r.o.Base }

// List implements api.Rules: the managed rules in the order they are
// tried, then the global ones, then the built-in ones.
func (r *Rules) List() []api.RuleInfo {
	r.mu.Lock()
	out := slices.Clone(r.infos)
	r.mu.Unlock()
	global := slices.Clone(r.o.Base.Rules)
	config.SortRules(global)
	for _, g := range global {
		out = append(out, api.RuleInfo{Rule: g})
	}
	for _, b := range config.BuiltinRules() {
		out = append(out, api.RuleInfo{Rule: b, Builtin: true})
	}
	return out
}

// fixedRule returns the rule called name that the API may not change: a
// global rule of conduit.yml, or a built-in one.
func (r *Rules) fixedRule(name string) (config.Rule, bool) {
	if g, ok := r.globalRule(name); ok {
		return g, true
	}
	builtin := config.BuiltinRules()
	if i := slices.IndexFunc(builtin, func(b config.Rule) bool { return b.Name == name }); i >= 0 {
		return builtin[i], true
	}
	return config.Rule{}, false
}

// globalRule returns the global rule called name.
func (r *Rules) globalRule(name string) (config.Rule, bool) {
	i := slices.IndexFunc(r.o.Base.Rules, func(g config.Rule) bool { return g.Name == name })
	if i < 0 {
		return config.Rule{}, false
	}
	return r.o.Base.Rules[i], true
}

// parsedRule is a rule of a rules file the API was sent.
type parsedRule struct {
	config.RuleText
	file, where string // the file's name, and file:line of the rule
}

// parseFiles reads the rules of files, with names unique across them; a
// bad file is an *api.InvalidRulesError naming the file, line, rule and
// key.
func parseFiles(files []config.FileContent) ([]parsedRule, error) {
	var out []parsedRule
	names := map[string]string{} // rule name -> file:line
	for _, f := range files {
		rules, err := config.ParseRulesFile(f.Name, f.Data)
		if err != nil {
			return nil, &api.InvalidRulesError{Err: err}
		}
		for _, rt := range rules {
			where := fmt.Sprintf("%s:%d", f.Name, rt.Rule.Line)
			if first, dup := names[rt.Rule.Name]; dup {
				return nil, &api.InvalidRulesError{Err: fmt.Errorf("%s: rule %q is defined twice (first at %s); names must be unique", where, rt.Rule.Name, first)}
			}
			names[rt.Rule.Name] = where
			out = append(out, parsedRule{RuleText: rt, file: f.Name, where: where})
		}
	}
	return out, nil
}

// Load implements api.Rules: the rules of files are checked, stored
// and made effective together, replacing managed rules of the same names
// (with replaceAll, every managed rule).
func (r *Rules) Load(ctx context.Context, files []config.FileContent, replaceAll bool) (api.LoadResult, error) {
	parsed, err := parseFiles(files)
	if err != nil {
		return api.LoadResult{}, err
	}
	loaded := make([]api.RuleInfo, 0, len(parsed))
	now := r.o.Clock.Now().UTC()
	for _, p := range parsed {
		if g, ok := r.globalRule(p.Rule.Name); ok {
			return api.LoadResult{}, &api.InvalidRulesError{Err: fmt.Errorf("%s: rule %q: a global rule of %s:%d has that name; give the managed rule its own", p.where, p.Rule.Name, g.File, g.Line)}
		}
		if err := lifecycle.CheckRules(r.o.Base, []config.Rule{p.Rule}); err != nil {
			return api.LoadResult{}, &api.InvalidRulesError{Err: fmt.Errorf("%s: %w", p.where, err)}
		}
		rule := p.Rule
		rule.File = fileName(p.file)
		loaded = append(loaded, api.RuleInfo{Rule: rule, Managed: true, YAML: p.YAML, LoadedAt: now})
	}
	// Before mu: clashWarnings reads the pipelines under their own lock,
	// and the two locks are never held together.
	res := api.LoadResult{Warnings: r.clashWarnings(loaded)}
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make([]api.RuleInfo, 0, len(r.infos)+len(loaded))
	var ops []store.Op
	for _, old := range r.infos {
		again := slices.ContainsFunc(loaded, func(ri api.RuleInfo) bool { return ri.Rule.Name == old.Rule.Name })
		switch {
		case again:
			res.Replaced = append(res.Replaced, old.Rule.Name)
		case replaceAll:
			res.Removed = append(res.Removed, old.Rule.Name)
			ops = append(ops, store.Op{Key: catalog.RuleKey(old.Rule.Name), Delete: true})
		default:
			next = append(next, old)
		}
	}
	for _, ri := range loaded {
		b, err := catalog.EncodeRule(catalog.Rule{Name: ri.Rule.Name, YAML: ri.YAML, File: strings.TrimPrefix(ri.Rule.File, fileName("")),
			Line: ri.Rule.Line, LoadedAt: ri.LoadedAt})
		if err != nil {
			return api.LoadResult{}, err
		}
		ops = append(ops, store.Op{Key: catalog.RuleKey(ri.Rule.Name), Value: b})
		res.Loaded = append(res.Loaded, ri.Rule.Name)
		next = append(next, ri)
	}
	if err := r.o.Writer.Apply(ctx, ops...); err != nil {
		return api.LoadResult{}, fmt.Errorf("storing the recovery rules: %w", err)
	}
	r.set(next)
	r.changed(ctx)
	r.o.Log.Info("managed recovery rules loaded", zap.Strings("loaded", res.Loaded), zap.Strings("replaced", res.Replaced),
		zap.Strings("removed", res.Removed), zap.Int("managed", len(next)))
	for _, w := range res.Warnings {
		r.o.Log.Warn("managed recovery rule: " + w)
	}
	return res, nil
}

// clashWarnings says, for each of the rules loaded, which pipelines of this
// process it does not apply to because their policy clashes with its keys
// (a min-delay above a pipeline's max-delay, say): such a rule is left out
// for those pipelines, and the operator who loads it is told.
func (r *Rules) clashWarnings(loaded []api.RuleInfo) []string {
	rules := make([]config.Rule, len(loaded))
	for i, ri := range loaded {
		rules[i] = ri.Rule
	}
	type clash struct {
		why       string
		pipelines []string
	}
	var order []string
	byRule := map[string]*clash{}
	for _, p := range r.o.Pipelines.All() {
		for _, c := range p.Policy().RuleClashes(rules) {
			k, ok := byRule[c.Rule]
			if !ok {
				k = &clash{why: c.String()}
				byRule[c.Rule] = k
				order = append(order, c.Rule)
			}
			k.pipelines = append(k.pipelines, p.ID())
		}
	}
	const named = 5
	warnings := make([]string, 0, len(order))
	for _, name := range order {
		k := byRule[name]
		slices.Sort(k.pipelines)
		ids := strings.Join(k.pipelines[:min(named, len(k.pipelines))], ", ")
		if more := len(k.pipelines) - named; more > 0 {
			ids += fmt.Sprintf(" and %d more", more)
		}
		warnings = append(warnings, fmt.Sprintf("%s - over the error-recovery of pipeline(s) %s, so it does not apply to them", k.why, ids))
	}
	return warnings
}

// Delete implements api.Rules.
func (r *Rules) Delete(ctx context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.infos, func(ri api.RuleInfo) bool { return ri.Rule.Name == name })
	if i < 0 {
		if g, ok := r.fixedRule(name); ok {
			return &api.RuleInFileError{Name: name, File: fmt.Sprintf("%s:%d", g.File, g.Line)}
		}
		return api.ErrRuleNotFound
	}
	if err := r.o.Writer.Apply(ctx, store.Op{Key: catalog.RuleKey(name), Delete: true}); err != nil {
		return fmt.Errorf("deleting recovery rule %s: %w", name, err)
	}
	r.set(slices.Delete(slices.Clone(r.infos), i, i+1))
	r.changed(ctx)
	r.o.Log.Info("managed recovery rule deleted", zap.String("rule", name))
	return nil
}

// Clear implements api.Rules.
func (r *Rules) Clear(ctx context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := make([]store.Op, 0, len(r.infos))
	for _, ri := range r.infos {
		ops = append(ops, store.Op{Key: catalog.RuleKey(ri.Rule.Name), Delete: true})
	}
	if len(ops) == 0 {
		return 0, nil
	}
	if err := r.o.Writer.Apply(ctx, ops...); err != nil {
		return 0, errors.Join(errors.New("deleting the managed recovery rules"), err)
	}
	r.set(nil)
	r.changed(ctx)
	r.o.Log.Info("managed recovery rules cleared", zap.Int("deleted", len(ops)))
	return len(ops), nil
}

// DryRun implements api.Rules: the rules of files decide, as if they had
// been the only rules, the faults the audit log recorded since then
// (since 0: all of them), with the matcher the supervisor uses.
func (r *Rules) DryRun(ctx context.Context, files []config.FileContent, since time.Duration) (api.DryRunResult, error) {
	parsed, err := parseFiles(files)
	if err != nil {
		return api.DryRunResult{}, err
	}
	rules := make([]config.Rule, len(parsed))
	for i, p := range parsed {
		rules[i] = p.Rule
	}
	runner, err := lifecycle.NewDryRunner(rules, r.o.Base)
	if err != nil {
		return api.DryRunResult{}, &api.InvalidRulesError{Err: err}
	}
	res := api.DryRunResult{To: r.o.Clock.Now().UTC()}
	if since > 0 {
		res.From = res.To.Add(-since)
	}
	earliest := time.Time{}
	// One pipeline's faults at a time: the report holds counts, so a large
	// audit log is replayed without holding it.
	ids := r.o.Audit.PipelineIDs()
	// In a cluster, the faults of every instance's pipelines: those run
	// elsewhere are read from the database first.
	if ids, err = r.o.Ownership.EventsOfOthers(ctx, ids); err != nil {
		return api.DryRunResult{}, err
	}
	for _, id := range ids {
		events, err := r.o.Audit.List(ctx, id, auditlog.Query{Kinds: []auditlog.Kind{auditlog.KindFault}})
		if err != nil {
			return api.DryRunResult{}, err
		}
		p, supervised := r.o.Pipelines.Get(id)
		for _, e := range events {
			if e.Time.Before(res.From) {
				continue
			}
			f := lifecycle.PastFault{At: e.Time, ActualAction: e.Action, ActualRule: e.ErrorRule, Fault: lifecycle.Fault{
				Pipeline: id, Code: e.ErrorCode, Message: e.ErrorMessage, Component: e.Component,
				Class: lifecycle.CodeClass(e.ErrorClass, e.ErrorSource, e.ErrorCode, e.ComponentKind),
			}}
			if supervised && e.Component != "" {
				f.Plugin = p.PluginOf(e.Component)
			}
			if earliest.IsZero() || e.Time.Before(earliest) {
				earliest = e.Time
			}
			runner.Add(f)
		}
	}
	if res.From.IsZero() {
		res.From = earliest
	}
	res.Report = runner.Report()
	return res, nil
}

// Apply implements api.Rules: each degraded pipeline is handed to the
// first of the named managed rules that restarts it.
func (r *Rules) Apply(ctx context.Context, names []string) ([]api.AppliedRule, error) {
	if err := r.checkManaged(names); err != nil {
		return nil, err
	}
	var out []api.AppliedRule
	for _, p := range r.o.Pipelines.All() {
		if p.Status() != lifecycle.StatusDegraded {
			continue
		}
		a := api.AppliedRule{PipelineID: p.ID()}
		var reasons []string
		for _, name := range names {
			o, err := p.ApplyRule(ctx, name, api.ActorAPI)
			if err != nil {
				return out, err
			}
			if o.Restarted {
				a.Rule, a.Restarted, a.NextAttemptAt, a.Reason = name, true, o.NextAttemptAt, o.Why
				break
			}
			reasons = append(reasons, name+": "+o.Why)
		}
		if !a.Restarted {
			a.Reason = strings.Join(reasons, "; ")
		}
		out = append(out, a)
	}
	if err := r.o.Pipelines.Durable(ctx); err != nil {
		return out, err
	}
	restarted := 0
	for _, a := range out {
		if a.Restarted {
			restarted++
		}
	}
	r.o.Log.Info("managed recovery rules applied to the degraded pipelines", zap.Strings("rules", names),
		zap.Int("degraded", len(out)), zap.Int("restarted", restarted))
	return out, nil
}

// checkManaged refuses names that are not managed rules, naming the file
// of a global or built-in rule of that name.
func (r *Rules) checkManaged(names []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if !slices.ContainsFunc(r.infos, func(ri api.RuleInfo) bool { return ri.Rule.Name == name }) {
			if g, ok := r.fixedRule(name); ok {
				return &api.RuleInFileError{Name: name, File: fmt.Sprintf("%s:%d", g.File, g.Line)}
			}
			return fmt.Errorf("%w: no managed rule is called %q", api.ErrRuleNotFound, name)
		}
	}
	return nil
}
