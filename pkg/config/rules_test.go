package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const rulesPipeline = `version: "2.2"
pipelines:
  - id: orders
    connectors:
      - {id: src, type: source, plugin: builtin:generator}
      - {id: dst, type: destination, plugin: builtin:log}
    error-recovery:
      preset: aggressive
      max-retries: 4
      rules:
        - name: rate-limits
          match:
            codes: ["429", 503, "500-502"]
            class: transient
          strategy: fixed
          min-delay: 2s
          max-retries: 10
        - name: bad-password
          match: {message: "password authentication failed", components: ["pg-*"]}
          action: degrade
        - name: partner-feed
          match: {pipelines: orders}
          priority: 500
          strategy: schedule
          schedule: [24h, 168h]
`

func TestRulesInAPipelineFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "p.yml", rulesPipeline)
	ps := loadOK(t, dir)
	rules := ps[0].ErrorRecovery.Rules
	if len(rules) != 3 {
		t.Fatalf("got %d rules, want 3: %+v", len(rules), rules)
	}
	rate := rules[0]
	if rate.Name != "rate-limits" || rate.Action != ActionRetry || rate.Line != 11 {
		t.Errorf("rate-limits rule: %+v", rate)
	}
	wantCodes := []CodeRange{{429, 429}, {503, 503}, {500, 502}}
	if !reflect.DeepEqual(rate.Match.Codes, wantCodes) || rate.Match.Class != "transient" {
		t.Errorf("rate-limits match: %+v", rate.Match)
	}
	if *rate.Policy.Strategy != StrategyFixed || *rate.Policy.MinDelay != 2*time.Second || *rate.Policy.MaxRetries != 10 {
		t.Errorf("rate-limits policy: %+v", rate.Policy)
	}
	if rate.PrioritySet || rate.Priority != rate.Match.Specificity() {
		t.Errorf("rate-limits priority %d (set %v), want its specificity %d", rate.Priority, rate.PrioritySet, rate.Match.Specificity())
	}
	if pw := rules[1]; pw.Action != ActionDegrade || pw.Match.Message != "password authentication failed" || pw.Match.Components[0] != "pg-*" {
		t.Errorf("bad-password rule: %+v", pw)
	}
	if feed := rules[2]; !feed.PrioritySet || feed.Priority != 500 || !reflect.DeepEqual(*feed.Policy.Schedule, []time.Duration{24 * time.Hour, 168 * time.Hour}) ||
		!reflect.DeepEqual(feed.Match.Pipelines, []string{"orders"}) {
		t.Errorf("partner-feed rule: %+v", feed)
	}

	r, err := ps[0].ResolveErrorRecovery(Default().Pipelines.ErrorRecovery)
	if err != nil {
		t.Fatal(err)
	}
	// The preset gives what the pipeline does not set.
	if r.Preset != "aggressive" || r.MaxRetries != 4 || r.MinDelay != 100*time.Millisecond || r.MaxDelay != 10*time.Second {
		t.Errorf("resolved %+v", r)
	}
	wantSources := map[string]string{"preset": "pipeline", "max-retries": "pipeline", "min-delay": "preset aggressive",
		"max-delay": "preset aggressive", "backoff-factor": "preset aggressive", "max-duration": "preset aggressive",
		"jitter": "default", "strategy": "default"}
	for k, want := range wantSources {
		if got := r.Source(k); got != want {
			t.Errorf("source of %s = %q, want %q", k, got, want)
		}
	}
	feed, err := r.ForRule(rules[2])
	if err != nil {
		t.Fatal(err)
	}
	if feed.Strategy != StrategySchedule || len(feed.Schedule) != 2 || feed.MaxRetries != 4 {
		t.Errorf("partner-feed's policy: %+v", feed)
	}
}

