package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/monitoring"
)

// prometheusOwn are the series Prometheus writes itself for every target
// it scrapes; an alert may use them, a dashboard panel never does.
var prometheusOwn = []string{"up"}

// The alerting rules and the dashboard in pkg/monitoring name only series
// conduit exports: a running conduit (one instance of a cluster, so that
// the cluster's series are there too) is scraped before anything happened
// to its pipeline - no breaker opened, no record dead-lettered, no write
// failed - and every metric name of every rule, panel and variable must be
// in the scrape, with a sample.
func TestAlertsAndDashboardNameOnlyExportedMetrics(t *testing.T) {
	t.Parallel()
	dbURL := clusterDatabase(t)
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: orders
    status: running
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings: {format.type: structured, format.options.id: int, rate: 100}
      - id: out
        type: destination
        plugin: builtin:file
        dependency: orders-db
        settings: {path: ./out.jsonl}
    dead-letter-queue:
      plugin: builtin:file
      settings: {path: ./dlq.jsonl}
    error-recovery:
      rules:
        - name: poison-rows
          match: {codes: ["503"], message: "deadlock"}
          action: dead-letter
`)
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\n  level: info\ndb:\n  type: postgres\n  postgres:\n    url: %s\n"+
		"cluster:\n  enabled: true\n  lease-ttl: %s\n", dbURL, clusterTTL))
	p := w.start("run", "--cluster.instance-id", "i1")
	address := apiAddress(t, p)
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 20)

	exported := scrapeNames(t, address)
	// Notification targets are for a conduit that runs alone (a cluster
	// refuses them): their series come from a second, standalone conduit
	// with one target.
	alone := newWorkspace(t, "")
	alone.write("conduit.yml", "log:\n  format: json\nnotifications:\n  targets:\n    - name: ops\n      kind: webhook\n      url-env: MONITORING_E2E_WEBHOOK\n")
	single := alone.startWithEnv([]string{"MONITORING_E2E_WEBHOOK=http://127.0.0.1:9/hook"}, "run")
	aloneAddress := apiAddress(t, single)
	for name := range scrapeNames(t, aloneAddress) {
		exported[name] = true
	}
	if body := scrape(t, aloneAddress); !strings.Contains(body, `conduit_notifications_pending{target="ops"} 0`) ||
		!strings.Contains(body, `conduit_notification_failures_total{target="ops"} 0`) {
		t.Errorf("a notification target's series are not there before its first delivery:\n%s", body)
	}
	stopProcess(t, single)
	queries, err := monitoring.Queries()
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, q := range queries {
		for _, name := range monitoring.MetricNames(q.Expr) {
			checked[name] = true
			switch {
			case slices.Contains(prometheusOwn, name):
				if strings.HasPrefix(q.Where, "dashboard.json") {
					t.Errorf("%s uses %s, which Prometheus writes, not conduit", q.Where, name)
				}
			case !exported[name]:
				t.Errorf("%s uses %s, which a scrape of conduit does not list", q.Where, name)
			}
		}
	}
	// The breaker and the dead-letter rule have their series before any
	// outage or poison record, at zero.
	body := scrape(t, address)
	for _, want := range []string{
		`conduit_dependency_breaker_open{dependency="orders-db"} 0`,
		`conduit_records_dead_lettered_total{pipeline_id="orders",rule="poison-rows"} 0`,
		`conduit_store_write_failures_total{reason="error"} 0`,
		`conduit_cluster_leases_lost_total{instance_id="i1"} 0`,
		fmt.Sprintf(`conduit_cluster_lease_ttl_seconds{instance_id="i1"} %g`, clusterTTL.Seconds()),
		`conduit_pipeline_status_since_timestamp_seconds{pipeline_id="orders"} `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	if len(checked) < 25 {
		t.Errorf("only %d metric names checked: %v", len(checked), checked)
	}
	stopProcess(t, p)
}

func scrape(t *testing.T, address string) string {
	t.Helper()
	resp, err := http.Get("http://" + address + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// scrapeNames returns the names of the series a scrape of /metrics has a
// sample of; a histogram's or summary's are its _bucket, _sum and _count.
func scrapeNames(t *testing.T, address string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(scrape(t, address)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// A recovery that a restart of conduit interrupts goes on: the time since
// the pipeline began recovering, which ConduitPipelineRecoveringTooLong
// watches, is the same after the restart as before it.
func TestRecoveringSinceSurvivesARestartOfConduit(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("flaky", "fail.on: read\nfail.after: 5\nfail.count: 1000\nfail.code: 503", "",
		"min-delay: 10m\nmax-delay: 10m"))
	since := func(p *process) float64 {
		address := apiAddress(t, p)
		var line string
		eventually(t, pollInterval, func() bool {
			body := scrape(t, address)
			if !strings.Contains(body, `conduit_pipeline_status{pipeline_id="flaky",status="recovering"} 1`) {
				return false
			}
			line = grepLines(body, `conduit_pipeline_status_since_timestamp_seconds{pipeline_id="flaky"}`)
			return line != ""
		}, func() string { return "flaky is not recovering; output:\n" + p.stderr.String() })
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return v
	}
	p := w.start("run")
	before := since(p)
	stopProcess(t, p)
	p = w.start("run")
	after := since(p)
	// The episode's start and the event that began it read the clock a
	// moment apart (microseconds); a restart that reset the time would
	// show the time the restart took.
	if math.Abs(after-before) > 0.001 {
		t.Errorf("since moved with the restart of conduit: %f before, %f after", before, after)
	}
	if elapsed := float64(time.Now().UnixNano())/1e9 - before; elapsed < 0.02 {
		t.Fatalf("only %fs since the recovery began: the restart cannot be told from none", elapsed)
	}
	stopProcess(t, p)
}
