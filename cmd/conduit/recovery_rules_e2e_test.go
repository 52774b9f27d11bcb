package main

import (
	"strings"
	"testing"
)

// The managed rules' CLI cycle against a running conduit: a loaded rule
// decides the next fault of a pipeline that runs already; the rules
// survive a restart; bad files change nothing; file rules are read-only.
func TestRecoveryRulesCLICycle(t *testing.T) {
	t.Parallel()
	// A destination that fails every write with 503, retried forever by
	// default with a long delay, so that the pipeline sits in recovering.
	w := newWorkspace(t, chaosPipeline("flaky", "", "fail.on: write\nfail.count: 1000000\nfail.code: 503\nfail.message: upstream unavailable",
		"min-delay: 200ms\nmax-delay: 200ms"))
	w.write("conduit.yml", "log:\n  format: json\n  level: info\npipelines:\n  graceful-stop-timeout: 20s\n  error-recovery:\n    rules:\n      - name: global-429\n        match: {codes: [\"429\"]}\n")
	w.write("degrade-503.yml", `rules:
  - name: give-up-on-503
    match:
      codes: ["503"]
      pipelines: ["flaky"]
    action: degrade
`)
	w.write("bad.yml", "- name: broken\n  match: {codes: [\"429\"]}\n  max-retries: many\n")
	w.write("pipelines/picky.yml", strings.Replace(chaosPipeline("picky", "", pickyDestination, "min-delay: 100ms"), "./out.jsonl", "./picky.jsonl", 1))
	p := w.start("run")
	address := apiAddress(t, p)
	rules := func(args ...string) cliResult {
		return conduitCLI(t, w.dir, cliEnv("CONDUIT_API_HTTP_ADDRESS="+address), append([]string{"recovery-rules"}, args...)...)
	}
	waitForEvent(t, p, "flaky", "recovering", 2)

	// Dry run first: what the rule would have done with the faults so far.
	w.write("other.yml", "- name: only-429\n  match: {codes: [\"429\"]}\n")
	res := rules("dry-run", "degrade-503.yml", "other.yml", "--since", "1h")
	if res.code != 0 {
		t.Fatalf("dry-run: exit %d\n%s", res.code, res.stderr)
	}
	table := dryRunTable(res.stdout)
	row := table["give-up-on-503"]
	if len(row) < 4 || row[1] != "degrade" || row[2] == "0" || row[3] != "flaky" || !strings.Contains(res.stdout, "restart") ||
		!strings.Contains(res.stdout, "Nothing was changed") {
		t.Fatalf("dry-run:\n%s", res.stdout)
	}
	if r := table["only-429"]; len(r) < 3 || r[2] != "0" {
		t.Errorf("a rule that matches nothing: %v\n%s", r, res.stdout)
	}
	if res := rules("dry-run", "other.yml"); !strings.Contains(res.stdout, "No rule matches") || !strings.Contains(res.stdout, "503/transient") {
		t.Errorf("dry-run of rules that match nothing:\n%s", res.stdout)
	}
	if rows := tableRows(rules("list").stdout); rows["give-up-on-503"] != nil {
		t.Fatal("a dry run stored the rule")
	}

	if res := rules("load", "bad.yml"); res.code == 0 || !strings.Contains(res.stderr, "nothing loaded: bad.yml:3: rules[0].max-retries") {
		t.Fatalf("load of a bad rule: exit %d\n%s", res.code, res.stderr)
	}
	if res := rules("load", "degrade-503.yml"); res.code != 0 || !strings.Contains(res.stdout, "loaded 1 rule: give-up-on-503") {
		t.Fatalf("load: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// The running pipeline's next fault is decided by the new rule.
	e := waitForEvent(t, p, "flaky", "degraded", 1)
	if !strings.Contains(p.stderr.String(), `"rule":"give-up-on-503"`) {
		t.Errorf("degraded %+v; the fault does not name the managed rule", e)
	}

	list := rules("list").stdout
	rows := tableRows(list)
	if r := rows["give-up-on-503"]; len(r) < 2 || r[1] != "managed" {
		t.Errorf("list: %q", list)
	}
	if r := rows["global-429"]; len(r) < 2 || r[1] != "file" {
		t.Errorf("list does not show the rule of conduit.yml: %q", list)
	}
	if out := rules("get", "give-up-on-503").stdout; !strings.Contains(out, "action: degrade") || !strings.Contains(out, "- name: give-up-on-503") {
		t.Errorf("get:\n%s", out)
	}
	exported := rules("export").stdout
	if !strings.Contains(exported, "give-up-on-503") || strings.Contains(exported, "global-429") {
		t.Errorf("export has more or less than the managed rules:\n%s", exported)
	}
	if res := rules("delete", "global-429"); res.code == 0 || !strings.Contains(res.stderr, "is defined in conduit.yml:") {
		t.Errorf("delete of a file rule: exit %d\n%s", res.code, res.stderr)
	}
	stopProcess(t, p)

	// Kept across a restart; what export printed loads again.
	p = w.start("run")
	address = apiAddress(t, p)
	if rows := tableRows(rules("list").stdout); rows["give-up-on-503"] == nil {
		t.Fatalf("the managed rule is gone after a restart")
	}
	w.write("exported.yml", exported)
	if res := rules("load", "exported.yml", "--replace-all"); res.code != 0 || !strings.Contains(res.stdout, "replaced: give-up-on-503") {
		t.Errorf("loading the export again: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := rules("delete", "give-up-on-503"); res.code != 0 {
		t.Errorf("delete: exit %d\n%s", res.code, res.stderr)
	}
	if res := rules("delete", "give-up-on-503"); res.code == 0 || !strings.Contains(res.stderr, "not found") {
		t.Errorf("delete twice: exit %d\n%s", res.code, res.stderr)
	}
	rules("load", "degrade-503.yml")
	if res := rules("clear", "-f"); res.code != 0 || !strings.Contains(res.stdout, "1 managed recovery rules deleted") {
		t.Errorf("clear: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if rows := tableRows(rules("list").stdout); rows["give-up-on-503"] != nil || rows["global-429"] == nil {
		t.Errorf("after clear: %v", rows)
	}

	// A rule written after the fact, applied to the pipelines that degraded
	// before it existed: flaky's error matches, picky's (422) does not.
	waitForEvent(t, p, "picky", "resumed", 1)
	// One rule per file, as people write them: a map, not a list.
	w.write("retry-503.yml", "name: retry-503\nmatch: {codes: [\"503\"]}\nstrategy: fixed\nmin-delay: 300ms\n")
	if res := rules("load", "retry-503.yml"); res.code != 0 || !strings.Contains(res.stdout, "loaded 1 rule: retry-503") {
		t.Fatalf("load of a file with one rule: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = rules("apply", "retry-503")
	applied := tableRows(strings.SplitN(res.stdout, "\n\n", 2)[1])
	if res.code != 0 || !strings.Contains(res.stdout, "1 of 2 degraded pipelines restarted") ||
		len(applied["flaky"]) < 3 || applied["flaky"][1] != "recovering" || applied["flaky"][2] != "retry-503" ||
		len(applied["picky"]) < 2 || applied["picky"][1] != "left" {
		t.Fatalf("apply: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(applied["picky"][len(applied["picky"])-1]+strings.Join(applied["picky"], " "), "does not match") {
		t.Errorf("picky is left alone without saying why: %v", applied["picky"])
	}
	e = waitForEvent(t, p, "flaky", "recovering", 1)
	if !strings.Contains(e.Msg, `rule "retry-503" applied by api`) {
		t.Errorf("flaky's recovering event: %q", e.Msg)
	}
	waitForEvent(t, p, "flaky", "restarted", 1)
	if res := rules("apply", "global-429"); res.code == 0 || !strings.Contains(res.stderr, "defined in conduit.yml") {
		t.Errorf("apply of a file rule: exit %d\n%s", res.code, res.stderr)
	}
	stopProcess(t, p)
}

// dryRunTable is the rules table of dry-run's output, by rule.
func dryRunTable(out string) map[string][]string {
	_, rest, _ := strings.Cut(out, "RULE ")
	table, _, _ := strings.Cut("RULE "+rest, "\n\n")
	return tableRows(table)
}
