package config

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// RuleText is a recovery rule with its YAML as written (aliases resolved),
// which is what the runtime keeps of a managed rule and what export
// prints.
type RuleText struct {
	Rule Rule
	YAML string
}

// ParseRulesFile reads the recovery rules of a rules file: a list of rules
// (DESIGN 5.2), one rule (a map with name and match), a map with a rules
// list, or a conduit.yml whose
// pipelines.error-recovery.rules holds them. name stands for the file in
// errors, which name its line and the rule's field.
func ParseRulesFile(name string, data []byte) ([]RuleText, error) {
	if len(data) > maxFileBytes {
		return nil, &PipelineError{File: name, Err: fileTooLarge(int64(len(data)))}
	}
	roots, err := parseDocuments(data)
	if err != nil {
		var de *docError
		if errors.As(err, &de) {
			return nil, &PipelineError{File: name, Line: de.line, Err: de.err}
		}
		return nil, &PipelineError{File: name, Err: err}
	}
	if len(roots) != 1 {
		return nil, &PipelineError{File: name, Err: fmt.Errorf("expected one YAML document with rules, found %d", len(roots))}
	}
	list, path := rulesList(roots[0])
	single := false
	if list == nil && isOneRule(roots[0]) {
		// One rule per file, as people write them: a list of one.
		rule := unalias(roots[0])
		list = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: rule.Line, Column: rule.Column, Content: []*yaml.Node{rule}}
		path, single = "rules", true
	}
	if list == nil {
		return nil, &PipelineError{File: name, Line: roots[0].Line,
			Err: errors.New("expected a list of rules, one rule (a map with name and match), a map with rules, or a conduit.yml with pipelines.error-recovery.rules")}
	}
	rules, fe := parseRules(list, path, name)
	if fe != nil {
		err := fe.err
		if rule := ruleNameAt(list, path, fe.field); rule != "" {
			err = fmt.Errorf("rule %q: %w", rule, err)
		}
		field := fe.field
		if single {
			// The file has no list: name the field as written in it.
			field = strings.TrimPrefix(strings.TrimPrefix(field, path+"[0]"), ".")
		}
		return nil, &PipelineError{File: name, Line: fe.line, Field: field, Err: err}
	}
	out := make([]RuleText, len(rules))
	for i, r := range rules {
		b, err := yaml.Marshal(resolved(unalias(list.Content[i]), 0))
		if err != nil {
			return nil, &PipelineError{File: name, Line: r.Line, Err: err}
		}
		out[i] = RuleText{Rule: r, YAML: string(b)}
	}
	return out, nil
}

// rulesList finds the list of rules in a rules file and names its path.
func rulesList(root *yaml.Node) (*yaml.Node, string) {
	root = unalias(root)
	if root.Kind == yaml.SequenceNode {
		return root, "rules"
	}
	if root.Kind != yaml.MappingNode {
		return nil, ""
	}
	if n := lookup(root, "rules"); n != nil {
		return unalias(n), "rules"
	}
	if p := lookup(root, "pipelines"); p != nil && unalias(p).Kind == yaml.MappingNode {
		if er := lookup(unalias(p), "error-recovery"); er != nil && unalias(er).Kind == yaml.MappingNode {
			if n := lookup(unalias(er), "rules"); n != nil {
				return unalias(n), globalRulesKey
			}
		}
	}
	return nil, ""
}

// isOneRule reports whether root is a single rule: a map with a name or a
// match, and neither rules nor pipelines.
func isOneRule(root *yaml.Node) bool {
	root = unalias(root)
	return root.Kind == yaml.MappingNode && (lookup(root, "name") != nil || lookup(root, "match") != nil)
}

// resolved copies n with every alias replaced by what it refers to, so
// that the copy stands alone. parseDocuments already bounded how far
// aliases expand.
func resolved(n *yaml.Node, depth int) *yaml.Node {
	n = unalias(n)
	c := *n
	c.Anchor, c.Alias = "", nil
	if len(n.Content) > 0 && depth < maxNesting {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, child := range n.Content {
			c.Content[i] = resolved(child, depth+1)
		}
	}
	return &c
}

// ruleNameAt returns the name of the rule a field of the list is in
// ("rules[2].min-delay" is in the third), when it has one.
func ruleNameAt(list *yaml.Node, path, field string) string {
	var i int
	if _, err := fmt.Sscanf(strings.TrimPrefix(field, path), "[%d]", &i); err != nil || i < 0 || i >= len(list.Content) {
		return ""
	}
	if n := lookup(unalias(list.Content[i]), "name"); n != nil && unalias(n).Kind == yaml.ScalarNode {
		return unalias(n).Value
	}
	return ""
}
