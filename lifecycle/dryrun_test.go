package lifecycle

import (
	"fmt"
	"strings"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

func TestDryRun(t *testing.T) {
	base := config.Default().Pipelines.ErrorRecovery
	rules := []config.Rule{
		{Name: "rate-limits", Action: config.ActionRetry, Priority: 20,
			Match:  config.RuleMatch{Codes: []config.CodeRange{{From: 429, To: 429}}},
			Policy: config.ErrorRecoveryOverride{Strategy: ptr("fixed"), MinDelay: ptr(2 * time.Second), MaxRetries: ptr(10)}},
		{Name: "orders-auth", Action: config.ActionDegrade, Priority: 50,
			Match: config.RuleMatch{Message: "password authentication failed", Pipelines: []string{"orders-*"}}},
		{Name: "all-5xx", Action: config.ActionRetry, Priority: 10,
			Match:  config.RuleMatch{Codes: []config.CodeRange{{From: 500, To: 599}}},
			Policy: config.ErrorRecoveryOverride{Strategy: ptr("schedule"), Schedule: &[]time.Duration{time.Minute, time.Hour}}},
	}
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	fault := func(pipeline string, code int, msg, actual, rule string) PastFault {
		return PastFault{Fault: Fault{Pipeline: pipeline, Code: code, Class: cerrors.ClassOf(code), Message: msg},
			At: at, ActualAction: actual, ActualRule: rule}
	}
	faults := []PastFault{
		fault("orders-eu", 429, "too many requests", "restart", ""),
		fault("orders-us", 429, "too many requests", "restart", ""),
		fault("orders-us", 0, `FATAL: password authentication failed for user "app"`, "restart", ""),
		fault("billing", 0, `FATAL: password authentication failed for user "app"`, "restart", ""),
		fault("billing", 503, "upstream unavailable", "restart", "old-5xx"),
		fault("billing", 404, "no such table", "degrade", ""),
		fault("billing", 404, "no such table", "degrade", ""),
	}
	rep, err := dryRun(rules, base, faults)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Rules {
		got = append(got, fmt.Sprintf("%s %s [%s] %d %v %v", r.Name, r.Action, r.Schedule, r.Matched, r.Pipelines, r.Actual))
	}
	want := []string{
		"orders-auth degrade [] 1 map[orders-us:1] map[restart:1]",
		"rate-limits retry [fixed 2s, at most 10 retries] 2 map[orders-eu:1 orders-us:1] map[restart:2]",
		"all-5xx retry [schedule [1m0s, 1h0m0s], unlimited retries] 1 map[billing:1] map[restart by rule old-5xx:1]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep.Faults != 7 || rep.Unmatched != 3 || len(rep.UnmatchedKinds) != 2 ||
		rep.UnmatchedKinds[0].Code != 404 || rep.UnmatchedKinds[0].Count != 2 || rep.UnmatchedKinds[1].Pipelines["billing"] != 1 {
		t.Errorf("unmatched: %d of %d, %+v", rep.Unmatched, rep.Faults, rep.UnmatchedKinds)
	}

	bad := []config.Rule{{Name: "clash", Action: config.ActionRetry, Match: config.RuleMatch{Class: "transient"},
		Policy: config.ErrorRecoveryOverride{Strategy: ptr("schedule"), Schedule: &[]time.Duration{}}}}
	if _, err := dryRun(bad, base, faults); err == nil || !strings.Contains(err.Error(), "clash") {
		t.Errorf("a rule that does not compile: %v", err)
	}
}

func TestCodeClass(t *testing.T) {
	for _, tc := range []struct {
		recorded cerrors.Class
		by       cerrors.Source
		code     int
		kind     cerrors.ComponentKind
		want     cerrors.Class
	}{
		{"fatal", "typed", 422, "destination", cerrors.ClassFatal},
		{"fatal", "rule", 503, "source", cerrors.ClassTransient},
		{"transient", "rule", 0, "processor", cerrors.ClassFatal},
		{"transient", "default", 0, "source", cerrors.ClassTransient},
	} {
		if got := CodeClass(tc.recorded, tc.by, tc.code, tc.kind); got != tc.want {
			t.Errorf("%+v: %v", tc, got)
		}
	}
}

func dryRun(rules []config.Rule, base config.ErrorRecovery, faults []PastFault) (DryRunReport, error) {
	d, err := NewDryRunner(rules, base)
	if err != nil {
		return DryRunReport{}, err
	}
	for _, f := range faults {
		d.Add(f)
	}
	return d.Report(), nil
}
