package monitoring

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// promtool is Prometheus' own checker (Debian's prometheus package; make test
// installs it). Without it the rules are untested, which is a failure.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): install Prometheus' promtool (Debian: apt-get install prometheus) to test the alerting rules", err)
	}
	return path
}

// The rules load in Prometheus, and fire (and stay quiet) as
// alerts.test.yml says.
func TestAlertRulesWithPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts.test.yml"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every alert has a test in alerts.test.yml that sees it fire and one
// that sees it quiet: an alert added without them fails here.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	b, err := os.ReadFile("alerts.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatalf("alerts.test.yml: %v", err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		name, ok := strings.CutPrefix(q.Where, "alerts.yml: alert ")
		if !ok {
			continue
		}
		if !fires[name] {
			t.Errorf("alerts.test.yml never sees %s fire", name)
		}
		if !quiet[name] {
			t.Errorf("alerts.test.yml never sees %s stay quiet", name)
		}
	}
}
