// Package monitoring holds conduit's Prometheus alerting rules
// (alerts.yml, with their promtool tests in alerts.test.yml) and its
// Grafana dashboard (dashboard.json), which operators load as they are
// (docs/operations.md, "Alerts and dashboard").
//
// The Go side only reads them back: Queries lists every PromQL
// expression the files hold and MetricNames the series an expression
// selects, so that tests hold the files to the metrics pkg/metrics
// exports. It is not a PromQL parser: it knows enough of the syntax to
// tell a metric name from a function, a keyword, a label or a duration.
package monitoring

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Rules is alerts.yml, the alerting rules.
//
//go:embed alerts.yml
var Rules []byte

// Dashboard is dashboard.json, the Grafana dashboard.
//
//go:embed dashboard.json
var Dashboard []byte

// Query is one PromQL expression of the rules or the dashboard.
type Query struct {
	// Where names it: "alerts.yml: alert X" or "dashboard.json: panel
	// "T" query A".
	Where string
	Expr  string
}

// Queries returns every expression of alerts.yml and dashboard.json: the
// rules', the panels' and the template variables'.
func Queries() ([]Query, error) {
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(Rules, &rules); err != nil {
		return nil, fmt.Errorf("alerts.yml: %w", err)
	}
	var out []Query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				name = "record " + r.Record
			}
			if strings.TrimSpace(r.Expr) == "" {
				return nil, fmt.Errorf("alerts.yml: group %s: %s has no expr", g.Name, name)
			}
			out = append(out, Query{Where: "alerts.yml: " + name, Expr: r.Expr})
		}
	}

	var dash struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(Dashboard, &dash); err != nil {
		return nil, fmt.Errorf("dashboard.json: %w", err)
	}
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				return fmt.Errorf("dashboard.json: panel %q has no query", p.Title)
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("dashboard.json: panel %q query %s has no expr", p.Title, t.RefID)
				}
				out = append(out, Query{Where: fmt.Sprintf("dashboard.json: panel %q query %s", p.Title, t.RefID), Expr: t.Expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(dash.Panels); err != nil {
		return nil, err
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("dashboard.json: variable %s: query: %w", v.Name, err)
		}
		expr, ok := labelValuesSelector(q.Query)
		if !ok {
			return nil, fmt.Errorf("dashboard.json: variable %s: %q is not label_values(selector, label)", v.Name, q.Query)
		}
		out = append(out, Query{Where: "dashboard.json: variable " + v.Name, Expr: expr})
	}
	return out, nil
}

type panel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// labelValues is Grafana's label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

func labelValuesSelector(q string) (string, bool) {
	m := labelValues.FindStringSubmatch(q)
	if m == nil {
		return "", false
	}
	return m[1], true
}

var (
	// strings are PromQL's three kinds of string literal.
	stringLiteral = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	// matchers and ranges hold label names, values and durations.
	matchers = regexp.MustCompile(`\{[^}]*\}`)
	ranges   = regexp.MustCompile(`\[[^\]]*\]`)
	// grouping clauses list label names.
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// variables are Grafana's ($name, ${name}, $__interval).
	variables  = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z0-9_]+`)
	identifier = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// keywords are PromQL's words that are neither functions nor metrics.
var keywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
	"group_left", "group_right", "inf", "nan", "atan2", "start", "end"}

// MetricNames returns the metric names expr selects, sorted and each once.
func MetricNames(expr string) []string {
	s := stringLiteral.ReplaceAllString(expr, `""`)
	s = matchers.ReplaceAllString(s, "{}")
	s = ranges.ReplaceAllString(s, "[]")
	s = grouping.ReplaceAllString(s, " ")
	s = variables.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range identifier.FindAllStringIndex(s, -1) {
		if loc[0] > 0 {
			// Part of a number or a duration (5m, 1e3, 0.5e-3).
			if c := s[loc[0]-1]; c >= '0' && c <= '9' || c == '.' {
				continue
			}
		}
		word := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || slices.Contains(keywords, strings.ToLower(word)) {
			continue // a function or an aggregation, or a keyword
		}
		if !slices.Contains(names, word) {
			names = append(names, word)
		}
	}
	slices.Sort(names)
	return names
}
