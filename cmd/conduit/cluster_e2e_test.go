package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/conduitry/conduit/pkg/pgtest"
)

// clusterPipelineFiles is n generator -> file pipelines, c0 to c<n-1>, each
// writing out-c<i>.jsonl.
func clusterPipelineFiles(n, rate int) string {
	var b strings.Builder
	b.WriteString("version: \"2.2\"\npipelines:\n")
	for i := range n {
		fmt.Fprintf(&b, `  - id: c%d
    status: running
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: %d
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out-c%d.jsonl
`, i, rate, i)
	}
	return b.String()
}

// clusterDatabase is a database of its own for a test on the machine's
// server, whose instances keep to a few connections each: several
// cluster tests run at once, and the server takes a hundred clients.
func clusterDatabase(t *testing.T) string {
	u, err := url.Parse(pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "4")
	u.RawQuery = q.Encode()
	return u.String()
}

// clusterTTL is short, so that failovers happen within the test's patience.
const clusterTTL = 2 * time.Second

// placement is what `conduit pipelines list -o json` says: pipeline id ->
// instance ("" for none) and status.
type placement map[string]struct{ instance, status string }

func (w *workspace) placement(address string) placement {
	w.t.Helper()
	res := w.pipelines(address, "list", "-o", "json")
	if res.code != 0 {
		return nil
	}
	return parsePlacement(w.t, res.stdout)
}

