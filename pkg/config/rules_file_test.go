package config

import (
	"os"
	"strings"
	"testing"
)

func TestParseRulesFile(t *testing.T) {
	list := `- name: rate-limits
  match: {codes: ["429"], message: Rate Limit}
  strategy: fixed
  min-delay: 2s
- &deg
  name: auth
  match: {message: "(SQLSTATE 28"}
  action: degrade
`
	for name, data := range map[string]string{
		"list":        list,
		"map":         "rules:\n" + indentRules(list),
		"conduit.yml": "pipelines:\n  error-recovery:\n    rules:\n" + indentRules(indentRules(indentRules(list))),
	} {
		rules, err := ParseRulesFile(name, []byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rules) != 2 || rules[0].Rule.Name != "rate-limits" || rules[1].Rule.Action != ActionDegrade {
			t.Fatalf("%s: %+v", name, rules)
		}
		// The text stands alone and reads back as the same rule.
		again, err := ParseRulesFile("again", []byte(indentList(rules[1].YAML)))
		if err != nil || again[0].Rule.Name != "auth" || strings.Contains(rules[1].YAML, "&deg") {
			t.Fatalf("%s: the rule's text %q reads back as %+v, %v", name, rules[1].YAML, again, err)
		}
	}

	// One rule per file, as people write them.
	one, err := ParseRulesFile("one.yml", []byte("name: auth\nmatch: {message: \"(SQLSTATE 28\"}\naction: degrade\n"))
	if err != nil || len(one) != 1 || one[0].Rule.Name != "auth" || one[0].Rule.Action != ActionDegrade || one[0].Rule.Line != 1 {
		t.Fatalf("one rule: %+v, %v", one, err)
	}
	if again, err := ParseRulesFile("again", []byte(indentList(one[0].YAML))); err != nil || again[0].Rule.Name != "auth" {
		t.Fatalf("the one rule's text %q reads back as %+v, %v", one[0].YAML, again, err)
	}

	example, err := os.ReadFile("../../examples/rules/postgres.yml")
	if err != nil {
		t.Fatal(err)
	}
	if rules, err := ParseRulesFile("postgres.yml", example); err != nil || len(rules) < 4 {
		t.Fatalf("the shipped example: %d rules, %v", len(rules), err)
	}

	for data, want := range map[string]string{
		"- name: x\n  match: {codes: [abc]}\n":                        "bad.yml:2",
		"- name: x\n  match: {codes: [\"429\"]}\n  min-delay: soon\n": `rules[0].min-delay: rule "x"`,
		"version: 2.2\n": "expected a list of rules",
		"name: x\nmatch: {codes: [\"429\"]}\nmin-delay: soon\n": `bad.yml:3: min-delay: rule "x"`,
		"name: x\n": "bad.yml:1",
		"- name: a\n  match: {class: fatal}\n- name: a\n  match: {class: fatal}\n": "defined twice",
	} {
		if _, err := ParseRulesFile("bad.yml", []byte(data)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", data, err, want)
		}
	}
}

func indentRules(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// indentList makes one rule's map a one-element list.
func indentList(s string) string {
	return "- " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}
