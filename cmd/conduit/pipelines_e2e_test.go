package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

// These tests run `conduit run` and then the pipelines commands against its
// API, as a user would in a second terminal.

// apiAddress waits for the "API listening" log line of p and returns the
// address in it.
func apiAddress(t *testing.T, p *process) string {
	t.Helper()
	var address string
	eventually(t, pollInterval, func() bool {
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		for sc.Scan() {
			var l struct {
				Msg     string `json:"msg"`
				Address string `json:"address"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "API listening" && l.Address != "" {
				address = l.Address
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("no \"API listening\" log line; output:\n%s", p.stderr.String()) })
	return address
}

// freeAddress returns a loopback address nothing listens on (as long as
// nobody takes the port in between).
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := ln.Addr().String()
	_ = ln.Close()
	return address
}

// cliEnv is the test process's environment without CONDUIT_ variables, so
// that a developer's settings do not leak into the tests, plus extra.
func cliEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONDUIT_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// conduitCLI runs the binary to completion in dir.
func conduitCLI(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	// Built before the clock starts: from an empty build cache the build
	// alone can take longer than the command's time limit.
	bin := conduitBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("conduit %s: %v", strings.Join(args, " "), err)
	}
	if strings.Contains(res.stderr, "Usage:") || strings.Contains(res.stderr, "goroutine ") {
		t.Fatalf("conduit %s printed usage or a stack trace:\n%s", strings.Join(args, " "), res.stderr)
	}
	return res
}

// pipelines runs `conduit pipelines <args>` in the workspace against the
// API at address.
func (w *workspace) pipelines(address string, args ...string) cliResult {
	w.t.Helper()
	return conduitCLI(w.t, w.dir, cliEnv("CONDUIT_API_HTTP_ADDRESS="+address), append([]string{"pipelines"}, args...)...)
}

// mustPipelines is pipelines that fails the test unless the command
// succeeds.
func (w *workspace) mustPipelines(address string, args ...string) string {
	w.t.Helper()
	res := w.pipelines(address, args...)
	if res.code != 0 {
		w.t.Fatalf("conduit pipelines %s: exit %d\n%s", strings.Join(args, " "), res.code, res.stderr)
	}
	return res.stdout
}

// tableRows maps the first column of a table to the row's columns; the
// table ends at the first blank line (the configuration errors follow).
func tableRows(table string) map[string][]string {
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 0 {
			break
		}
		rows[f[0]] = f
	}
	return rows
}

// follower is a running `conduit pipelines events --follow` whose stdout
// lines arrive on lines.
type followProcess struct {
	*process
	lines chan string
}

func (w *workspace) follow(env []string, args ...string) *followProcess {
	w.t.Helper()
	cmd := exec.Command(w.bin, append([]string{"pipelines", "events", "--follow"}, args...)...)
	cmd.Dir, cmd.Env = w.dir, env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	p := &process{cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	f := &followProcess{process: p, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
		p.done <- cmd.Wait()
	}()
	w.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return f
}

// waitForLine returns the lines read until one matches re, that one
// included.
func (f *followProcess) waitForLine(t *testing.T, re string) []string {
	t.Helper()
	pattern := regexp.MustCompile(re)
	var seen []string
	timeout := time.After(e2eTimeout)
	for {
		select {
		case l, ok := <-f.lines:
			if !ok {
				t.Fatalf("follow exited before printing %q; stdout:\n%s\nstderr:\n%s", re, strings.Join(seen, "\n"), f.stderr.String())
			}
			seen = append(seen, l)
			if pattern.MatchString(l) {
				return seen
			}
		case <-timeout:
			t.Fatalf("follow printed no line matching %q; stdout:\n%s\nstderr:\n%s", re, strings.Join(seen, "\n"), f.stderr.String())
		}
	}
}

// interrupt sends SIGINT and expects exit code 0.
func (f *followProcess) interrupt(t *testing.T) {
	t.Helper()
	if err := f.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range f.lines { // drain so that the reader can finish
	}
	if code := f.wait(t); code != 0 {
		t.Fatalf("follow: exit code %d after SIGINT, want 0; stderr:\n%s", code, f.stderr.String())
	}
}

var sequenceRE = regexp.MustCompile(`  #(\d+) `)

// sequences reads the "#N" of event lines.
func sequences(t *testing.T, lines []string) []int {
	t.Helper()
	var out []int
	for _, l := range lines {
		m := sequenceRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("no sequence in event line %q", l)
		}
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

const pickyDestination = "fail.on: write\nfail.after: 10\nfail.code: 422\nfail.message: column price does not exist"

func TestPipelinesCommandsAgainstARunningConduit(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 100))
	w.write("pipelines/picky.yml", strings.Replace(
		chaosPipeline("picky", "", pickyDestination, "min-delay: 100ms"), "./out.jsonl", "./picky.jsonl", 1))
	p := w.start("run")
	address := apiAddress(t, p)
	waitForEvent(t, p, "seq", "running", 1)
	waitForEvent(t, p, "picky", "degraded", 1)

	// list: a table for people...
	table := w.mustPipelines(address, "list")
	if !strings.HasPrefix(table, "ID") || !strings.Contains(table, "LAST ERROR") {
		t.Fatalf("no table header:\n%s", table)
	}
	rows := tableRows(table)
	if r := rows["seq"]; len(r) < 2 || r[1] != "running" {
		t.Fatalf("seq row %q, want running:\n%s", r, table)
	}
	if r := rows["picky"]; len(r) < 6 || r[1] != "degraded" || r[4] != "pipelines/picky.yml:3" || r[5] != "422/fatal:" {
		t.Fatalf("picky row %q, want degraded with the 422 fatal error:\n%s", r, table)
	}

	// ... JSON and YAML for scripts.
	var list conduitv1.ListPipelinesResponse
	if err := protojson.Unmarshal([]byte(w.mustPipelines(address, "list", "--status", "degraded", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.GetPipelines()) != 1 || list.GetPipelines()[0].GetId() != "picky" ||
		list.GetPipelines()[0].GetLastError().GetCode() != 422 {
		t.Fatalf("list --status degraded -o json: %v", &list)
	}
	if y := w.mustPipelines(address, "list", "-o", "yaml"); !strings.Contains(y, "status: PIPELINE_STATUS_DEGRADED") ||
		!strings.Contains(y, "code: 422") {
		t.Fatalf("list -o yaml:\n%s", y)
	}

	// describe shows the cause.
	desc := w.mustPipelines(address, "describe", "picky")
	for _, want := range []string{
		"Status: degraded", "Degraded reason: fatal error", "Code: 422", "Class: fatal (classified by typed)",
		"Component: dst (destination)", "column price does not exist", "Recent events:", " degraded ",
	} {
		if !strings.Contains(oneLine(desc), want) {
			t.Errorf("describe picky lacks %q:\n%s", want, desc)
		}
	}
	var described struct {
		Pipeline json.RawMessage   `json:"pipeline"`
		Events   []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal([]byte(w.mustPipelines(address, "describe", "picky", "-o", "json")), &described); err != nil {
		t.Fatal(err)
	}
	var last conduitv1.PipelineEvent
	if len(described.Events) == 0 || protojson.Unmarshal(described.Events[len(described.Events)-1], &last) != nil ||
		last.GetKind() != "degraded" {
		t.Fatalf("describe -o json: the newest event is not the degradation: %s", described.Events)
	}

	// stop, then start.
	if out := w.mustPipelines(address, "stop", "seq"); out != "pipeline seq is stopped\n" {
		t.Fatalf("stop: %q", out)
	}
	if r := tableRows(w.mustPipelines(address, "list"))["seq"]; r[1] != "stopped" {
		t.Fatalf("after stop, seq is %s", r[1])
	}
	again := w.pipelines(address, "stop", "seq")
	if again.code == 0 || again.stderr != "conduit: pipeline \"seq\": cannot stop a stopped pipeline\n" {
		t.Fatalf("second stop: exit %d, stderr %q", again.code, again.stderr)
	}
	if out := w.mustPipelines(address, "start", "seq"); out != "pipeline seq is running\n" {
		t.Fatalf("start: %q", out)
	}
	if r := tableRows(w.mustPipelines(address, "list"))["seq"]; r[1] != "running" {
		t.Fatalf("after start, seq is %s", r[1])
	}

	// events -o json: one object per line, in order, with the user's stop.
	var kinds []string
	var prev uint64
	for i, line := range strings.Split(strings.TrimSpace(w.mustPipelines(address, "events", "seq", "-o", "json")), "\n") {
		var e conduitv1.PipelineEvent
		if err := protojson.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %d does not parse: %v: %s", i+1, err, line)
		}
		if e.GetSequence() <= prev {
			t.Fatalf("sequence %d after %d", e.GetSequence(), prev)
		}
		prev = e.GetSequence()
		if e.GetActor() == "user" {
			kinds = append(kinds, e.GetKind())
		}
	}
	if strings.Join(kinds, ",") != "stopping,stopped,starting,running" {
		t.Fatalf("user events %v", kinds)
	}

	notFound := w.pipelines(address, "describe", "nope")
	if notFound.code != 1 || notFound.stderr != "conduit: pipeline \"nope\" not found\n" {
		t.Fatalf("describe nope: exit %d, stderr %q", notFound.code, notFound.stderr)
	}
	stopProcess(t, p)
}

func TestPipelinesEventsFollowSurvivesAServerRestart(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 100))
	// A fixed port, so that the follower finds the restarted server.
	address := freeAddress(t)
	p := w.start("run", "--api.http.address", address)
	waitForEvent(t, p, "seq", "running", 1)

	f := w.follow(cliEnv("CONDUIT_API_HTTP_ADDRESS="+address), "seq")
	printed := f.waitForLine(t, `  running  `)

	// A live event.
	w.mustPipelines(address, "stop", "seq")
	printed = append(printed, f.waitForLine(t, `  stopped .*by user`)...)

	// The server goes away and comes back; the follower carries on.
	stopProcess(t, p)
	p = w.start("run", "--api.http.address", address)
	apiAddress(t, p)
	w.mustPipelines(address, "start", "seq")
	printed = append(printed, f.waitForLine(t, `  running .*by user`)...)
	f.interrupt(t)

	seqs := sequences(t, printed)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("sequences %v: a gap or a duplicate at %d", seqs, i)
		}
	}
	if !strings.Contains(f.stderr.String(), "reconnected") {
		t.Fatalf("no reconnect notice on stderr:\n%s", f.stderr.String())
	}
	stopProcess(t, p)
}

func TestPipelinesWithoutAServerSaysSoInOneLine(t *testing.T) {
	t.Parallel()
	address := freeAddress(t)
	res := conduitCLI(t, t.TempDir(), cliEnv(), "pipelines", "list", "--api.http.address", address)
	want := "conduit: cannot reach the conduit API at " + address + " (is it running? start it with: conduit run)\n"
	if res.code != 1 || res.stderr != want || res.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", res.code, res.stdout, res.stderr, want)
	}

	// Without any setting, the default address is named.
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:8080", time.Second); err == nil {
		_ = conn.Close()
		t.Skip("something listens on 127.0.0.1:8080")
	}
	res = conduitCLI(t, t.TempDir(), cliEnv(), "pipelines", "describe", "x")
	if res.code != 1 || !strings.Contains(res.stderr, "cannot reach the conduit API at 127.0.0.1:8080") {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
}

func TestPipelinesSendTheTokenFromConduitYMLOrTheFlag(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 100))
	w.write("conduit.yml", "log:\n  format: json\napi:\n  auth:\n    token: s3cret\n")
	p := w.start("run")
	address := apiAddress(t, p)
	waitForEvent(t, p, "seq", "running", 1)
	elsewhere := t.TempDir() // no conduit.yml, so no token
	env := cliEnv("CONDUIT_API_HTTP_ADDRESS=" + address)

	missing := conduitCLI(t, elsewhere, env, "pipelines", "list")
	if missing.code != 1 || !strings.Contains(missing.stderr, "requires a token") ||
		!strings.Contains(missing.stderr, "--api.auth.token") || strings.Count(missing.stderr, "\n") != 1 {
		t.Fatalf("without a token: exit %d, stderr %q", missing.code, missing.stderr)
	}
	wrong := conduitCLI(t, elsewhere, env, "pipelines", "list", "--api.auth.token", "guess")
	if wrong.code != 1 || !strings.Contains(wrong.stderr, "rejected the token") {
		t.Fatalf("with a wrong token: exit %d, stderr %q", wrong.code, wrong.stderr)
	}
	ok := conduitCLI(t, elsewhere, env, "pipelines", "list", "--api.auth.token", "s3cret")
	if ok.code != 0 || tableRows(ok.stdout)["seq"] == nil {
		t.Fatalf("with --api.auth.token: exit %d\n%s%s", ok.code, ok.stdout, ok.stderr)
	}
	// In the project directory, conduit.yml supplies the token, to the
	// event stream too.
	f := w.follow(env, "seq")
	f.waitForLine(t, `  running  `)
	w.mustPipelines(address, "stop", "seq")
	f.waitForLine(t, `  stopped .*by user`)
	f.interrupt(t)
	stopProcess(t, p)
}