func parsePlacement(t *testing.T, stdout string) placement {
	t.Helper()
	var list struct {
		Pipelines []struct {
			ID       string `json:"id"`
			Instance string `json:"instance"`
			Status   string `json:"status"`
		} `json:"pipelines"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("pipelines list -o json: %v\n%s", err, stdout)
	}
	out := placement{}
	for _, p := range list.Pipelines {
		out[p.ID] = struct{ instance, status string }{p.Instance, p.Status}
	}
	return out
}

// on returns the pipelines the instance runs, sorted.
func (p placement) on(instance string) []string {
	var ids []string
	for id, at := range p {
		if at.instance == instance {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// settled: every pipeline runs, on one of the instances given.
func (p placement) settled(n int, instances ...string) bool {
	if len(p) != n {
		return false
	}
	for _, at := range p {
		if !strings.HasSuffix(at.status, "RUNNING") || !slices.Contains(instances, at.instance) {
			return false
		}
	}
	return true
}

func (w *workspace) waitPlacement(address, why string, ok func(placement) bool) placement {
	w.t.Helper()
	var last placement
	var seen []string // what the last looks found, for the failure
	eventually(w.t, 100*time.Millisecond, func() bool {
		res := w.pipelines(address, "list", "-o", "json")
		last = nil
		if res.code == 0 {
			last = parsePlacement(w.t, res.stdout)
		}
		seen = append(seen, fmt.Sprintf("exit %d %s%v", res.code, strings.TrimSpace(res.stderr), last))
		if len(seen) > 5 {
			seen = seen[1:]
		}
		return last != nil && ok(last)
	}, func() string {
		return fmt.Sprintf("%s: the pipelines are placed %v; the last looks found:\n%s", why, last, strings.Join(seen, "\n"))
	})
	return last
}

// clusterOutputs are the files the pipelines of clusterPipelineFiles write.
func clusterOutputs(w *workspace, n int) []string {
	outs := make([]string, n)
	for i := range outs {
		outs[i] = filepath.Join(w.dir, fmt.Sprintf("out-c%d.jsonl", i))
	}
	return outs
}

// waitForMoreRecords waits until each file holds more records than it
// does now. Every target is taken before the first wait: taken one after
// another's wait, each target would move later by that wait.
func waitForMoreRecords(t *testing.T, p *process, paths []string, more int) {
	t.Helper()
	targets := make([]int, len(paths))
	for i, path := range paths {
		targets[i] = len(ids(t, path)) + more
	}
	for i, path := range paths {
		waitForRecords(t, p, path, targets[i])
	}
}

// Three conduits on one PostgreSQL database share twelve pipelines: each
// runs some; a SIGKILLed one's pipelines move to the others; one paused
// beyond its lease (SIGSTOP) and continued writes nothing its successor
// wrote; one that joins again gets its share back; a second process with
// a live instance's id is refused. The output files show every record
// once, from 1, without a gap: the file destination tells the dedup store
// what it holds, so a move duplicates nothing, and two writers would show
// as duplicates or torn lines.
func TestClusterOfThreeSharesFailsOverAndFences(t *testing.T) {
	t.Parallel()
	const n = 12
	dbURL := clusterDatabase(t)
	w := newWorkspace(t, clusterPipelineFiles(n, 200))
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\n  level: info\ndb:\n  type: postgres\n  postgres:\n    url: %s\n"+
		"cluster:\n  enabled: true\n  lease-ttl: %s\npipelines:\n  graceful-stop-timeout: 10s\n", dbURL, clusterTTL))
	instances := map[string]*process{}
	addresses := map[string]string{}
	start := func(id string) {
		p := w.start("run", "--cluster.instance-id", id)
		instances[id], addresses[id] = p, apiAddress(t, p)
	}
	for _, id := range []string{"i1", "i2", "i3"} {
		start(id)
	}
	logOnFailure(t, instances)

	// Spread: every instance runs a third of them.
	spread := w.waitPlacement(addresses["i1"], "three instances, four pipelines each", func(p placement) bool {
		return p.settled(n, "i1", "i2", "i3") && len(p.on("i1")) == n/3 && len(p.on("i2")) == n/3 && len(p.on("i3")) == n/3
	})
	for i := range n {
		waitForRecords(t, instances["i1"], filepath.Join(w.dir, fmt.Sprintf("out-c%d.jsonl", i)), 50)
	}
	// The same id as a live instance is refused, and changes nothing.
	dup := w.start("run", "--cluster.instance-id", "i2")
	if code := dup.wait(t); code == 0 || !strings.Contains(dup.stderr.String(), "another live conduit instance has this id") {
		t.Fatalf("a second i2: exit %d\n%s", code, dup.stderr.String())
	}
	// So is an instance with another lease TTL.
	other := w.start("run", "--cluster.instance-id", "i4", "--cluster.lease-ttl", "1h")
	if code := other.wait(t); code == 0 || !strings.Contains(other.stderr.String(), "cluster.lease-ttl: every instance of a cluster must have the same cluster.lease-ttl: this one has 1h0m0s") {
		t.Fatalf("an instance with another lease TTL: exit %d\n%s", code, other.stderr.String())
	}

	// SIGKILL i3: its pipelines run on i1 and i2 again, from where they
	// were.
	moved := spread.on("i3")
	if err := instances["i3"].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	instances["i3"].wait(t)
	w.waitPlacement(addresses["i2"], "after i3 was killed", func(p placement) bool {
		return p.settled(n, "i1", "i2") && len(p.on("i1")) == n/2
	})
	movedOuts := make([]string, len(moved))
	for i, id := range moved {
		movedOuts[i] = filepath.Join(w.dir, "out-"+id+".jsonl")
	}
	waitForMoreRecords(t, instances["i1"], movedOuts, 100)
	// The audit log says who stopped renewing the lease, not that a
	// process of the new instance crashed.
	events := w.mustPipelines(addresses["i1"], "events", moved[0], "--kind", "resumed", "-o", "json")
	if !strings.Contains(events, "instance i3 stopped renewing the pipeline's lease") || strings.Contains(events, "crash") {
		t.Fatalf("the resumed events of %s after i3 was killed:\n%s", moved[0], events)
	}

	// SIGSTOP i2 past its lease: i1 takes its pipelines over; continued,
	// i2 finds its leases gone and writes nothing more of them.
	i2 := instances["i2"]
	onI2 := w.placement(addresses["i1"]).on("i2")
	if err := i2.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A stop asked of i2 through i1 meanwhile reaches the pipeline on
	// the instance that takes it over (i1 itself).
	if res := w.pipelines(addresses["i1"], "stop", onI2[0]); res.code != 0 {
		t.Fatalf("stopping %s of the paused i2 through i1: exit %d\n%s", onI2[0], res.code, res.stderr)
	}
	if at := w.placement(addresses["i1"])[onI2[0]]; at.status != "PIPELINE_STATUS_STOPPED" || at.instance != "i1" {
		t.Fatalf("%s after a stop sent while i2 was paused: %+v", onI2[0], at)
	}
	w.mustPipelines(addresses["i1"], "start", onI2[0])
	w.waitPlacement(addresses["i1"], "while i2 is paused", func(p placement) bool { return p.settled(n, "i1") })
	paused := w.placement(addresses["i1"])
	waitForMoreRecords(t, instances["i1"], clusterOutputs(w, n), 100)
	if err := i2.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// i3 joins again (a new process with its id): the three share them
	// again.
	start("i3")
	w.waitPlacement(addresses["i3"], "after i2 continued and i3 joined again", func(p placement) bool {
		return p.settled(n, "i1", "i2", "i3") && len(p.on("i1")) == n/3 && len(p.on("i2")) == n/3 && len(p.on("i3")) == n/3
	})
	if len(paused.on("i1")) != n {
		t.Fatalf("while i2 was paused: %v", paused)
	}
	// Continued, i2 learns it either from its next renewal (the leases
	// are gone) or, when the renewal it had under way when it was paused
	// ran out of time, from the time since its last one.
	if woke := i2.stderr.String(); !strings.Contains(woke, "another instance took over the lease") &&
		!strings.Contains(woke, "this instance's leases could not be renewed for") {
		t.Errorf("i2 does not say it lost its leases:\n%s", woke)
	}
	waitForMoreRecords(t, instances["i1"], clusterOutputs(w, n), 100)

	// A deploy: i3 shuts down (its pipelines are handed over) and starts
	// again (they come back). Meanwhile i1 lists them all the time: every
	// list answers, and none of the moving pipelines shows as stopped.
	var listing sync.WaitGroup
	done := make(chan struct{})
	var problems []string
	through := addresses["i1"]
	listing.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			res := w.pipelines(through, "list", "-o", "json")
			switch {
			case res.code != 0:
				problems = append(problems, "list failed: "+res.stderr)
			case strings.Contains(res.stdout, "PIPELINE_STATUS_STOPPED"):
				problems = append(problems, "a moving pipeline is listed as stopped: "+res.stdout)
			}
		}
	})
	stopProcess(t, instances["i3"])
	w.waitPlacement(addresses["i1"], "after i3 shut down", func(p placement) bool { return p.settled(n, "i1", "i2") })
	start("i3")
	w.waitPlacement(addresses["i1"], "after i3 started again", func(p placement) bool {
		return p.settled(n, "i1", "i2", "i3") && len(p.on("i3")) == n/3
	})
	close(done)
	listing.Wait()
	if len(problems) > 0 {
		t.Errorf("while i3 left and joined again, %d lists through i1 went wrong; the first: %s", len(problems), problems[0])
	}
	for _, id := range []string{"i1", "i2", "i3"} {
		stopProcess(t, instances[id])
	}
	for i := range n {
		checkSequence(t, ids(t, filepath.Join(w.dir, fmt.Sprintf("out-c%d.jsonl", i))), 0)
	}
}

// Two instances on a private PostgreSQL: a restart of the server costs
// them nothing (their pipelines keep or regain their leases), and an
// outage longer than a lease makes both stop their pipelines - before
// the leases could be taken over - and run them again once the server is
// back, every record written once.
func TestClusterRidesOutPostgresRestartAndOutage(t *testing.T) {
	t.Parallel()
	const n = 4
	pg := pgtest.Start(t)
	pg.Exec("CREATE DATABASE conduit")
	w := newWorkspace(t, clusterPipelineFiles(n, 200))
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\n  level: info\ndb:\n  type: postgres\n  postgres:\n    url: %s\n"+
		"cluster:\n  enabled: true\n  lease-ttl: %s\npipelines:\n  graceful-stop-timeout: 10s\n", pg.URL("conduit"), clusterTTL))
	i1 := w.start("run", "--cluster.instance-id", "i1")
	i2 := w.start("run", "--cluster.instance-id", "i2")
	logOnFailure(t, map[string]*process{"i1": i1, "i2": i2})
	address := apiAddress(t, i1)
	w.waitPlacement(address, "two instances", func(p placement) bool { return p.settled(n, "i1", "i2") })
	outs := clusterOutputs(w, n)
	grown := func() {
		t.Helper()
		waitForMoreRecords(t, i1, outs, 100)
	}
	grown()

	pg.Stop()
	pg.Start()
	restarted := time.Now()
	// A restart that outlasts a renewal makes an instance stop its
	// pipelines, which it decides before it renews again: once both have
	// renewed after the restart, every pipeline so stopped shows, and what
	// follows waits for it to run again.
	a2 := apiAddress(t, i2)
	for name, a := range map[string]string{"i1": address, "i2": a2} {
		eventually(t, pollInterval, func() bool { return renewedSince(t, a, name, restarted) }, func() string {
			return name + " did not renew its leases after PostgreSQL restarted:\n" + grepLines(metricsOf(t, a), "conduit_cluster_")
		})
	}
	grown()
	w.waitPlacement(address, "after the restart", func(p placement) bool { return p.settled(n, "i1", "i2") })

	// Counted from here: the restart above may have stopped some already.
	const leaseStopped = `"msg":"pipeline stopped: this instance's leases could not be renewed`
	stoppedSoFar := func() int {
		return strings.Count(i1.stderr.String(), leaseStopped) + strings.Count(i2.stderr.String(), leaseStopped)
	}
	before := stoppedSoFar()
	pg.Stop()
	for _, p := range []*process{i1, i2} {
		eventually(t, pollInterval, func() bool {
			return strings.Contains(p.stderr.String(), "stopping every pipeline of this instance")
		}, func() string {
			return "an instance does not stop its pipelines while PostgreSQL is away:\n" + p.stderr.String()
		})
	}
	// Their in-flight records drain before they stop (on a loaded machine
	// that takes a moment); counted once every pipeline stopped.
	eventually(t, pollInterval, func() bool { return stoppedSoFar() >= before+n }, func() string {
		return fmt.Sprintf("%d of %d pipelines stopped while PostgreSQL is away", stoppedSoFar()-before, n)
	})
	// Away longer than a lease: nothing is written meanwhile.
	counts := make([]int, n)
	for i := range outs {
		counts[i] = len(ids(t, outs[i]))
	}
	time.Sleep(clusterTTL)
	for i := range outs {
		if got := len(ids(t, outs[i])); got != counts[i] {
			t.Errorf("%s grew from %d to %d records while PostgreSQL was away", outs[i], counts[i], got)
		}
	}
	pg.Start()
	w.waitPlacement(address, "after the outage", func(p placement) bool { return p.settled(n, "i1", "i2") })
	grown()
	// Every event written through the restart and the outage is there (a
	// write waits for the server), and none says a process crashed.
	for i := range n {
		out := w.mustPipelines(address, "events", fmt.Sprintf("c%d", i), "--limit", "1000", "-o", "json")
		var last uint64
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var e struct {
				Sequence uint64 `json:"sequence,string"`
				Message  string `json:"message"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("events of c%d: %v\n%s", i, err, out)
			}
			if e.Sequence != last+1 || strings.Contains(e.Message, "crash") {
				t.Fatalf("events of c%d: #%d after #%d, %q:\n%s", i, e.Sequence, last, e.Message, out)
			}
			last = e.Sequence
		}
	}
	stopProcess(t, i1)
	stopProcess(t, i2)
	for i := range outs {
		checkSequence(t, ids(t, outs[i]), 0)
	}
}

// Any instance shows every pipeline and acts on it: a stop and a start
// sent to the instance that does not run a pipeline reach the one that
// does; a refusal comes back as it would from the owner; a follower on
// one instance sees the events the other writes; a pipeline applied
// through one instance runs on whichever it belongs to, and is listed by
// both.
func TestClusterOneView(t *testing.T) {
	t.Parallel()
	const n = 4
	w := newWorkspace(t, clusterPipelineFiles(n, 100))
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\n  level: info\ndb:\n  type: postgres\n  postgres:\n    url: %s\n"+
		"cluster:\n  enabled: true\n  lease-ttl: %s\n", clusterDatabase(t), clusterTTL))
	i1 := w.start("run", "--cluster.instance-id", "i1")
	i2 := w.start("run", "--cluster.instance-id", "i2")
	a1, a2 := apiAddress(t, i1), apiAddress(t, i2)
	// Balanced, not only settled: a pipeline still due to move to i1
	// would make the stop below reach an instance the test does not expect.
	placed := w.waitPlacement(a1, "two instances, two pipelines each", func(p placement) bool {
		return p.settled(n, "i1", "i2") && len(p.on("i1")) == n/2 && len(p.on("i2")) == n/2
	})
	id, other := placed.on("i2")[0], placed.on("i2")[1]

	// A follower of every pipeline on i1, started first so that it is
	// watching by the time the stops below are written on i2.
	everyFollower := w.follow(cliEnv("CONDUIT_API_HTTP_ADDRESS="+a1), "--all")
	follower := w.follow(cliEnv("CONDUIT_API_HTTP_ADDRESS="+a1), id)
	w.mustPipelines(a1, "stop", id)
	if at := w.placement(a2)[id]; at.status != "PIPELINE_STATUS_STOPPED" || at.instance != "i2" {
		t.Fatalf("%s after a stop through i1, as i2 lists it: %+v", id, at)
	}
	follower.waitForLine(t, `#[0-9]+ +stopped +stopped -> stopped +by user`)
	if res := w.pipelines(a1, "stop", id); res.code == 0 || !strings.Contains(res.stderr, "cannot stop a stopped pipeline") {
		t.Fatalf("stopping a stopped pipeline through i1: exit %d\n%s", res.code, res.stderr)
	}
	w.mustPipelines(a1, "start", id)
	follower.waitForLine(t, `#[0-9]+ +running +running -> running +by user`)
	// other is watched on i1 by nobody but the follower of every pipeline.
	w.mustPipelines(a1, "stop", other)
	// The events i2 wrote of other before the follower started, which i1
	// had not read, are history: only the stop is news.
	for _, l := range everyFollower.waitForLine(t, `^`+regexp.QuoteMeta(other)+` .*#[0-9]+ +stopped +stopped -> stopped +by user`) {
		if strings.HasPrefix(l, other+" ") && !regexp.MustCompile(`#[0-9]+ +(stopping|stopped) `).MatchString(l) {
			t.Fatalf("the follower of every pipeline printed an event of %s from before it started: %q", other, l)
		}
	}
	w.mustPipelines(a1, "start", other)
	if at := w.placement(a1)[id]; at.status != "PIPELINE_STATUS_RUNNING" || at.instance != "i2" {
		t.Fatalf("%s after a start through i1: %+v", id, at)
	}

	w.write("applied.yml", strings.Replace(clusterPipelineFiles(1, 100), "c0", "applied", -1))
	w.mustPipelines(a1, "apply", "applied.yml")
	// A new pipeline may move another one: wait for the balance (three and
	// two), which the metrics below are compared with.
	w.waitPlacement(a2, "after an apply through i1", func(p placement) bool {
		on1 := len(p.on("i1"))
		return p.settled(n+1, "i1", "i2") && (on1 == n/2 || on1 == n/2+1)
	})
	waitForRecords(t, i1, filepath.Join(w.dir, "out-applied.jsonl"), 50)

	// Each instance's metrics are its own pipelines' and its part. The
	// lease gauge follows the lease loop's rounds, so it is read until it
	// agrees with the placement read just before it.
	addresses := map[string]string{"i1": a1, "i2": a2}
	var final placement
	bodies := map[string]string{}
	eventually(t, pollInterval, func() bool {
		final = w.placement(a1)
		agree := true
		for name, address := range addresses {
			bodies[name] = metricsOf(t, address)
			agree = agree && strings.Contains(bodies[name], fmt.Sprintf(`conduit_cluster_leases{instance_id=%q} %d`, name, len(final.on(name))))
		}
		return agree
	}, func() string {
		return fmt.Sprintf("the instances' lease gauges never agreed with the placement:\n%s\n%s",
			grepLines(bodies["i1"], "conduit_cluster_leases"), grepLines(bodies["i2"], "conduit_cluster_leases"))
	})
	for name, body := range bodies {
		if !strings.Contains(body, fmt.Sprintf(`conduit_cluster_live_instances{instance_id=%q} 2`, name)) {
			t.Errorf("%s's /metrics do not say two instances are live:\n%s", name, grepLines(body, "conduit_cluster_"))
		}
		for _, other := range final.on(map[string]string{"i1": "i2", "i2": "i1"}[name]) {
			if strings.Contains(body, fmt.Sprintf(`pipeline_id=%q`, other)) {
				t.Errorf("%s's /metrics have series of %s, which the other instance runs", name, other)
			}
		}
	}
	// Renewing every fifth of the TTL, each renewed within the last one.
	for name, address := range addresses {
		if !renewedSince(t, address, name, time.Now().Add(-clusterTTL)) {
			t.Errorf("%s did not renew its leases in the last %s:\n%s", name, clusterTTL, grepLines(metricsOf(t, address), "conduit_cluster_"))
		}
	}
	stopProcess(t, i1)
	stopProcess(t, i2)
}

// metricsOf returns the /metrics of the conduit at address.
func metricsOf(t *testing.T, address string) string {
	t.Helper()
	resp, err := http.Get("http://" + address + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(body)
}

// renewedSince reports whether the instance at address last renewed its
// leases after since (conduit_cluster_lease_renewal_age_seconds).
func renewedSince(t *testing.T, address, instance string, since time.Time) bool {
	t.Helper()
	prefix := fmt.Sprintf("conduit_cluster_lease_renewal_age_seconds{instance_id=%q} ", instance)
	for _, line := range strings.Split(metricsOf(t, address), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			age, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return time.Duration(age*float64(time.Second)) < time.Since(since)
		}
	}
	t.Fatalf("no %s in the /metrics of %s", strings.TrimSpace(prefix), instance)
	return false
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A recovering pipeline whose instance is killed keeps its schedule on
// the instance that takes it over: the next attempt is the one its first
// instance set, not a new backoff from the takeover.
func TestClusterFailoverKeepsTheNextAttempt(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("flaky", "fail.on: read\nfail.after: 5\nfail.count: 1000\nfail.code: 503", "",
		"min-delay: 1m\nmax-delay: 1m"))
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\n  level: info\ndb:\n  type: postgres\n  postgres:\n    url: %s\n"+
		"cluster:\n  enabled: true\n  lease-ttl: %s\n", clusterDatabase(t), clusterTTL))
	procs := map[string]*process{"i1": w.start("run", "--cluster.instance-id", "i1"), "i2": w.start("run", "--cluster.instance-id", "i2")}
	addresses := map[string]string{"i1": apiAddress(t, procs["i1"]), "i2": apiAddress(t, procs["i2"])}
	type schedule struct{ instance, status, next string }
	read := func(address string) schedule {
		res := w.pipelines(address, "list", "-o", "json")
		var list struct {
			Pipelines []struct {
				Instance    string `json:"instance"`
				Status      string `json:"status"`
				NextAttempt string `json:"next_attempt_at"`
			} `json:"pipelines"`
		}
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &list) != nil || len(list.Pipelines) != 1 {
			return schedule{}
		}
		p := list.Pipelines[0]
		return schedule{p.Instance, p.Status, p.NextAttempt}
	}
	// Both instances live first: the pipeline is not moved (handed over,
	// which starts it anew) between the reading and the kill below.
	for id, address := range addresses {
		eventually(t, 100*time.Millisecond, func() bool {
			resp, err := http.Get("http://" + address + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return strings.Contains(string(body), fmt.Sprintf("conduit_cluster_live_instances{instance_id=%q} 2", id))
		}, func() string { return id + " does not see two live instances" })
	}
	var before schedule
	eventually(t, 100*time.Millisecond, func() bool {
		before = read(addresses["i1"])
		return before.status == "PIPELINE_STATUS_RECOVERING" && before.next != "" && before.instance != ""
	}, func() string { return fmt.Sprintf("flaky is not recovering on an instance: %+v", before) })
	survivor := map[string]string{"i1": "i2", "i2": "i1"}[before.instance]
	// A dry run through the instance that does not run it counts its
	// faults, which the other instance wrote.
	w.write("degrade-503.yml", "- name: give-up-on-503\n  match: {codes: [\"503\"]}\n  action: degrade\n")
	res := conduitCLI(t, w.dir, cliEnv("CONDUIT_API_HTTP_ADDRESS="+addresses[survivor]), "recovery-rules", "dry-run", "degrade-503.yml")
	if row := dryRunTable(res.stdout)["give-up-on-503"]; res.code != 0 || len(row) < 4 || row[2] == "0" || row[3] != "flaky" {
		t.Fatalf("a dry run through %s, which does not run flaky: exit %d\n%s%s", survivor, res.code, res.stdout, res.stderr)
	}
	if err := procs[before.instance].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var after schedule
	eventually(t, 100*time.Millisecond, func() bool {
		after = read(addresses[survivor])
		return after.instance == survivor
	}, func() string { return fmt.Sprintf("flaky did not move to %s: %+v", survivor, after) })
	if after.status != "PIPELINE_STATUS_RECOVERING" || after.next != before.next {
		t.Fatalf("flaky on %s: %+v, want recovering with the next attempt %s its first instance set", survivor, after, before.next)
	}
	// The list shows the survivor once it holds the lease, which is just
	// before it takes the pipeline up and says so.
	eventually(t, pollInterval, func() bool {
		return strings.Contains(procs[survivor].stderr.String(), "next attempt at its persisted time")
	}, func() string {
		return fmt.Sprintf("%s does not say it kept the persisted attempt:\n%s", survivor, procs[survivor].stderr.String())
	})
	stopProcess(t, procs[survivor])
}

// Instances given different pipeline files: each pipeline runs on an
// instance that knows it - the one only i1 knows on i1, none on i3, whose
// pipelines.path is empty - and after two lease TTLs they say that their
// files differ (log and metric); once the files agree again, so do the
// views, and the spread is even.
func TestClusterInstancesWithDifferentPipelines(t *testing.T) {
	t.Parallel()
	const n = 6
	w := newWorkspace(t, clusterPipelineFiles(n, 100))
	w.write("pipelines-b/c.yml", clusterPipelineFiles(n-1, 100))
	w.write("pipelines-empty/README", "no pipeline files here")
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\n  level: info\ndb:\n  type: postgres\n  postgres:\n    url: %s\n"+
		"cluster:\n  enabled: true\n  lease-ttl: %s\n", clusterDatabase(t), clusterTTL))
	i1 := w.start("run", "--cluster.instance-id", "i1")
	i2 := w.start("run", "--cluster.instance-id", "i2", "--pipelines.path", "pipelines-b")
	i3 := w.start("run", "--cluster.instance-id", "i3", "--pipelines.path", "pipelines-empty")
	a1, a2, a3 := apiAddress(t, i1), apiAddress(t, i2), apiAddress(t, i3)

	differ := func(address, id string, want int) func() bool {
		return func() bool {
			resp, err := http.Get("http://" + address + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return strings.Contains(string(body), fmt.Sprintf("conduit_cluster_views_differ{instance_id=%q} %d", id, want))
		}
	}
	for id, address := range map[string]string{"i1": a1, "i2": a2, "i3": a3} {
		eventually(t, 100*time.Millisecond, differ(address, id, 1), func() string {
			return id + " does not report that the views differ"
		})
	}
	// What a process logged reaches its stderr buffer through a pipe, a
	// moment after the metric that follows it can be read.
	for _, p := range []*process{i1, i2, i3} {
		eventually(t, pollInterval, func() bool { return strings.Contains(p.stderr.String(), "do not know the same pipelines") },
			func() string {
				return "an instance does not warn that the pipeline files differ:\n" + p.stderr.String()
			})
	}
	// Every pipeline runs, on an instance that knows it.
	w.waitPlacement(a1, "pipelines known to some instances", func(p placement) bool {
		return p.settled(n, "i1", "i2") && p[fmt.Sprintf("c%d", n-1)].instance == "i1"
	})
	for i := range n {
		waitForRecords(t, i1, filepath.Join(w.dir, fmt.Sprintf("out-c%d.jsonl", i)), 20)
	}
	// One view all the same: i3, which knows none, lists them all, and i2
	// lists the one only i1 has, and stops and starts it.
	only := fmt.Sprintf("c%d", n-1)
	w.waitPlacement(a3, "as i3 lists them", func(p placement) bool { return p.settled(n, "i1", "i2") })
	w.waitPlacement(a2, "as i2 lists them", func(p placement) bool { return p.settled(n, "i1", "i2") && p[only].instance == "i1" })
	if out := w.mustPipelines(a2, "list"); !strings.Contains(out, "pipeline files of instance i1 ") {
		t.Errorf("i2 does not say whose files define %s:\n%s", only, out)
	}
	w.mustPipelines(a2, "stop", only)
	if at := w.placement(a1)[only]; at.status != "PIPELINE_STATUS_STOPPED" {
		t.Fatalf("%s after a stop through i2: %+v", only, at)
	}
	w.mustPipelines(a2, "start", only)

	// i1 dies: the pipeline only its files had runs nowhere, and the
	// others still list it, saying so; a start is refused, naming why.
	if err := i1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	i1.wait(t)
	w.waitPlacement(a2, "after i1 died", func(p placement) bool {
		others := placement{}
		for id, at := range p {
			if id != only {
				others[id] = at
			}
		}
		at, ok := p[only]
		return ok && at.instance == "" && others.settled(n-1, "i2")
	})
	if out := w.mustPipelines(a2, "list"); !strings.Contains(out, "no live instance has its pipeline file (instance i1 ran it last)") {
		t.Errorf("i2 does not say that no live instance has %s:\n%s", only, out)
	}
	if res := w.pipelines(a2, "start", only); res.code == 0 || !strings.Contains(res.stderr, "runs nowhere") {
		t.Errorf("a start of %s with no live instance that has it: exit %d\n%s", only, res.code, res.stderr)
	}
	i1 = w.start("run", "--cluster.instance-id", "i1")
	a1 = apiAddress(t, i1)

	// The files agree again: the views do, and the spread is even.
	stopProcess(t, i3)
	w.write("pipelines-b/c.yml", clusterPipelineFiles(n, 100))
	for id, address := range map[string]string{"i1": a1, "i2": a2} {
		eventually(t, 100*time.Millisecond, differ(address, id, 0), func() string {
			return id + " still reports that the views differ"
		})
	}
	w.waitPlacement(a1, "the same pipelines everywhere", func(p placement) bool {
		return p.settled(n, "i1", "i2") && len(p.on("i1")) == n/2
	})
	stopProcess(t, i1)
	stopProcess(t, i2)
}

