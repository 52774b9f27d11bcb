package main

import (
	"fmt"
	"strings"
	"testing"
)

// sharedDependencyPipelines are n pipelines whose destinations depend on
// one system that goes down for outage (each destination fails every write
// from its 21st record for that long) and comes back.
func sharedDependencyPipelines(n int, outage string) string {
	var b strings.Builder
	b.WriteString("version: \"2.2\"\npipelines:\n")
	for i := range n {
		fmt.Fprintf(&b, `  - id: p%02d
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings: {format.options.id: int, rate: 200}
      - id: db
        type: destination
        plugin: builtin:chaos
        dependency: orders-db
        settings: {path: ./p%02d.jsonl, fail.on: write, fail.after: 20, fail.duration: %s, fail.code: 503, fail.message: orders-db unavailable}
    error-recovery: {min-delay: 200ms, max-delay: 200ms}
`, i, i, outage)
	}
	return b.String()
}

// Ten pipelines share a dependency that goes down and comes back: with the
// breaker, one canary retries it during the outage instead of ten retry
// loops, and all ten run again after it.
func TestTenPipelinesShareABreaker(t *testing.T) {
	t.Parallel()
	restarts := map[bool]int{}
	for _, enabled := range []bool{true, false} {
		w := newWorkspace(t, sharedDependencyPipelines(10, "3s"))
		p := w.start("run", fmt.Sprintf("--pipelines.breakers.enabled=%v", enabled), "--pipelines.breakers.stagger=1s")
		for i := range 10 {
			waitForEvent(t, p, fmt.Sprintf("p%02d", i), "recovered", 1)
		}
		for i := range 10 {
			restarts[enabled] += len(filterEvents(events(t, p, fmt.Sprintf("p%02d", i)), "restarted"))
		}
		if enabled {
			out := p.stderr.String()
			if !strings.Contains(out, "dependency breaker open") || !strings.Contains(out, "dependency breaker closed") {
				t.Errorf("no breaker opened and closed:\n%s", out)
			}
			held := 0
			for i := range 10 {
				for _, e := range filterEvents(events(t, p, fmt.Sprintf("p%02d", i)), "recovering") {
					if e.Reason == "breaker" {
						held++
					}
				}
			}
			if held < 7 {
				t.Errorf("%d held or released events, want at least the seven pipelines after the threshold held", held)
			}
			summary := strings.Join(strings.Fields(w.mustPipelines(apiAddress(t, p), "summary")), " ")
			if !strings.Contains(summary, "recovery success rate: 100%") || !strings.Contains(summary, "restarts by rule: none ") ||
				!strings.Contains(summary, "episodes degraded: 0") || !strings.Contains(summary, "episodes recovered: 10") {
				t.Errorf("summary:\n%s", summary)
			}
		}
		stopProcess(t, p)
	}
	// One canary's loop (3s of 200ms restarts, ~15) plus a restart or two
	// of the pipelines that failed before the breaker opened, against ten
	// loops.
	if restarts[true]*3 > restarts[false] {
		t.Errorf("restarts during the outage: %d with the breaker, %d without; want a third or less", restarts[true], restarts[false])
	}
	t.Logf("restarts during a 3s outage of a dependency shared by 10 pipelines: %d with the breaker, %d without", restarts[true], restarts[false])
}
