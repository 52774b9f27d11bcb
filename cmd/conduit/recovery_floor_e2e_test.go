package main

import (
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/config"
)

// A managed rule that asks for no delay at all, applied to a degraded
// pipeline that fails on every start, once restarted it about 1,300 times
// a second. It loads, with a warning, and its restarts wait the floor.
func TestZeroDelayRuleWaitsTheFloor(t *testing.T) {
	t.Parallel()
	// A destination that fails every open with 503, degraded at once.
	w := newWorkspace(t, chaosPipeline("hot", "", "fail.on: open\nfail.count: 1000000000\nfail.code: 503", "max-retries: 0"))
	w.write("conduit.yml", "log:\n  format: json\n  level: info\n")
	// A pipeline file asking for less than the floor is warned about.
	w.write("pipelines/zero.yml", strings.Replace(chaosPipeline("zero", "", "", "min-delay: 0s"), "./out.jsonl", "./zero.jsonl", 1))
	w.write("hot.yml", "- name: restart-everything\n  match: {codes: [\"100-599\"]}\n  strategy: fixed\n  min-delay: 0s\n  max-retries: -1\n")
	p := w.start("run")
	address := apiAddress(t, p)
	rules := func(args ...string) cliResult {
		return conduitCLI(t, w.dir, cliEnv("CONDUIT_API_HTTP_ADDRESS="+address), append([]string{"recovery-rules"}, args...)...)
	}
	waitForEvent(t, p, "hot", "degraded", 1)
	if !strings.Contains(p.stderr.String(), `"msg":"pipeline error-recovery: min-delay 0s below the restart delay floor: restarts wait at least 100ms`) {
		t.Errorf("no warning for the pipeline file's min-delay 0s:\n%s", p.stderr.String())
	}

	res := rules("dry-run", "hot.yml")
	if res.code != 0 || !strings.Contains(res.stdout, "warning: rule restart-everything: min-delay 0s below the restart delay floor: restarts wait at least 100ms") {
		t.Fatalf("dry-run does not warn of the floor: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, "retry: fixed 100ms") {
		t.Errorf("dry-run does not say the rule waits the floor:\n%s", res.stdout)
	}
	if desc := conduitCLI(t, w.dir, cliEnv("CONDUIT_API_HTTP_ADDRESS="+address), "pipelines", "describe", "zero").stdout; !strings.Contains(desc, "0s (pipeline), below the restart delay floor: restarts wait at least 100ms") {
		t.Errorf("describe does not say the pipeline's min-delay is below the floor:\n%s", desc)
	}
	res = rules("load", "hot.yml")
	if res.code != 0 || !strings.Contains(res.stderr, `warning: rule "restart-everything": min-delay 0s below the restart delay floor`) {
		t.Fatalf("load does not warn of the floor: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := rules("list"); !strings.Contains(res.stdout, "warning: rule restart-everything: min-delay 0s") {
		t.Errorf("list does not warn of the floor:\n%s", res.stdout)
	}
	if res := rules("apply", "restart-everything"); res.code != 0 || !strings.Contains(res.stdout, "1 of 1 degraded pipelines restarted") {
		t.Fatalf("apply: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// Every restart the rule decides waits the floor, not 0s.
	for n := 2; n <= 4; n++ {
		e := waitForEvent(t, p, "hot", "recovering", n)
		if d, err := time.ParseDuration(e.Delay); err != nil || d != config.RestartDelayFloor {
			t.Fatalf("recovering event %d waits %q, want the floor %v", n, e.Delay, config.RestartDelayFloor)
		}
	}
	stopProcess(t, p)
}