// A pipeline file removed from one instance only: the pipeline is handed
// over to the instance that still has it, with its state (a stopped
// pipeline stays stopped), not deleted; removed from every instance, it
// is deleted.
func TestClusterPipelineRemovedFromOneInstance(t *testing.T) {
	t.Parallel()
	const n = 4
	w := newWorkspace(t, "")
	for i := range n {
		file := strings.ReplaceAll(clusterPipelineFiles(1, 100), "c0", fmt.Sprintf("c%d", i))
		w.write(fmt.Sprintf("pipelines-a/c%d.yml", i), file)
		w.write(fmt.Sprintf("pipelines-b/c%d.yml", i), file)
	}
	dbURL := clusterDatabase(t)
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\n  level: info\ndb:\n  type: postgres\n  postgres:\n    url: %s\n"+
		"cluster:\n  enabled: true\n  lease-ttl: %s\n", dbURL, clusterTTL))
	i1 := w.start("run", "--cluster.instance-id", "i1", "--pipelines.path", "pipelines-a",
		// The last files are removed on purpose: no held mass deletion.
		"--pipelines.allow-delete-all")
	i2 := w.start("run", "--cluster.instance-id", "i2", "--pipelines.path", "pipelines-b", "--pipelines.allow-delete-all")
	logOnFailure(t, map[string]*process{"i1": i1, "i2": i2})
	a1 := apiAddress(t, i1)
	apiAddress(t, i2)
	placed := w.waitPlacement(a1, "two instances", func(p placement) bool {
		return p.settled(n, "i1", "i2") && len(p.on("i2")) == n/2
	})
	target := placed.on("i2")[0]
	w.mustPipelines(a1, "stop", target)

	if err := os.Remove(filepath.Join(w.dir, "pipelines-b", target+".yml")); err != nil {
		t.Fatal(err)
	}
	w.waitPlacement(a1, "after its file was removed from i2", func(p placement) bool {
		at, ok := p[target]
		return ok && at.instance == "i1" && at.status == "PIPELINE_STATUS_STOPPED"
	})
	if events := w.mustPipelines(a1, "events", target, "-o", "json"); strings.Contains(events, `"kind":"deleted"`) {
		t.Fatalf("%s was deleted when its file was removed from one instance:\n%s", target, events)
	}
	eventually(t, pollInterval, func() bool {
		return strings.Contains(i2.stderr.String(), "other instances still have it: handing it over, not deleting it")
	}, func() string {
		return fmt.Sprintf("i2 does not say why it did not delete %s:\n%s", target, i2.stderr.String())
	})

	if err := os.Remove(filepath.Join(w.dir, "pipelines-a", target+".yml")); err != nil {
		t.Fatal(err)
	}
	w.waitPlacement(a1, "after its file was removed everywhere", func(p placement) bool {
		_, listed := p[target]
		return !listed && len(p) == n-1
	})
	eventually(t, pollInterval, func() bool {
		return strings.Contains(i1.stderr.String(), `"msg":"pipeline deleted: stopping it","pipeline_id":"`+target+`"`)
	}, func() string { return "i1 does not delete " + target + ":\n" + i1.stderr.String() })

	// The other files removed from both instances at once: whichever
	// instance runs each hands it over (the other still had it when it
	// looked), and yet every one is deleted - none left running unlisted,
	// none left listed - and no lease is left.
	for i := range n {
		if id := fmt.Sprintf("c%d", i); id != target {
			for _, dir := range []string{"pipelines-a", "pipelines-b"} {
				if err := os.Remove(filepath.Join(w.dir, dir, id+".yml")); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, address := range []string{a1, apiAddress(t, i2)} {
		w.waitPlacement(address, "after every file was removed from both", func(p placement) bool { return len(p) == 0 })
	}
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	conn, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	eventually(t, pollInterval, func() bool {
		var leases int
		return conn.QueryRow(ctx, `SELECT count(*) FROM conduit_leases`).Scan(&leases) == nil && leases == 0
	}, func() string { return "leases are left of pipelines deleted from every instance" })
	stopProcess(t, i1)
	stopProcess(t, i2)
}

// logOnFailure shows the instances' output when the test fails, with
// the stacks of their goroutines (SIGQUIT) for a process that still runs.
func logOnFailure(t *testing.T, instances map[string]*process) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for id, p := range instances {
			if p.cmd.ProcessState == nil && p.cmd.Process.Signal(syscall.SIGQUIT) == nil {
				select {
				case err := <-p.done:
					p.done <- err // for the process's own cleanup
				case <-time.After(10 * time.Second):
				}
			}
			t.Logf("output of %s:\n%s", id, p.stderr.String())
		}
	})
}
