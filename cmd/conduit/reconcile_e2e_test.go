package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writeLikeAnEditor saves content the way most editors do: into a
// temporary file beside the target, renamed over it.
func (w *workspace) writeLikeAnEditor(name, content string) {
	w.t.Helper()
	tmp := filepath.Join(w.dir, filepath.Dir(name), "."+filepath.Base(name)+".swp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, name)); err != nil {
		w.t.Fatal(err)
	}
}

// A running conduit applies its pipeline files as they change: an update
// continues the sequence where it stopped, an added file starts a
// pipeline, a broken file leaves its pipeline running, a removed file
// deletes its pipeline; nothing restarts the process.
func TestPipelineFilesChangeWhileRunning(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 1000))
	out := filepath.Join(w.dir, "out.jsonl")
	p := w.start("run")
	waitForRecords(t, p, out, 200)

	// Changed: drained and started again with the new settings.
	w.writeLikeAnEditor("pipelines/p.yml", fmt.Sprintf(generatorToFile, 3000))
	waitForEvent(t, p, "seq", "stopping", 1)
	stopped := waitForEvent(t, p, "seq", "stopped", 1)
	if stopped.Reason != "updated" {
		t.Fatalf("stopped for %q, want updated", stopped.Reason)
	}
	waitForLog(t, p, `"fields":["connectors[gen].settings.rate"]`)
	waitForEvent(t, p, "seq", "running", 2)
	n := len(ids(t, out))
	waitForRecords(t, p, out, n+500)

	// Added.
	w.write("pipelines/q.yml", strings.NewReplacer("id: seq", "id: q", "./out.jsonl", "./q.jsonl").Replace(fmt.Sprintf(generatorToFile, 500)))
	waitForRecords(t, p, filepath.Join(w.dir, "q.jsonl"), 50)

	// Broken: the running version stays, the error names the file and field.
	w.writeLikeAnEditor("pipelines/p.yml", strings.Replace(fmt.Sprintf(generatorToFile, 3000), "rate: 3000", "rate: fast", 1))
	waitForLog(t, p, "the pipeline keeps running as it was until it is fixed")
	if !strings.Contains(p.stderr.String(), "p.yml:13") || !strings.Contains(p.stderr.String(), "settings.rate") {
		t.Fatalf("the error does not name file:line and field:\n%s", p.stderr.String())
	}
	n = len(ids(t, out))
	waitForRecords(t, p, out, n+500)
	// Fixed to what runs: nothing to do.
	w.writeLikeAnEditor("pipelines/p.yml", fmt.Sprintf(generatorToFile, 3000))

	// Removed: q is deleted, seq runs on.
	if err := os.Remove(filepath.Join(w.dir, "pipelines/q.yml")); err != nil {
		t.Fatal(err)
	}
	if e := waitForEvent(t, p, "q", "stopped", 1); e.Reason != "deleted" {
		t.Fatalf("q stopped for %q, want deleted", e.Reason)
	}
	waitForLog(t, p, `"deleted":1`)
	address := apiAddress(t, p)
	if rows := tableRows(w.mustPipelines(address, "list")); rows["q"] != nil || rows["seq"] == nil {
		t.Errorf("after q's file was removed the list has %v, want seq without q", rows)
	}
	if events := w.mustPipelines(address, "events", "q"); !strings.Contains(events, "deleted") {
		t.Errorf("q's audit events have no deleted event:\n%s", events)
	}
	if got := len(events(t, p, "seq")); got == 0 {
		t.Fatal("no events for seq")
	}
	if n := len(filterEvents(events(t, p, "seq"), "stopping")); n != 1 {
		t.Errorf("seq was stopped %d times, want once (the update); fixing the file back to what runs must change nothing", n)
	}
	stopProcess(t, p)
	// The update drained and resumed from the saved position: no gap, no
	// duplicate.
	checkSequence(t, ids(t, out), 0)
}

