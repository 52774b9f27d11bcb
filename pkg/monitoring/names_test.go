package monitoring

import (
	"slices"
	"strings"
	"testing"
)

func TestMetricNamesSkipsEverythingButMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		want       []string
	}{
		{"selector with matchers", `conduit_pipeline_status{status="degraded", pipeline_id=~"a|b"} == 1`, []string{"conduit_pipeline_status"}},
		{"functions, ranges, grouping and numbers",
			`sum by (pipeline_id, rule) (increase(conduit_records_dead_lettered_total[10m] offset 5m)) > 1e3 * 0.5`,
			[]string{"conduit_records_dead_lettered_total"}},
		{"binary operation with ignoring and time()",
			`(time() - conduit_pipeline_status_since_timestamp_seconds) > 15 * 60 and ignoring(status) conduit_pipeline_status{status="recovering"} == 1`,
			[]string{"conduit_pipeline_status", "conduit_pipeline_status_since_timestamp_seconds"}},
		{"grafana variables and a string with a brace", `rate(process_cpu_seconds_total{instance=~"$instance",x="}"}[$__rate_interval]) or vector(0)`,
			[]string{"process_cpu_seconds_total"}},
		{"group_left with labels, on", `a_total * on (pipeline_id) group_left (rule) b_total unless c`, []string{"a_total", "b_total", "c"}},
		{"a keyword in capitals is not a metric", `x AND y`, []string{"x", "y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MetricNames(tc.expr); !slices.Equal(got, tc.want) {
				t.Errorf("MetricNames(%s) = %v, want %v", tc.expr, got, tc.want)
			}
		})
	}
}

// Every rule and every panel has a query, and the queries name the
// metrics the alerts are about.
func TestQueriesCoverTheRulesAndTheDashboard(t *testing.T) {
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	var rules, panels, variables int
	for _, q := range qs {
		switch {
		case strings.HasPrefix(q.Where, "alerts.yml: alert "):
			rules++
		case strings.HasPrefix(q.Where, "dashboard.json: panel "):
			panels++
		case strings.HasPrefix(q.Where, "dashboard.json: variable "):
			variables++
		}
		for _, n := range MetricNames(q.Expr) {
			names[n] = true
		}
	}
	if rules < 13 || panels < 20 || variables != 2 {
		t.Errorf("%d alert rules, %d panel queries, %d variables: the files lost some", rules, panels, variables)
	}
	for _, want := range []string{"conduit_pipeline_status", "conduit_pipeline_status_since_timestamp_seconds", "conduit_pipeline_restarts_total",
		"conduit_dependency_breaker_open", "conduit_records_dead_lettered_total", "conduit_store_write_failures_total",
		"conduit_audit_write_failures_total", "conduit_cluster_leases_lost_total", "conduit_cluster_lease_renewal_failures_total"} {
		if !names[want] {
			t.Errorf("no query names %s", want)
		}
	}
}