// An error text with terminal escape sequences (an upstream system's
// message) reaches the operator's terminal escaped in every human output
// of the CLI, and exact in JSON.
func TestCLIEscapesControlCharactersInHumanOutput(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("hostile", "",
		"fail.on: write\nfail.count: 1000000\nfail.code: 400\nfail.message: \"\\e]0;pwned\\a\\e[2Jwiped\"", "min-delay: 100ms"))
	p := w.start("run")
	waitForEvent(t, p, "hostile", "degraded", 1)
	address := apiAddress(t, p)
	for _, args := range [][]string{{"list"}, {"describe", "hostile"}, {"events", "hostile"}} {
		out := w.mustPipelines(address, args...)
		if strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0x07) {
			t.Errorf("pipelines %s wrote raw control characters:\n%q", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, `\x1b]0;pwned\x07\x1b[2Jwiped`) && !strings.Contains(out, `\x1b]0;pwned\x07\x1b[2...`) {
			t.Errorf("pipelines %s does not show the error escaped:\n%s", strings.Join(args, " "), out)
		}
	}
	if out := w.mustPipelines(address, "describe", "hostile", "-o", "json"); !strings.Contains(out, `\u001b]0;pwned\u0007\u001b[2Jwiped`) {
		t.Errorf("JSON output is not exact:\n%s", out)
	}
	stopProcess(t, p)
}