// A file added with the id of a running pipeline does not take it over,
// even when its name sorts first: the pipeline runs on from its file,
// unstopped, and the newcomer is listed as invalid with both files named.
func TestANewFileWithARunningIDDoesNotTakeItOver(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	orders := strings.NewReplacer("id: seq", "id: orders", "./out.jsonl", "./orders.jsonl").Replace(fmt.Sprintf(generatorToFile, 1000))
	w.write("pipelines/z-orders.yml", orders)
	out := filepath.Join(w.dir, "orders.jsonl")
	p := w.start("run")
	waitForRecords(t, p, out, 100)

	w.write("pipelines/a-orders-copy.yml", strings.Replace(orders, "./orders.jsonl", "./copy.jsonl", 1))
	waitForLog(t, p, `"invalid":1`)
	log := p.stderr.String()
	if !strings.Contains(log, "a-orders-copy.yml:3") || !strings.Contains(log, "already defined at pipelines/z-orders.yml:3, which runs it") {
		t.Fatalf("the newcomer's error does not name both files:\n%s", log)
	}
	n := len(ids(t, out))
	waitForRecords(t, p, out, n+300)
	if _, err := os.Stat(filepath.Join(w.dir, "copy.jsonl")); err == nil {
		t.Error("the newcomer's destination was written: it took the pipeline over")
	}
	address := apiAddress(t, p)
	list := w.mustPipelines(address, "list")
	if row := tableRows(list)["orders"]; row == nil || !strings.Contains(strings.Join(row, " "), "pipelines/z-orders.yml:3") {
		t.Errorf("orders does not run from z-orders.yml:\n%s", list)
	}
	if i := strings.Index(list, "CONFIGURATION ERRORS"); i < 0 || !strings.Contains(list[i:], "a-orders-copy.yml:3") {
		t.Errorf("the newcomer is not listed as invalid:\n%s", list)
	}
	if stops := filterEvents(events(t, p, "orders"), "stopping"); len(stops) != 0 {
		t.Errorf("orders was stopped %d times; a duplicate must not touch it", len(stops))
	}
	stopProcess(t, p)

	// Restarted with the duplicate still there: the definition it ran with
	// last wins, not the first file name.
	p = w.start("run")
	n = len(ids(t, out))
	waitForRecords(t, p, out, n+300)
	if _, err := os.Stat(filepath.Join(w.dir, "copy.jsonl")); err == nil {
		t.Error("after a restart the newcomer took the pipeline over")
	}
	if !strings.Contains(p.stderr.String(), "already defined at pipelines/z-orders.yml:3, which it ran with last") {
		t.Errorf("after a restart the newcomer's error does not name the definition that runs:\n%s", p.stderr.String())
	}
	stopProcess(t, p)
	checkSequence(t, ids(t, out), 0)
}

// validate names every problem of each pipeline in one pass: each wrong
// field of the file, and each connector a plugin refuses.
func TestValidateReportsEveryProblemOfEachPipeline(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	w.write("structure.yml", `version: "2.2"
pipelines:
  - id: orders
    statuss: running
    connectors:
      - {id: gen, type: sauce, plugin: builtin:generator}
      - {id: out, type: destination, plugin: builtin:log, colour: red}
`)
	w.write("plugins.yml", `version: "2.2"
pipelines:
  - id: orders
    connectors:
      - {id: gen, type: source, plugin: builtin:generator, settings: {rate: fast, format.options.id: int}}
      - {id: out, type: destination, plugin: builtin:nope}
`)
	for file, want := range map[string][]string{
		"structure.yml": {"structure.yml:4: pipeline \"orders\": statuss:", "structure.yml:6: pipeline \"orders\": connectors[gen].type:",
			"structure.yml:7: pipeline \"orders\": connectors[out].colour:"},
		"plugins.yml": {"plugins.yml:5: pipeline \"orders\": connectors[gen].settings.rate:", "plugins.yml:6: pipeline \"orders\": connectors[out].plugin: unknown plugin"},
	} {
		res := conduitCLI(t, w.dir, cliEnv(), "pipelines", "validate", file)
		if res.code == 0 {
			t.Errorf("validate %s: exit 0\n%s", file, res.stdout)
		}
		for _, line := range want {
			if !strings.Contains(res.stdout, line) {
				t.Errorf("validate %s does not report %q:\n%s", file, line, res.stdout)
			}
		}
		if !strings.Contains(res.stderr, fmt.Sprintf("%d problems", len(want))) {
			t.Errorf("validate %s: %s", file, res.stderr)
		}
	}
}

