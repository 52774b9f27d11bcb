package config

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Rule is a recovery rule (DESIGN 5.2): it matches an error and decides
// what to do with it, with its own schedule and limits.
type Rule struct {
	// Name is unique within its list and names the rule in events.
	Name  string
	Match RuleMatch
	// Priority orders the rules of one list, higher first, then file
	// order. Unless the rule sets it, it is the rule's specificity (see
	// Specificity).
	Priority int
	// PrioritySet says the rule's author wrote priority.
	PrioritySet bool
	// Action is retry (the default), degrade or dead-letter.
	Action string
	// Policy holds the keys of the policy vocabulary the rule sets; they
	// apply over the pipeline's policy for the errors the rule matches.
	Policy ErrorRecoveryOverride
	// File and Line say where the rule was written.
	File string
	Line int
}

// SortRules puts the rules of one list in the order they are tried
// (DESIGN 5.2): by priority, higher first, then as written. A pipeline's
// own list is tried before the global one.
func SortRules(rules []Rule) {
	slices.SortStableFunc(rules, func(a, b Rule) int { return cmp.Compare(b.Priority, a.Priority) })
}

// Rule actions.
const (
	ActionRetry      = "retry"
	ActionDegrade    = "degrade"
	ActionDeadLetter = "dead-letter"
)

// RuleMatch is what a rule matches; every field given must match.
type RuleMatch struct {
	Codes []CodeRange
	// Class is transient or fatal: the class the error's code gives.
	Class string
	// Message is a substring of the error's message, matched without
	// regard to case.
	Message string
	// Pipelines, Components and Plugins are globs (path.Match) on the
	// pipeline id, the connector or processor id, and its plugin.
	Pipelines, Components, Plugins []string
}

// CodeRange is an error code or an inclusive range of codes.
type CodeRange struct{ From, To int }

// Contains reports whether code is in the range.
func (c CodeRange) Contains(code int) bool { return code >= c.From && code <= c.To }

func (c CodeRange) String() string {
	if c.From == c.To {
		return strconv.Itoa(c.From)
	}
	return fmt.Sprintf("%d-%d", c.From, c.To)
}

// Specificity is the priority of a rule that sets none, after DeltaFi's
// points: the more precisely a rule names an error, the earlier it is
// tried. A component or plugin weighs more than a code, a long message
// substring more than a short one, a pipeline glob least.
func (m RuleMatch) Specificity() int {
	points := 0
	if len(m.Codes) > 0 {
		points += 20
		for _, c := range m.Codes {
			if c.From != c.To {
				points -= 10 // a range is less precise than a code
				break
			}
		}
	}
	if m.Class != "" {
		points += 5
	}
	if m.Message != "" {
		points += 10 + min(len(m.Message), 40)
	}
	points += globPoints(m.Components, 40, 25)
	points += globPoints(m.Plugins, 30, 20)
	points += globPoints(m.Pipelines, 15, 5)
	return points
}

// globPoints weighs a list of globs: exact names count more than patterns.
func globPoints(globs []string, exact, pattern int) int {
	if len(globs) == 0 {
		return 0
	}
	for _, g := range globs {
		if strings.ContainsAny(g, "*?[\\") {
			return pattern
		}
	}
	return exact
}

// ruleKeys are the keys a rule has besides those of the policy vocabulary.
var ruleKeys = []string{"name", "match", "priority", "action"}

// matchKeys are the fields of a rule's match.
var matchKeys = []string{"codes", "class", "message", "pipelines", "components", "plugins"}

// parseRules reads a list of rules; path is the field of the list (e.g.
// "error-recovery.rules"), file the file it is in.
func parseRules(n *yaml.Node, path, file string) ([]Rule, *fieldErr) {
	n = unalias(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, errAt(n.Line, path, "expected a list of rules, got %s", describe(n))
	}
	rules := make([]Rule, 0, len(n.Content))
	names := map[string]int{}
	for i, item := range n.Content {
		field := fmt.Sprintf("%s[%d]", path, i)
		r, fe := parseRule(unalias(item), field, file)
		if fe != nil {
			return nil, fe
		}
		if first, dup := names[r.Name]; dup {
			return nil, errAt(r.Line, field+".name", "rule %q is defined twice (first at line %d); names must be unique", r.Name, first)
		}
		names[r.Name] = r.Line
		rules = append(rules, r)
	}
	return rules, nil
}