// The same for JSON and YAML: an error text with a right-to-left override,
// C1's one-character CSI and DEL is written in the escapes of JSON or YAML,
// by every structured output (Conduit's `ls --json` included), and reads
// back exactly.
func TestCLIEscapesControlCharactersInJSONAndYAML(t *testing.T) {
	t.Parallel()
	const message = "invoice.\u202efdp.exe \u009b2J \x1b[31m a\x7fb"
	w := newWorkspace(t, chaosPipeline("hostile", "",
		"fail.on: write\nfail.count: 1000000\nfail.code: 400\nfail.message: \"invoice.\\u202efdp.exe \\x9b2J \\e[31m a\\x7fb\"", "min-delay: 100ms"))
	p := w.start("run")
	waitForEvent(t, p, "hostile", "degraded", 1)
	address := apiAddress(t, p)
	for _, args := range [][]string{
		{"ls", "--json"}, {"list", "-o", "json"}, {"list", "-o", "yaml"},
		{"describe", "hostile", "-o", "json"}, {"describe", "hostile", "-o", "yaml"},
		{"events", "hostile", "-o", "json"}, {"events", "hostile", "-o", "yaml"},
	} {
		out := w.mustPipelines(address, args...)
		for _, r := range out {
			if r != '\n' && r != '\t' && terminalControl(r) {
				t.Errorf("pipelines %s wrote the raw control U+%04X:\n%q", strings.Join(args, " "), r, out)
				break
			}
		}
		// The message reads back exactly: JSON's \u escapes, YAML's \u,
		// \x and \e escapes of a double-quoted string.
		var found bool
		if args[len(args)-1] == "yaml" {
			dec := yaml.NewDecoder(strings.NewReader(out))
			for {
				var doc any
				if err := dec.Decode(&doc); err != nil {
					break
				}
				found = found || holdsString(doc, message)
			}
		} else {
			dec := json.NewDecoder(strings.NewReader(out))
			for dec.More() {
				var doc any
				if err := dec.Decode(&doc); err != nil {
					t.Fatalf("pipelines %s: not JSON: %v\n%s", strings.Join(args, " "), err, out)
				}
				found = found || holdsString(doc, message)
			}
		}
		if !found {
			t.Errorf("pipelines %s does not hold the exact message:\n%s", strings.Join(args, " "), out)
		}
	}
	stopProcess(t, p)
}

// holdsString reports whether a decoded JSON or YAML document holds s as a
// value (or within one: an error's message may carry a prefix).
func holdsString(doc any, s string) bool {
	switch v := doc.(type) {
	case string:
		return strings.Contains(v, s)
	case []any:
		return slices.ContainsFunc(v, func(e any) bool { return holdsString(e, s) })
	case map[string]any:
		for _, e := range v {
			if holdsString(e, s) {
				return true
			}
		}
	}
	return false
}
