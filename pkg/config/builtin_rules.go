package config

import (
	_ "embed"
	"fmt"

	"gopkg.in/yaml.v3"
)

// BuiltinRulesFile is the File of every built-in rule: what
// `conduit recovery-rules list` shows as where they are defined.
const BuiltinRulesFile = "built-in"

//go:embed builtin_rules.yml
var builtinRulesYAML []byte

// BuiltinRules returns the recovery rules conduit ships for the
// known-permanent errors of its own connectors (DESIGN 9), in the order
// they are tried: after every rule of the user's, so that a user's rule
// matching the same error decides instead. Each call returns a new slice.
func BuiltinRules() []Rule {
	var root yaml.Node
	if err := yaml.Unmarshal(builtinRulesYAML, &root); err != nil {
		panic(fmt.Sprintf("built-in recovery rules: %v", err))
	}
	rules, fe := parseRules(root.Content[0], "rules", BuiltinRulesFile)
	if fe != nil {
		panic(fmt.Sprintf("built-in recovery rules: %v", fe))
	}
	SortRules(rules)
	return rules
}