func parseRule(n *yaml.Node, field, file string) (Rule, *fieldErr) {
	r := Rule{Action: ActionRetry, File: file, Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return r, errAt(n.Line, field, "expected a rule (a map with name, match and action), got %s", describe(n))
	}
	known := append(append([]string(nil), ruleKeys...), errorRecoveryFieldNames()...)
	seen := map[string]bool{}
	for _, kv := range pairs(n) {
		if kv.key.Kind != yaml.ScalarNode {
			return r, errAt(kv.key.Line, field, "expected a field name, got %s", describe(kv.key))
		}
		name := kv.key.Value
		f := field + "." + name
		if seen[name] {
			return r, errAt(kv.key.Line, f, "set twice")
		}
		seen[name] = true
		v := unalias(kv.value)
		switch name {
		case "name":
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" || strings.TrimSpace(v.Value) == "" {
				return r, errAt(v.Line, f, "expected the rule's name (a non-empty string), got %s", describe(v))
			}
			r.Name = v.Value
		case "match":
			m, fe := parseMatch(v, f)
			if fe != nil {
				return r, fe
			}
			r.Match = m
		case "priority":
			x, err := parseNode(KindInt, v)
			if err != nil {
				return r, &fieldErr{line: v.Line, field: f, err: err}
			}
			r.Priority, r.PrioritySet = x.(int), true
		case "action":
			x, err := parseNode(KindString, v)
			if err == nil {
				err = oneOf(ActionRetry, ActionDegrade, ActionDeadLetter)(x.(string))
			}
			if err != nil {
				return r, &fieldErr{line: v.Line, field: f, err: err}
			}
			r.Action = x.(string)
		default:
			fe := setERField(&r.Policy, name, v, f)
			if fe == errUnknownField {
				return r, errAt(kv.key.Line, f, "%s", unknownNameError("field", name, known).Error())
			}
			if fe != nil {
				return r, fe
			}
		}
	}
	switch {
	case r.Name == "":
		return r, errAt(n.Line, field+".name", "every rule needs a name")
	case !seen["match"]:
		return r, errAt(n.Line, field+".match", "rule %q matches nothing; give at least one of %s", r.Name, strings.Join(matchKeys, ", "))
	}
	if !r.PrioritySet {
		r.Priority = r.Match.Specificity()
	}
	if p := r.Policy; p.Strategy != nil && *p.Strategy == StrategySchedule && p.Schedule != nil && len(*p.Schedule) == 0 {
		return r, errAt(n.Line, field+".schedule", "strategy schedule needs at least one delay")
	}
	return r, nil
}

func parseMatch(n *yaml.Node, field string) (RuleMatch, *fieldErr) {
	var m RuleMatch
	if n.Kind != yaml.MappingNode {
		return m, errAt(n.Line, field, "expected a map (%s), got %s", strings.Join(matchKeys, ", "), describe(n))
	}
	seen := map[string]bool{}
	for _, kv := range pairs(n) {
		name := kv.key.Value
		f := field + "." + name
		if seen[name] {
			return m, errAt(kv.key.Line, f, "set twice")
		}
		seen[name] = true
		v := unalias(kv.value)
		var fe *fieldErr
		switch name {
		case "codes":
			m.Codes, fe = parseCodes(v, f)
		case "class":
			x, err := parseNode(KindString, v)
			if err == nil {
				err = oneOf("transient", "fatal")(x.(string))
			}
			if err != nil {
				return m, &fieldErr{line: v.Line, field: f, err: err}
			}
			m.Class = x.(string)
		case "message":
			x, err := parseNode(KindString, v)
			if err == nil && strings.TrimSpace(x.(string)) == "" {
				err = errors.New("must not be empty (it would match every error)")
			}
			if err != nil {
				return m, &fieldErr{line: v.Line, field: f, err: err}
			}
			m.Message = x.(string)
		case "pipelines":
			m.Pipelines, fe = parseGlobs(v, f)
		case "components":
			m.Components, fe = parseGlobs(v, f)
		case "plugins":
			m.Plugins, fe = parseGlobs(v, f)
		default:
			return m, errAt(kv.key.Line, f, "%s", unknownNameError("field", name, matchKeys).Error())
		}
		if fe != nil {
			return m, fe
		}
	}
	if len(seen) == 0 {
		return m, errAt(n.Line, field, "matches nothing; give at least one of %s", strings.Join(matchKeys, ", "))
	}
	return m, nil
}