// A pipeline file symlinked to a file that is not one (/etc/passwd, say)
// is reported as not a pipeline file; nothing of what it holds reaches the
// log, the API or the CLI.
func TestAFileThatIsNotAPipelineFileIsNotQuoted(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 100))
	secret := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(secret, []byte("root:x:0:0:SECRET-ROOT:/root:/bin/bash\nsvc:x:1:1:SECRET-SVC:/:/bin/false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(w.dir, "pipelines", "passwd.yml")); err != nil {
		t.Fatal(err)
	}
	res := conduitCLI(t, w.dir, cliEnv(), "pipelines", "validate", "pipelines/passwd.yml")
	if res.code == 0 || strings.Contains(res.stdout+res.stderr, "SECRET") || !strings.Contains(res.stdout, "passwd.yml:1: not a pipeline file") {
		t.Errorf("validate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	p := w.start("run")
	address := apiAddress(t, p)
	waitForLog(t, p, "not a pipeline file")
	list := w.mustPipelines(address, "list")
	if !strings.Contains(list, "passwd.yml:1: not a pipeline file") {
		t.Errorf("the list does not name the file:\n%s", list)
	}
	stopProcess(t, p)
	if out := p.stderr.String() + list; strings.Contains(out, "SECRET") {
		t.Errorf("the content of the file was quoted:\n%s", out)
	}
}

// With watching off, changes wait for SIGHUP.
func TestSIGHUPAppliesThePipelineFiles(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 1000))
	p := w.start("run", "--pipelines.watch=false")
	waitForRecords(t, p, filepath.Join(w.dir, "out.jsonl"), 100)
	w.write("pipelines/q.yml", strings.NewReplacer("id: seq", "id: q", "./out.jsonl", "./q.jsonl").Replace(fmt.Sprintf(generatorToFile, 500)))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitForRecords(t, p, filepath.Join(w.dir, "q.jsonl"), 10)
	if strings.Contains(p.stderr.String(), "watching the pipeline files for changes") {
		t.Error("pipelines.watch=false still watches")
	}
	stopProcess(t, p)
}