// Resolution: pipeline block over global block over preset over default,
// and a global key left at its default does not hide the preset.
func TestPresetResolution(t *testing.T) {
	global := Default().Pipelines.ErrorRecovery
	global.Preset = "conservative"
	global.MaxRetries = 7         // set globally: beats the preset
	global.MinDelay = time.Second // the default value: the preset's 5s wins
	r, err := ErrorRecoveryOverride{MaxDelay: ptr(2 * time.Minute)}.Resolve(global)
	if err != nil {
		t.Fatal(err)
	}
	if r.Preset != "conservative" || r.MaxRetries != 7 || r.MinDelay != 5*time.Second || r.MaxDelay != 2*time.Minute || r.MaxDuration != 15*time.Minute {
		t.Errorf("resolved %+v", r)
	}
	for k, want := range map[string]string{"preset": "global", "max-retries": "global", "min-delay": "preset conservative",
		"max-delay": "pipeline", "max-duration": "preset conservative", "flap-window": "default"} {
		if got := r.Source(k); got != want {
			t.Errorf("source of %s = %q, want %q", k, got, want)
		}
	}
	for _, name := range PresetNames() {
		if _, err := (ErrorRecoveryOverride{Preset: ptr(name)}).Resolve(Default().Pipelines.ErrorRecovery); err != nil {
			t.Errorf("preset %s does not resolve: %v", name, err)
		}
	}
}

