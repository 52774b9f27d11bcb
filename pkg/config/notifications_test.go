package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestNotificationTargetsLoad(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "conduit.yml", `
notifications:
  group-window: 2s
  targets:
    - name: ops-slack
      kind: slack
      url-env: SLACK_URL
      events: [degraded, recovered]
      pipelines: ["orders-*"]
      min-severity: warning
    - name: oncall
      kind: pagerduty
      routing-key-env: PD_KEY
`)
	cfg, _, err := Load(LoadOptions{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ts := cfg.Notifications.Targets
	if len(ts) != 2 || ts[0].Name != "ops-slack" || ts[0].Kind != NotifySlack || ts[0].URLEnv != "SLACK_URL" ||
		strings.Join(ts[0].Events, ",") != "degraded,recovered" || ts[0].Pipelines[0] != "orders-*" ||
		ts[0].MinSeverity != SeverityWarning || ts[0].Line != 5 || ts[1].RoutingKeyEnv != "PD_KEY" {
		t.Fatalf("targets = %+v", ts)
	}
	if cfg.Notifications.GroupWindow.String() != "2s" {
		t.Errorf("group-window = %v", cfg.Notifications.GroupWindow)
	}

	env := map[string]string{"SLACK_URL": "https://hooks.slack.test/services/T0/B0/secret-token", "PD_KEY": "routing-secret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	r, err := ts[0].Resolve(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if r.URL.Reveal() != env["SLACK_URL"] {
		t.Errorf("URL = %q", r.URL.Reveal())
	}
	// A resolved target printed any way shows no secret.
	for _, text := range []string{fmt.Sprint(r), fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r), fmt.Sprintf("%v", r.URL)} {
		if strings.Contains(text, "secret") {
			t.Errorf("printed target leaks its secret: %s", text)
		}
	}
	pd, err := ts[1].Resolve(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if pd.URL.Reveal() != PagerDutyEventsURL || pd.RoutingKey.Reveal() != "routing-secret" {
		t.Errorf("pagerduty = %q %q", pd.URL.Reveal(), pd.RoutingKey.Reveal())
	}

	settings, _, _, err := Settings(LoadOptions{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range settings {
		if s.Key == "notifications.targets" {
			found = true
			if s.Value != "[ops-slack (slack), oncall (pagerduty)]" || !strings.HasSuffix(s.Source, "conduit.yml:5") {
				t.Errorf("setting = %+v", s)
			}
		}
	}
	if !found {
		t.Error("conduit config does not show notifications.targets")
	}
}

func TestNotificationTargetResolveErrors(t *testing.T) {
	target := NotificationTarget{Name: "hook", Kind: NotifyWebhook, URLEnv: "HOOK_URL", File: "conduit.yml", Line: 7}
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unset", nil, "conduit.yml:7: notifications.targets[hook].url-env: environment variable HOOK_URL is not set"},
		{"not a url", map[string]string{"HOOK_URL": "hooks.example.com/x"}, "is not a URL"},
		{"http to another host", map[string]string{"HOOK_URL": "http://hooks.example.com/x"}, "use https://"},
		{"ftp", map[string]string{"HOOK_URL": "ftp://hooks.example.com/x"}, "is not an http:// or https:// URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := target.Resolve(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hooks.example.com") {
				t.Errorf("error quotes the secret URL: %v", err)
			}
		})
	}
	for _, ok := range []string{"https://hooks.example.com/x", "http://127.0.0.1:9/x", "http://localhost:9/x"} {
		if _, err := target.Resolve(func(string) (string, bool) { return ok, true }); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestNotificationTargetsBadConfig(t *testing.T) {
	tests := []struct {
		name, targets, want string
	}{
		{"url in the file", "    - name: a\n      kind: webhook\n      url: https://x\n",
			"conduit.yml:6: notifications.targets[0].url: secrets are not written in the file"},
		{"unknown kind", "    - name: a\n      kind: teams\n      url-env: X\n",
			"conduit.yml:5: notifications.targets[0].kind: must be one of webhook, slack, pagerduty"},
		{"unknown event", "    - name: a\n      kind: webhook\n      url-env: X\n      events: [degrade]\n",
			"conduit.yml:7: notifications.targets[0].events[0]: unknown event; did you mean \"degraded\"?"},
		{"secret as env name", "    - name: a\n      kind: webhook\n      url-env: https://hooks.example.com\n",
			"conduit.yml:6: notifications.targets[0].url-env: \"https://hooks.example.com\" is not an environment variable name"},
		{"missing url-env", "    - name: a\n      kind: slack\n",
			"conduit.yml:4: notifications.targets[0].url-env: required"},
		{"pagerduty without key", "    - name: a\n      kind: pagerduty\n",
			"conduit.yml:4: notifications.targets[0].routing-key-env: required for pagerduty"},
		{"duplicate name", "    - name: a\n      kind: slack\n      url-env: X\n    - name: a\n      kind: slack\n      url-env: Y\n",
			"conduit.yml:7: notifications.targets[1].name: \"a\" is used twice (first at line 4)"},
		{"bad glob", "    - name: a\n      kind: slack\n      url-env: X\n      pipelines: [\"[a\"]\n",
			"notifications.targets[0].pipelines[0]"},
		{"unknown field", "    - name: a\n      kind: slack\n      url-env: X\n      severity: warning\n",
			"conduit.yml:7: notifications.targets[0].severity: unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "conduit.yml", "\nnotifications:\n  targets:\n"+tc.targets)
			_, _, err := Load(LoadOptions{WorkDir: dir})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// A pipeline file's notifications block narrows who hears of the pipeline;
// its mistakes are errors naming file, line and field.
func TestPipelineNotificationsBlock(t *testing.T) {
	const head = `version: "2.2"
pipelines:
  - id: orders
    connectors:
      - {id: src, type: source, plugin: builtin:generator, settings: {format.options.id: int}}
      - {id: dst, type: destination, plugin: builtin:log}
`
	dir := t.TempDir()
	writeFile(t, dir, "p.yml", head+"    notifications:\n      targets: [oncall, ops-slack]\n      events: [degraded, recovered]\n")
	ps, errs := LoadPipelines(dir)
	if len(errs) != 0 || len(ps) != 1 {
		t.Fatalf("%v %v", ps, errs)
	}
	n := ps[0].Notifications
	if strings.Join(n.Targets, ",") != "oncall,ops-slack" || strings.Join(n.Events, ",") != "degraded,recovered" {
		t.Fatalf("notifications = %+v", n)
	}
	defined := []NotificationTarget{{Name: "oncall"}, {Name: "ops-slack"}}
	if err := n.CheckTargets(defined); err != nil {
		t.Errorf("CheckTargets: %v", err)
	}
	if err := n.CheckTargets(defined[:1]); err == nil || !strings.Contains(err.Error(), `no notification target "ops-slack" in conduit.yml (it defines oncall)`) {
		t.Errorf("CheckTargets with ops-slack missing: %v", err)
	}

	for _, tc := range []struct{ block, want string }{
		{"    notifications:\n      events: [paged]\n", `p.yml:8: pipeline "orders": notifications.events[0]`},
		{"    notifications:\n      targets: [\"Not A Name\"]\n", `p.yml:8: pipeline "orders": notifications.targets[0]`},
		{"    notifications:\n      email: me@example.com\n", `p.yml:8: pipeline "orders": notifications.email: unknown key`},
		{"    notifications: [oncall]\n", `p.yml:7: pipeline "orders": notifications: expected a map`},
	} {
		writeFile(t, dir, "p.yml", head+tc.block)
		_, errs := LoadPipelines(dir)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.block, errs, tc.want)
		}
	}
}