// The whole cycle of pipelines managed through the CLI: validate without a
// server, a dry run that changes nothing, apply, an update, a restart that
// keeps them, and delete; a file's pipeline can be neither applied nor
// deleted that way.
func TestApplyValidateAndDeleteThroughTheCLI(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 200))
	orders := strings.NewReplacer("id: seq", "id: orders", "./out.jsonl", "./orders.jsonl").Replace(fmt.Sprintf(generatorToFile, 1000))
	w.write("orders.yml", orders)
	w.write("bad.yml", strings.Replace(orders, "rate: 1000", "rate: fast", 1))
	w.write("seq.yml", fmt.Sprintf(generatorToFile, 5))

	// Validate needs no server.
	res := conduitCLI(t, w.dir, cliEnv(), "pipelines", "validate", "orders.yml")
	if res.code != 0 || !strings.Contains(res.stdout, "1 valid pipeline: orders") {
		t.Fatalf("validate orders.yml: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = conduitCLI(t, w.dir, cliEnv(), "pipelines", "validate", "bad.yml")
	if res.code == 0 || !strings.Contains(res.stdout, "bad.yml:13") || !strings.Contains(res.stdout, "settings.rate") {
		t.Fatalf("validate bad.yml: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	p := w.start("run")
	address := apiAddress(t, p)
	out := w.mustPipelines(address, "apply", "orders.yml", "--dry-run")
	if !strings.Contains(out, "+ create") || !strings.Contains(out, "orders") || !strings.Contains(out, "Dry run: nothing changed") {
		t.Fatalf("dry run:\n%s", out)
	}
	if rows := tableRows(w.mustPipelines(address, "list")); rows["orders"] != nil {
		t.Fatalf("a dry run created the pipeline: %v", rows)
	}
	out = w.mustPipelines(address, "apply", "orders.yml")
	if !strings.Contains(out, "+ create") || !strings.Contains(out, "Applied.") {
		t.Fatalf("apply:\n%s", out)
	}
	ordersOut := filepath.Join(w.dir, "orders.jsonl")
	waitForRecords(t, p, ordersOut, 100)
	if row := tableRows(w.mustPipelines(address, "list"))["orders"]; len(row) < 5 || row[4] != "api" {
		t.Fatalf("orders is listed as %v, want source api", row)
	}

	// The file's pipeline is changed in its file, not through the API.
	res = w.pipelines(address, "apply", "seq.yml")
	if res.code == 0 || !strings.Contains(res.stdout, "! invalid") || !strings.Contains(res.stdout, "is defined in pipelines/p.yml:3") {
		t.Fatalf("apply of a file's pipeline: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = w.pipelines(address, "delete", "seq")
	if res.code == 0 || !strings.Contains(res.stderr, "is defined in pipelines/p.yml:3") {
		t.Fatalf("delete of a file's pipeline: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// An invalid version leaves the running one.
	res = w.pipelines(address, "apply", "bad.yml")
	if res.code == 0 || !strings.Contains(res.stdout, "the running version stays") {
		t.Fatalf("apply of an invalid version: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	w.write("orders.yml", strings.Replace(orders, "rate: 1000", "rate: 2000", 1))
	out = w.mustPipelines(address, "apply", "orders.yml")
	if !strings.Contains(out, "~ update") || !strings.Contains(out, "connectors[gen].settings.rate") {
		t.Fatalf("apply of a change:\n%s", out)
	}
	n := len(ids(t, ordersOut))
	waitForRecords(t, p, ordersOut, n+200)
	stopProcess(t, p)

	// Kept across a restart, continuing its sequence.
	p = w.start("run")
	address = apiAddress(t, p)
	n = len(ids(t, ordersOut))
	waitForRecords(t, p, ordersOut, n+200)
	if row := tableRows(w.mustPipelines(address, "list"))["orders"]; len(row) < 2 || row[1] != "running" {
		t.Fatalf("after a restart orders is %v, want running", row)
	}
	out = w.mustPipelines(address, "delete", "orders")
	if !strings.Contains(out, "pipeline orders deleted") {
		t.Fatalf("delete: %s", out)
	}
	if rows := tableRows(w.mustPipelines(address, "list")); rows["orders"] != nil {
		t.Fatalf("orders is still listed after delete: %v", rows)
	}
	if events := w.mustPipelines(address, "events", "orders"); !strings.Contains(events, "deleted") {
		t.Errorf("no deleted event:\n%s", events)
	}
	stopProcess(t, p)
	checkSequence(t, ids(t, ordersOut), 0)
	// Deleted stays deleted.
	p = w.start("run")
	address = apiAddress(t, p)
	if rows := tableRows(w.mustPipelines(address, "list")); rows["orders"] != nil {
		t.Fatalf("a deleted pipeline came back after a restart: %v", rows)
	}
	stopProcess(t, p)
}

// /healthz and /readyz answer probes without a token; /readyz lists the
// degraded pipelines and, with api.readyz.fail-on-degraded, fails on them.
func TestHealthAndReadinessProbes(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 100))
	w.write("pipelines/picky.yml", strings.Replace(
		chaosPipeline("picky", "", pickyDestination, "min-delay: 100ms"), "./out.jsonl", "./picky.jsonl", 1))
	p := w.start("run", "--api.readyz.fail-on-degraded", "--api.auth.token=s3cret")
	address := apiAddress(t, p)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + address + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz without a token: %d %q", code, body)
	}
	waitForEvent(t, p, "picky", "degraded", 1)
	code, body := get("/readyz")
	var rd struct {
		Ready    bool     `json:"ready"`
		Reason   string   `json:"reason"`
		Degraded []string `json:"degraded"`
	}
	if err := json.Unmarshal([]byte(body), &rd); err != nil {
		t.Fatalf("/readyz: %v in %q", err, body)
	}
	if code != http.StatusServiceUnavailable || rd.Ready || len(rd.Degraded) != 1 || rd.Degraded[0] != "picky" || !strings.Contains(rd.Reason, "fail-on-degraded") {
		t.Fatalf("/readyz with a degraded pipeline: %d %s", code, body)
	}
	// Everything else still needs the token.
	if code, _ := get("/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d", code)
	}
	// The log says where the console is, and it is there (its pages load
	// without the token, and ask for it).
	console := "http://" + address + "/ui/"
	if !strings.Contains(p.stderr.String(), `"console":"`+console+`"`) {
		t.Errorf("the log does not name the console's URL %s:\n%s", console, p.stderr.String())
	}
	if code, body := get("/ui/"); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("%s: %d %.200q", console, code, body)
	}
	stopProcess(t, p)
}
