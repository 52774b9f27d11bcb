package conduit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/catalog"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/ownership"
	"github.com/conduitry/conduit/pkg/store"
)

// managedFileName names a loaded file in errors and in a rule's place.
func managedFileName(name string) string { return "managed:" + name }

// reloadManagedRules reads the managed rules again (another instance of a
// cluster changed them), serialized with the changes made here.
func (r *Runtime) reloadManagedRules(ctx context.Context) error {
	r.rulesMu.Lock()
	defer r.rulesMu.Unlock()
	return r.loadManagedRules(ctx)
}

// loadManagedRules reads the managed rules and makes them effective. A
// stored rule that no longer reads (a newer version refuses what an older
// one accepted) is left out with an error naming it, rather than stopping
// the process.
func (r *Runtime) loadManagedRules(ctx context.Context) error {
	var infos []api.RuleInfo
	err := catalog.ScanRules(ctx, r.db, func(key []byte, sr catalog.Rule, err error) {
		if err != nil {
			r.log.Error("a managed recovery rule in the store is unreadable; it is left out", zap.ByteString("key", key), zap.Error(err))
			return
		}
		rules, err := config.ParseRulesFile(managedFileName(sr.File), []byte(listOf(sr.YAML)))
		if err != nil || len(rules) != 1 {
			r.log.Error("a managed recovery rule no longer reads; it is left out until it is loaded again",
				zap.String("rule", sr.Name), zap.Error(err))
			return
		}
		rule := rules[0].Rule
		rule.File, rule.Line = managedFileName(sr.File), sr.Line
		infos = append(infos, api.RuleInfo{Rule: rule, Managed: true, YAML: sr.YAML, LoadedAt: sr.LoadedAt})
	})
	if err != nil {
		return err
	}
	r.setManaged(infos)
	if len(infos) > 0 {
		r.log.Info("managed recovery rules loaded", zap.Int("rules", len(infos)))
	}
	return nil
}

// listOf makes one rule's YAML (a map) a list of one rule.
func listOf(ruleYAML string) string {
	return "- " + strings.ReplaceAll(strings.TrimSuffix(ruleYAML, "\n"), "\n", "\n  ") + "\n"
}

// setManaged makes infos the managed rules, in the order they are tried.
// The caller holds rulesMu, or is New.
func (r *Runtime) setManaged(infos []api.RuleInfo) {
	slices.SortStableFunc(infos, func(a, b api.RuleInfo) int { return b.Rule.Priority - a.Rule.Priority })
	rules := make([]config.Rule, len(infos))
	for i, ri := range infos {
		rules[i] = ri.Rule
	}
	r.managed.Set(rules)
	r.managedInfo = infos
}

// runtimeRules is the runtime as the API's Rules.
type runtimeRules struct{ r *Runtime }

var _ api.Rules = runtimeRules{}

func (rr runtimeRules) Base() config.ErrorRecovery { return rr.r.cfg.Pipelines.ErrorRecovery }