func TestBadRulesNameFileLineAndKey(t *testing.T) {
	head := `version: "2.2"
pipelines:
  - id: p
    connectors:
      - {id: src, type: source, plugin: builtin:generator}
      - {id: dst, type: destination, plugin: builtin:log}
    error-recovery:
      rules:
`
	tests := []struct {
		name, rules, want string
	}{
		{"no match", "        - name: r\n          action: degrade\n", `p.yml:9: pipeline "p": error-recovery.rules[0].match: rule "r" matches nothing`},
		{"empty match", "        - name: r\n          match: {}\n", `p.yml:10: pipeline "p": error-recovery.rules[0].match: matches nothing`},
		{"unknown action", "        - name: r\n          match: {codes: [429]}\n          action: explode\n", `p.yml:11: pipeline "p": error-recovery.rules[0].action: must be one of retry, degrade, dead-letter, got "explode"`},
		{"bad glob", "        - name: r\n          match: {pipelines: [\"orders-[\"]}\n", `p.yml:10: pipeline "p": error-recovery.rules[0].match.pipelines[0]: "orders-[" is not a valid glob`},
		{"bad range", "        - name: r\n          match: {codes: [\"599-500\"]}\n", `p.yml:10: pipeline "p": error-recovery.rules[0].match.codes[0]: range "599-500" ends before it starts`},
		{"not a code", "        - name: r\n          match: {codes: [\"4xx\"]}\n", `error-recovery.rules[0].match.codes[0]: "4xx" is not a code (429) or a range (500-599)`},
		{"code out of range", "        - name: r\n          match: {codes: [\"1000\"]}\n", `"1000" is outside the error codes 100-599`},
		{"duplicate names", "        - name: r\n          match: {codes: [429]}\n        - name: r\n          match: {codes: [503]}\n", `p.yml:11: pipeline "p": error-recovery.rules[1].name: rule "r" is defined twice (first at line 9)`},
		{"empty schedule", "        - name: r\n          match: {codes: [429]}\n          strategy: schedule\n          schedule: []\n", `error-recovery.rules[0].schedule: strategy schedule needs at least one delay`},
		{"no name", "        - match: {codes: [429]}\n", `error-recovery.rules[0].name: every rule needs a name`},
		{"unknown key", "        - name: r\n          match: {codes: [429]}\n          max-retry: 3\n", `error-recovery.rules[0].max-retry: unknown field`},
		{"empty message", "        - name: r\n          match: {message: \" \"}\n", `error-recovery.rules[0].match.message: must not be empty`},
		{"bad class", "        - name: r\n          match: {class: flaky}\n", `error-recovery.rules[0].match.class: must be one of transient, fatal, got "flaky"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "p.yml", head+tc.rules)
			_, errs := LoadPipelines(dir)
			if len(errs) != 1 {
				t.Fatalf("got errors %v, want one", errs)
			}
			if !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("error %q does not contain %q", errs[0], tc.want)
			}
		})
	}

	// A rule's min-delay above the pipeline's max-delay moves it: the rule
	// means what it says. Bounds the rule sets itself must agree.
	dir := t.TempDir()
	writeFile(t, dir, "p.yml", head+"        - name: slow\n          match: {codes: [503]}\n          min-delay: 5m\n")
	ps := loadOK(t, dir)
	r, err := ps[0].ResolveErrorRecovery(Default().Pipelines.ErrorRecovery)
	if err != nil {
		t.Fatal(err)
	}
	if slow, err := r.ForRule(r.Rules[0]); err != nil || slow.MinDelay != 5*time.Minute || slow.MaxDelay != 5*time.Minute {
		t.Errorf("rule slow: %+v %v, want min-delay and max-delay 5m", slow, err)
	}
	dir = t.TempDir()
	writeFile(t, dir, "p.yml", head+"        - name: slow\n          match: {codes: [503]}\n          min-delay: 5m\n          max-delay: 1m\n")
	ps = loadOK(t, dir)
	_, err = ps[0].ResolveErrorRecovery(Default().Pipelines.ErrorRecovery)
	if err == nil || !strings.Contains(err.Error(), `p.yml:9: pipeline "p": error-recovery.rules[0].min-delay: 5m must not be greater than max-delay 1m`) {
		t.Errorf("clashing rule: %v", err)
	}
}

func TestGlobalRulesAndScheduleInConduitYML(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "conduit.yml", `
pipelines:
  error-recovery:
    strategy: schedule
    schedule: [1m, 1h, 24h]
    rules:
      - name: our-404
        match: {codes: ["404"], plugins: ["standalone:partner"]}
        action: retry
`)
	cfg, _, err := Load(LoadOptions{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	er := cfg.Pipelines.ErrorRecovery
	if !reflect.DeepEqual(er.Schedule, []time.Duration{time.Minute, time.Hour, 24 * time.Hour}) || er.Strategy != StrategySchedule {
		t.Errorf("schedule %v strategy %s", er.Schedule, er.Strategy)
	}
	if len(er.Rules) != 1 || er.Rules[0].Name != "our-404" || er.Rules[0].File != path || er.Rules[0].Line != 7 {
		t.Errorf("rules %+v", er.Rules)
	}

	// The schedule from the environment, and a schedule strategy without one.
	env := map[string]string{"CONDUIT_PIPELINES_ERROR_RECOVERY_SCHEDULE": "2m, 2h"}
	cfg, _, err = Load(LoadOptions{WorkDir: dir, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil || !reflect.DeepEqual(cfg.Pipelines.ErrorRecovery.Schedule, []time.Duration{2 * time.Minute, 2 * time.Hour}) {
		t.Errorf("schedule from the environment: %v %v", cfg.Pipelines.ErrorRecovery.Schedule, err)
	}
	writeFile(t, dir, "conduit.yml", "pipelines:\n  error-recovery:\n    strategy: schedule\n")
	if _, _, err := Load(LoadOptions{WorkDir: dir}); err == nil || !strings.Contains(err.Error(), "conduit.yml:3") ||
		!strings.Contains(err.Error(), "schedule needs at least one delay") {
		t.Errorf("schedule strategy without a schedule: %v", err)
	}
	writeFile(t, dir, "conduit.yml", "pipelines:\n  error-recovery:\n    rules:\n      - name: x\n        match: {codes: [\"42\"]}\n")
	if _, _, err := Load(LoadOptions{WorkDir: dir}); err == nil || !strings.Contains(err.Error(), "conduit.yml:5") ||
		!strings.Contains(err.Error(), "pipelines.error-recovery.rules[0].match.codes[0]") {
		t.Errorf("bad global rule: %v", err)
	}
}

func TestSpecificityOrdersPreciseRulesFirst(t *testing.T) {
	short := RuleMatch{Message: "timeout"}
	long := RuleMatch{Message: "password authentication failed"}
	component := RuleMatch{Components: []string{"pg-source"}}
	pipelineGlob := RuleMatch{Pipelines: []string{"orders-*"}}
	code := RuleMatch{Codes: []CodeRange{{429, 429}}}
	codeRange := RuleMatch{Codes: []CodeRange{{500, 599}}}
	for _, tc := range []struct {
		name          string
		higher, lower RuleMatch
	}{
		{"long message over short", long, short},
		{"component over short message", component, short},
		{"short message over pipeline glob", short, pipelineGlob},
		{"code over range", code, codeRange},
		{"component over code", component, code},
	} {
		if tc.higher.Specificity() <= tc.lower.Specificity() {
			t.Errorf("%s: %d <= %d", tc.name, tc.higher.Specificity(), tc.lower.Specificity())
		}
	}
}

func TestThereIsRoomForTheSourceOfEveryKey(t *testing.T) {
	if len(errorRecoveryFields) > maxERFields {
		t.Fatalf("%d error-recovery keys, room for the sources of %d: raise maxERFields", len(errorRecoveryFields), maxERFields)
	}
}

// The built-in rules parse, every one degrades and names where it comes
// from, the PostgreSQL ones cover the SQLSTATEs of the example rules and
// 55000, and Kafka's and S3's their clients' error codes.
func TestBuiltinRules(t *testing.T) {
	rules := BuiltinRules()
	names := map[string]Rule{}
	for _, r := range rules {
		if r.Action != ActionDegrade || r.File != BuiltinRulesFile || r.Line == 0 {
			t.Errorf("built-in rule %+v: want action degrade, file %q and a line", r, BuiltinRulesFile)
		}
		names[r.Name] = r
	}
	for name, sqlstate := range map[string]string{"postgres-authentication": "(SQLSTATE 28", "postgres-missing-database": "(SQLSTATE 3D000)",
		"postgres-missing-table": "(SQLSTATE 42P01)", "postgres-permission": "(SQLSTATE 42501)", "postgres-wal-level": "(SQLSTATE 55000)"} {
		r, ok := names[name]
		// For the connector named with or without builtin:, as Conduit
		// resolves both to its PostgreSQL connector.
		if !ok || r.Match.Message != sqlstate || strings.Join(r.Match.Plugins, ",") != "builtin:postgres*,postgres,postgres@*" {
			t.Errorf("built-in rule %s: %+v, want builtin:postgres*, postgres, postgres@* and %q", name, r, sqlstate)
		}
	}
	// Kafka's and S3's match the error codes their clients put in the
	// message, for the connector named with or without builtin:.
	for name, message := range map[string]string{"kafka-authentication": "SASL_AUTHENTICATION_FAILED",
		"kafka-authorization": "_AUTHORIZATION_FAILED", "kafka-unknown-topic": "UNKNOWN_TOPIC_OR_PARTITION",
		"s3-no-such-bucket": "NoSuchBucket", "s3-bucket-not-found": "HeadBucket, https response error StatusCode: 404",
		"s3-bucket-forbidden": "HeadBucket, https response error StatusCode: 403", "s3-credentials": "InvalidAccessKeyId",
		"s3-access-denied": "AccessDenied"} {
		plugin, _, _ := strings.Cut(name, "-")
		r, ok := names[name]
		if want := []string{"builtin:" + plugin + "*", plugin, plugin + "@*"}; !ok || r.Match.Message != message || !slices.Equal(r.Match.Plugins, want) {
			t.Errorf("built-in rule %s: %+v, want plugins %v and %q", name, r, want, message)
		}
	}
	// Each call is a copy of its own.
	rules[0].Name = "changed"
	if BuiltinRules()[0].Name == "changed" {
		t.Error("BuiltinRules returns a shared slice")
	}
}

// examples/rules/*.yml (postgres.yml, kafka.yml, s3.yml) are the built-in
// rules to read and copy: together, the same rules, matching the same
// errors the same way.
func TestExampleRulesAreTheBuiltinOnes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "rules", "*.yml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("example rule files %v (%v), want postgres.yml, kafka.yml and s3.yml", files, err)
	}
	var example []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts, err := ParseRulesFile(filepath.Base(f), data)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range texts {
			example = append(example, fmt.Sprintf("%s %+v %s", rt.Rule.Name, rt.Rule.Match, rt.Rule.Action))
		}
	}
	var builtin []string
	for _, r := range BuiltinRules() {
		builtin = append(builtin, fmt.Sprintf("%s %+v %s", r.Name, r.Match, r.Action))
	}
	slices.Sort(example)
	slices.Sort(builtin)
	if !slices.Equal(example, builtin) {
		t.Errorf("examples/rules/*.yml:\n%s\nbuilt-in:\n%s", strings.Join(example, "\n"), strings.Join(builtin, "\n"))
	}
}