// parseCodes reads codes and ranges: 429, "429", "500-599".
func parseCodes(n *yaml.Node, field string) ([]CodeRange, *fieldErr) {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, errAt(n.Line, field, `expected a list of codes and ranges such as ["429", "500-599"], got %s`, describe(n))
	}
	out := make([]CodeRange, 0, len(n.Content))
	for i, item := range n.Content {
		item = unalias(item)
		f := fmt.Sprintf("%s[%d]", field, i)
		if item.Kind != yaml.ScalarNode {
			return nil, errAt(item.Line, f, "expected a code (429) or a range (500-599), got %s", describe(item))
		}
		c, err := parseCodeRange(item.Value)
		if err != nil {
			return nil, &fieldErr{line: item.Line, field: f, err: err}
		}
		out = append(out, c)
	}
	return out, nil
}

// Error codes are HTTP-like: 100 to 599 (see errors/).
const (
	minRuleCode = 100
	maxRuleCode = 599
)

func parseCodeRange(s string) (CodeRange, error) {
	s = strings.TrimSpace(s)
	from, to, isRange := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(strings.TrimSpace(from))
	hi := lo
	var err2 error
	if isRange {
		hi, err2 = strconv.Atoi(strings.TrimSpace(to))
	}
	switch {
	case err1 != nil || err2 != nil:
		return CodeRange{}, fmt.Errorf("%q is not a code (429) or a range (500-599)", s)
	case lo < minRuleCode || hi > maxRuleCode:
		return CodeRange{}, fmt.Errorf("%q is outside the error codes %d-%d", s, minRuleCode, maxRuleCode)
	case lo > hi:
		return CodeRange{}, fmt.Errorf("range %q ends before it starts", s)
	}
	return CodeRange{From: lo, To: hi}, nil
}

func parseGlobs(n *yaml.Node, field string) ([]string, *fieldErr) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		// A single glob written without brackets.
		n = &yaml.Node{Kind: yaml.SequenceNode, Line: n.Line, Content: []*yaml.Node{n}}
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, errAt(n.Line, field, `expected a list of globs such as ["orders-*"], got %s`, describe(n))
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = unalias(item)
		f := fmt.Sprintf("%s[%d]", field, i)
		if item.Kind != yaml.ScalarNode || item.Value == "" {
			return nil, errAt(item.Line, f, "expected a glob such as orders-*, got %s", describe(item))
		}
		if _, err := path.Match(item.Value, ""); err != nil {
			return nil, errAt(item.Line, f, "%q is not a valid glob (use * and ?, and [...] closed)", item.Value)
		}
		out = append(out, item.Value)
	}
	return out, nil
}

// errUnknownField is setERField's answer for a name that is not a key of
// the policy vocabulary.
var errUnknownField = &fieldErr{}

// setERField parses v as the error-recovery key name into o.
func setERField(o *ErrorRecoveryOverride, name string, v *yaml.Node, field string) *fieldErr {
	for _, f := range errorRecoveryFields {
		if f.name != name {
			continue
		}
		x, err := parseNode(f.kind, v)
		if err == nil {
			err = f.check(x)
		}
		if err != nil {
			return &fieldErr{line: v.Line, field: field, err: err}
		}
		f.setOv(o, x)
		return nil
	}
	return errUnknownField
}