// List implements api.Rules.
func (rr runtimeRules) List() []api.RuleInfo {
	r := rr.r
	r.rulesMu.Lock()
	out := slices.Clone(r.managedInfo)
	r.rulesMu.Unlock()
	global := slices.Clone(r.cfg.Pipelines.ErrorRecovery.Rules)
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
func (r *Runtime) fixedRule(name string) (config.Rule, bool) {
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
func (r *Runtime) globalRule(name string) (config.Rule, bool) {
	i := slices.IndexFunc(r.cfg.Pipelines.ErrorRecovery.Rules, func(g config.Rule) bool { return g.Name == name })
	if i < 0 {
		return config.Rule{}, false
	}
	return r.cfg.Pipelines.ErrorRecovery.Rules[i], true
}

// parsedRule is a rule of a rules file the API was sent.
type parsedRule struct {
	config.RuleText
	file, where string // the file's name, and file:line of the rule
}

// parseRulesFiles reads the rules of files, with names unique across them;
// a bad file is an *api.InvalidRulesError naming the file, line, rule and
// key.
func parseRulesFiles(files []config.FileContent) ([]parsedRule, error) {
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

// Load implements api.Rules.
func (rr runtimeRules) Load(ctx context.Context, files []config.FileContent, replaceAll bool) (api.LoadResult, error) {
	r := rr.r
	parsed, err := parseRulesFiles(files)
	if err != nil {
		return api.LoadResult{}, err
	}
	loaded := make([]api.RuleInfo, 0, len(parsed))
	now := time.Now().UTC()
	for _, p := range parsed {
		if g, ok := r.globalRule(p.Rule.Name); ok {
			return api.LoadResult{}, &api.InvalidRulesError{Err: fmt.Errorf("%s: rule %q: a global rule of %s:%d has that name; give the managed rule its own", p.where, p.Rule.Name, g.File, g.Line)}
		}
		if err := lifecycle.CheckRules(r.cfg.Pipelines.ErrorRecovery, []config.Rule{p.Rule}); err != nil {
			return api.LoadResult{}, &api.InvalidRulesError{Err: fmt.Errorf("%s: %w", p.where, err)}
		}
		rule := p.Rule
		rule.File = managedFileName(p.file)
		loaded = append(loaded, api.RuleInfo{Rule: rule, Managed: true, YAML: p.YAML, LoadedAt: now})
	}
	// Before rulesMu: clashWarnings takes the pipelines' lock.
	res := api.LoadResult{Warnings: r.clashWarnings(loaded)}
	r.rulesMu.Lock()
	defer r.rulesMu.Unlock()
	next := make([]api.RuleInfo, 0, len(r.managedInfo)+len(loaded))
	var ops []store.Op
	for _, old := range r.managedInfo {
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
		b, err := catalog.EncodeRule(catalog.Rule{Name: ri.Rule.Name, YAML: ri.YAML, File: strings.TrimPrefix(ri.Rule.File, managedFileName("")),
			Line: ri.Rule.Line, LoadedAt: ri.LoadedAt})
		if err != nil {
			return api.LoadResult{}, err
		}
		ops = append(ops, store.Op{Key: catalog.RuleKey(ri.Rule.Name), Value: b})
		res.Loaded = append(res.Loaded, ri.Rule.Name)
		next = append(next, ri)
	}
	if err := r.writer.Apply(ctx, ops...); err != nil {
		return api.LoadResult{}, fmt.Errorf("storing the recovery rules: %w", err)
	}
	r.setManaged(next)
	r.ownership.Changed(ctx, ownership.RulesChanged)
	r.log.Info("managed recovery rules loaded", zap.Strings("loaded", res.Loaded), zap.Strings("replaced", res.Replaced),
		zap.Strings("removed", res.Removed), zap.Int("managed", len(next)))
	for _, w := range res.Warnings {
		r.log.Warn("managed recovery rule: " + w)
	}
	return res, nil
}

// clashWarnings says, for each of the rules loaded, which pipelines of this
// process it does not apply to because their policy clashes with its keys
// (a min-delay above a pipeline's max-delay, say): such a rule is left out
// for those pipelines, and the operator who loads it is told.
func (r *Runtime) clashWarnings(loaded []api.RuleInfo) []string {
	rules := make([]config.Rule, len(loaded))
	for i, ri := range loaded {
		rules[i] = ri.Rule
	}
	r.mu.RLock()
	pipelines := slices.Clone(r.pipelines)
	r.mu.RUnlock()
	type clash struct {
		why       string
		pipelines []string
	}
	var order []string
	byRule := map[string]*clash{}
	for _, m := range pipelines {
		for _, c := range m.policy.RuleClashes(rules) {
			k, ok := byRule[c.Rule]
			if !ok {
				k = &clash{why: c.String()}
				byRule[c.Rule] = k
				order = append(order, c.Rule)
			}
			k.pipelines = append(k.pipelines, m.cfg.ID)
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
func (rr runtimeRules) Delete(ctx context.Context, name string) error {
	r := rr.r
	r.rulesMu.Lock()
	defer r.rulesMu.Unlock()
	i := slices.IndexFunc(r.managedInfo, func(ri api.RuleInfo) bool { return ri.Rule.Name == name })
	if i < 0 {
		if g, ok := r.fixedRule(name); ok {
			return &api.RuleInFileError{Name: name, File: fmt.Sprintf("%s:%d", g.File, g.Line)}
		}
		return api.ErrRuleNotFound
	}
	if err := r.writer.Apply(ctx, store.Op{Key: catalog.RuleKey(name), Delete: true}); err != nil {
		return fmt.Errorf("deleting recovery rule %s: %w", name, err)
	}
	r.setManaged(slices.Delete(slices.Clone(r.managedInfo), i, i+1))
	r.ownership.Changed(ctx, ownership.RulesChanged)
	r.log.Info("managed recovery rule deleted", zap.String("rule", name))
	return nil
}

// Clear implements api.Rules.
func (rr runtimeRules) Clear(ctx context.Context) (int, error) {
	r := rr.r
	r.rulesMu.Lock()
	defer r.rulesMu.Unlock()
	ops := make([]store.Op, 0, len(r.managedInfo))
	for _, ri := range r.managedInfo {
		ops = append(ops, store.Op{Key: catalog.RuleKey(ri.Rule.Name), Delete: true})
	}
	if len(ops) == 0 {
		return 0, nil
	}
	if err := r.writer.Apply(ctx, ops...); err != nil {
		return 0, errors.Join(errors.New("deleting the managed recovery rules"), err)
	}
	r.setManaged(nil)
	r.ownership.Changed(ctx, ownership.RulesChanged)
	r.log.Info("managed recovery rules cleared", zap.Int("deleted", len(ops)))
	return len(ops), nil
}

// DryRun implements api.Rules.
func (rr runtimeRules) DryRun(ctx context.Context, files []config.FileContent, since time.Duration) (api.DryRunResult, error) {
	r := rr.r
	parsed, err := parseRulesFiles(files)
	if err != nil {
		return api.DryRunResult{}, err
	}
	rules := make([]config.Rule, len(parsed))
	for i, p := range parsed {
		rules[i] = p.Rule
	}
	runner, err := lifecycle.NewDryRunner(rules, r.cfg.Pipelines.ErrorRecovery)
	if err != nil {
		return api.DryRunResult{}, &api.InvalidRulesError{Err: err}
	}
	res := api.DryRunResult{To: time.Now().UTC()}
	if since > 0 {
		res.From = res.To.Add(-since)
	}
	earliest := time.Time{}
	// One pipeline's faults at a time: the report holds counts, so a large
	// audit log is replayed without holding it.
	ids := r.audit.PipelineIDs()
	// In a cluster, the faults of every instance's pipelines: those run
	// elsewhere are read from the database first.
	if ids, err = r.ownership.EventsOfOthers(ctx, ids); err != nil {
		return api.DryRunResult{}, err
	}
	for _, id := range ids {
		events, err := r.audit.List(ctx, id, auditlog.Query{Kinds: []auditlog.Kind{auditlog.KindFault}})
		if err != nil {
			return api.DryRunResult{}, err
		}
		m := r.get(id)
		for _, e := range events {
			if e.Time.Before(res.From) {
				continue
			}
			f := lifecycle.PastFault{At: e.Time, ActualAction: e.Action, ActualRule: e.ErrorRule, Fault: lifecycle.Fault{
				Pipeline: id, Code: e.ErrorCode, Message: e.ErrorMessage, Component: e.Component,
				Class: lifecycle.CodeClass(e.ErrorClass, e.ErrorSource, e.ErrorCode, e.ComponentKind),
			}}
			if m != nil && e.Component != "" {
				f.Plugin = m.pluginOf(e.Component)
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

// Apply implements api.Rules.
func (rr runtimeRules) Apply(ctx context.Context, names []string) ([]api.AppliedRule, error) {
	r := rr.r
	r.rulesMu.Lock()
	for _, name := range names {
		if !slices.ContainsFunc(r.managedInfo, func(ri api.RuleInfo) bool { return ri.Rule.Name == name }) {
			r.rulesMu.Unlock()
			if g, ok := r.fixedRule(name); ok {
				return nil, &api.RuleInFileError{Name: name, File: fmt.Sprintf("%s:%d", g.File, g.Line)}
			}
			return nil, fmt.Errorf("%w: no managed rule is called %q", api.ErrRuleNotFound, name)
		}
	}
	r.rulesMu.Unlock()
	r.mu.RLock()
	pipelines := slices.Clone(r.pipelines)
	r.mu.RUnlock()
	var out []api.AppliedRule
	for _, m := range pipelines {
		if m.metrics.Status() != lifecycle.StatusDegraded {
			continue
		}
		a := api.AppliedRule{PipelineID: m.cfg.ID}
		var reasons []string
		for _, name := range names {
			o, err := m.sup.ApplyRule(ctx, name, api.ActorAPI)
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
	if err := r.durable(ctx); err != nil {
		return out, err
	}
	restarted := 0
	for _, a := range out {
		if a.Restarted {
			restarted++
		}
	}
	r.log.Info("managed recovery rules applied to the degraded pipelines", zap.Strings("rules", names),
		zap.Int("degraded", len(out)), zap.Int("restarted", restarted))
	return out, nil
}
