package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests point Conduit's own clients at conduit: Conduit's CLI, built
// from its module, and HTTP calls to Conduit's /v1 routes as a user's
// curl scripts make them.

// conduitUpstreamVersion is the version of Conduit whose CLI the tests
// build and run.
const conduitUpstreamVersion = "v0.14.0"

var (
	upstreamOnce sync.Once
	upstreamBin  string
	upstreamErr  error
)

// conduitUpstreamCLI returns Conduit's CLI, built once from its module and
// kept in the user's cache directory, so that only the first test run on
// a machine pays for the build (minutes).
func conduitUpstreamCLI(t *testing.T) string {
	t.Helper()
	upstreamOnce.Do(func() { upstreamBin, upstreamErr = buildConduitUpstream() })
	if upstreamErr != nil {
		t.Fatal(upstreamErr)
	}
	return upstreamBin
}

func buildConduitUpstream() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for Conduit's CLI: %w", err)
	}
	dir := filepath.Join(cache, "conduitry-tests", "conduitio-conduit-"+conduitUpstreamVersion)
	bin := filepath.Join(dir, "conduit")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	mod, err := os.MkdirTemp("", "conduit-upstream-module-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(mod)
	gomod := "module x\n\ngo 1.24\n\nrequire github.com/conduitio/conduit " + conduitUpstreamVersion + "\n"
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", err
	}
	// Built next to where it is kept and renamed into place, so that a
	// build cut short leaves no binary that looks complete.
	partial := fmt.Sprintf("%s.partial-%d", bin, os.Getpid())
	defer os.Remove(partial)
	cmd := exec.Command("go", "build", "-o", partial, "github.com/conduitio/conduit/cmd/conduit")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GONOSUMDB=github.com/conduitio,buf.build", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building Conduit's CLI %s: %v\n%s", conduitUpstreamVersion, err, out)
	}
	if err := os.Rename(partial, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// runUpstream runs Conduit's CLI against the API at grpcAddress.
func runUpstream(t *testing.T, bin, grpcAddress string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--api.grpc.address", grpcAddress)...)
	// An empty directory: Conduit's CLI reads a conduit.yaml where it runs.
	cmd.Dir, cmd.Env = t.TempDir(), cliEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("Conduit's CLI %v: %v", args, err)
	}
	return res
}

// grpcAPIAddress waits for the log line of api.grpc.address and returns
// its address.
func grpcAPIAddress(t *testing.T, p *process) string {
	t.Helper()
	var address string
	eventually(t, pollInterval, func() bool {
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		for sc.Scan() {
			var l struct {
				Msg     string `json:"msg"`
				Address string `json:"address"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && strings.Contains(l.Msg, "api.grpc.address") && l.Address != "" {
				address = l.Address
				return true
			}
		}
		return false
	}, func() string { return "no api.grpc.address log line; output:\n" + p.stderr.String() })
	return address
}

const conduitV1Pipeline = `version: "2.2"
pipelines:
  - id: seq
    status: running
    description: numbers
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: 200
        processors:
          - id: tag
            plugin: field.set
            settings:
              field: .Metadata.tag
              value: seen
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
`

// v1Get GETs a Conduit /v1 route and decodes its JSON into v.
func v1Get(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}

type v1Pipeline struct {
	ID    string `json:"id"`
	State struct {
		Status string `json:"status"`
	} `json:"state"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
}

func v1Status(t *testing.T, base, id string) string {
	t.Helper()
	var p v1Pipeline
	v1Get(t, base+"/v1/pipelines/"+id, &p)
	return p.State.Status
}

// Conduit's CLI lists conduit's pipelines, connectors and plugins, on
// api.grpc.address and on the API's own port; Conduit's HTTP routes
// answer a user's curl calls, start and stop included, and stream a
// connector's records live.
func TestConduitsCLIAndHTTPAPIAgainstConduit(t *testing.T) {
	cli := conduitUpstreamCLI(t)
	w := newWorkspace(t, conduitV1Pipeline)
	p := w.start("run", "--api.grpc.address", "127.0.0.1:0")
	httpAddr, grpcAddr := apiAddress(t, p), grpcAPIAddress(t, p)
	base := "http://" + httpAddr
	eventually(t, pollInterval, func() bool { return v1Status(t, base, "seq") == "STATUS_RUNNING" },
		func() string { return "seq never ran:\n" + p.stderr.String() })

	for _, tc := range []struct {
		args []string
		want [][]string // rows: each holds all of its cells
	}{
		{[]string{"pipelines", "ls"}, [][]string{{"| seq ", "| running "}}},
		{[]string{"connectors", "ls"}, [][]string{{"| seq:gen ", "builtin:generator", "source", "| seq "}, {"| seq:out ", "builtin:file", "destination"}}},
		{[]string{"processors", "ls"}, [][]string{{"| seq:gen:tag ", "field.set", "connector (seq:gen)"}}},
		{[]string{"connector-plugins", "ls"}, [][]string{{"builtin:generator@v"}, {"builtin:file@v"}, {"builtin:postgres@v", "PostgreSQL"}}},
		{[]string{"processor-plugins", "ls"}, [][]string{{"builtin:field.set@v"}, {"builtin:json.decode@v"}}},
	} {
		addrs := []string{grpcAddr}
		if tc.args[0] == "pipelines" {
			addrs = append(addrs, httpAddr) // the API's port answers Conduit's gRPC too
		}
		for _, addr := range addrs {
			res := runUpstream(t, cli, addr, tc.args...)
			if res.code != 0 {
				t.Fatalf("conduit %s --api.grpc.address %s: exit %d\n%s%s", strings.Join(tc.args, " "), addr, res.code, res.stdout, res.stderr)
			}
			for _, row := range tc.want {
				if !hasRow(res.stdout, row) {
					t.Errorf("conduit %s (%s): no row with %q in\n%s", strings.Join(tc.args, " "), addr, row, res.stdout)
				}
			}
		}
	}
	if res := runUpstream(t, cli, grpcAddr, "pipelines", "describe", "seq"); res.code != 0 ||
		!strings.Contains(res.stdout, "Description: numbers") || !strings.Contains(res.stdout, "path: ./out.jsonl") {
		t.Errorf("conduit pipelines describe seq: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// curl, as a user's scripts call Conduit's HTTP API.
	var connectors []struct {
		ID     string `json:"id"`
		Type   string `json:"type"`
		Plugin string `json:"plugin"`
	}
	v1Get(t, base+"/v1/connectors?pipeline_id=seq", &connectors)
	if len(connectors) != 2 || connectors[0].ID != "seq:gen" || connectors[0].Type != "TYPE_SOURCE" || connectors[1].Plugin != "builtin:file" {
		t.Errorf("/v1/connectors: %+v", connectors)
	}
	var info struct {
		OS string `json:"os"`
	}
	v1Get(t, base+"/info", &info)
	if info.OS == "" {
		t.Errorf("/info: %+v", info)
	}

	// Live records of the source's processor, as Conduit streams them.
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/processors/seq:gen:tag/inspect-out", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	res.Body.Close()
	var chunk struct {
		Result struct {
			Metadata map[string]string `json:"metadata"`
			Payload  struct {
				After struct {
					StructuredData map[string]any `json:"structuredData"`
				} `json:"after"`
			} `json:"payload"`
		} `json:"result"`
	}
	if err != nil || json.Unmarshal([]byte(line), &chunk) != nil || chunk.Result.Metadata["tag"] != "seen" ||
		chunk.Result.Payload.After.StructuredData["id"] == nil {
		t.Errorf("inspect-out: %v %q", err, line)
	}

	var created v1Pipeline
	v1Get(t, base+"/v1/pipelines/seq", &created)
	createdAt, errC := time.Parse(time.RFC3339Nano, created.CreatedAt)
	updatedAt, errU := time.Parse(time.RFC3339Nano, created.UpdatedAt)
	if errC != nil || errU != nil || updatedAt.Before(createdAt) {
		t.Errorf("/v1/pipelines/seq: createdAt %q, updatedAt %q; want a creation time no later than the update", created.CreatedAt, created.UpdatedAt)
	}

	// Stop and start, then Conduit's CLI sees each.
	for _, step := range []struct{ action, status, cli string }{
		{"stop", "STATUS_STOPPED", "stopped"},
		{"start", "STATUS_RUNNING", "running"},
	} {
		res, err := http.Post(base+"/v1/pipelines/seq/"+step.action, "application/json", strings.NewReader("{}"))
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/pipelines/seq/%s: %v %v", step.action, res, err)
		}
		res.Body.Close()
		eventually(t, pollInterval, func() bool { return v1Status(t, base, "seq") == step.status },
			func() string { return "seq is not " + step.status })
		if ls := runUpstream(t, cli, grpcAddr, "pipelines", "ls"); !hasRow(ls.stdout, []string{"| seq ", "| " + step.cli + " "}) {
			t.Errorf("after %s: %s", step.action, ls.stdout)
		}
	}

	var after v1Pipeline
	v1Get(t, base+"/v1/pipelines/seq", &after)
	if after.CreatedAt != created.CreatedAt || after.UpdatedAt == created.UpdatedAt {
		t.Errorf("after a stop and a start: createdAt %q (was %q), updatedAt %q (was %q); want the same creation, a later update",
			after.CreatedAt, created.CreatedAt, after.UpdatedAt, created.UpdatedAt)
	}

	// A connector of a file's pipeline is changed in its file.
	put, _ := http.NewRequest(http.MethodPut, base+"/v1/connectors/seq:gen", strings.NewReader(`{"config":{"settings":{"rate":"1"}}}`))
	put.Header.Set("Content-Type", "application/json")
	res, err = http.DefaultClient.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":9`) || !strings.Contains(string(body), "pipelines/p.yml:3") {
		t.Errorf("PUT /v1/connectors/seq:gen: %d %s", res.StatusCode, body)
	}
}

// Conduit's piecewise changes reach a pipeline applied through the API:
// its file is changed and applied again, and the pipeline runs with the
// change.
func TestConduitV1ChangesAnAppliedPipeline(t *testing.T) {
	w := newWorkspace(t, "")
	p := w.start("run")
	addr := apiAddress(t, p)
	base := "http://" + addr
	w.write("applied.yml", strings.Replace(conduitV1Pipeline, "id: seq", "id: applied", 1))
	w.mustPipelines(addr, "apply", "applied.yml")
	eventually(t, pollInterval, func() bool { return v1Status(t, base, "applied") == "STATUS_RUNNING" },
		func() string { return "applied never ran:\n" + p.stderr.String() })

	send := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		// The /v1 routes take only JSON bodies.
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := send(http.MethodPut, "/v1/connectors/applied:gen", `{"config":{"settings":{"format.type":"structured","format.options.id":"int","rate":"7"}}}`)
	if code != http.StatusOK || !strings.Contains(strings.ReplaceAll(body, " ", ""), `"rate":"7"`) {
		t.Fatalf("PUT /v1/connectors/applied:gen: %d %s", code, body)
	}
	code, body = send(http.MethodPost, "/v1/processors", `{"parent":{"type":"TYPE_PIPELINE","id":"applied"},"plugin":"field.set","config":{"settings":{"field":".Metadata.added","value":"yes"}}}`)
	if code != http.StatusOK || !strings.Contains(body, "field.set") {
		t.Fatalf("POST /v1/processors: %d %s", code, body)
	}
	// The pipeline runs with both: a record through the new processor.
	eventually(t, pollInterval, func() bool { return v1Status(t, base, "applied") == "STATUS_RUNNING" },
		func() string { return "applied does not run after the change:\n" + p.stderr.String() })
	var pl struct {
		ProcessorIDs []string `json:"processorIds"`
	}
	v1Get(t, base+"/v1/pipelines/applied", &pl)
	if len(pl.ProcessorIDs) != 1 {
		t.Fatalf("processors of applied: %v", pl.ProcessorIDs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/processors/"+pl.ProcessorIDs[0]+"/inspect-out", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	res.Body.Close()
	if err != nil || !strings.Contains(strings.ReplaceAll(line, " ", ""), `"added":"yes"`) {
		t.Errorf("a record out of the new processor: %v %q", err, line)
	}
	// An invalid change is refused and changes nothing.
	code, body = send(http.MethodPut, "/v1/connectors/applied:gen", `{"config":{"settings":{"format.options.id":"int","rate":"fast"}}}`)
	if code != http.StatusBadRequest || !strings.Contains(body, `"code":3`) || !strings.Contains(body, "rate") {
		t.Errorf("an invalid rate: %d %s", code, body)
	}
	var c struct {
		Config struct {
			Settings map[string]string `json:"settings"`
		} `json:"config"`
	}
	v1Get(t, base+"/v1/connectors/applied:gen", &c)
	if c.Config.Settings["rate"] != "7" {
		t.Errorf("after the refused change: %v", c.Config.Settings)
	}
}

// hasRow reports whether a line of table holds every cell.
func hasRow(table string, cells []string) bool {
	for _, line := range strings.Split(table, "\n") {
		ok := true
		for _, c := range cells {
			if !strings.Contains(line, c) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// Without a token another OS user of the machine is refused on Conduit's
// API v1 as on conduit's own: Conduit's CLI and curl alike.
func TestConduitV1RefusesOtherUsers(t *testing.T) {
	_, testBin := publicCopies(t)
	cli := conduitUpstreamCLI(t)
	public := filepath.Join(filepath.Dir(testBin), "conduit-upstream")
	b, err := os.ReadFile(cli)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(public, b, 0o755); err != nil {
		t.Fatal(err)
	}
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 10))
	p := w.start("run", "--api.grpc.address", "127.0.0.1:0")
	httpAddr, grpcAddr := apiAddress(t, p), grpcAPIAddress(t, p)

	for _, url := range []string{"http://" + httpAddr + "/v1/pipelines", "http://" + grpcAddr + "/v1/connectors/plugins"} {
		out := getAsNobody(t, testBin, url, "")
		if !strings.HasPrefix(out, "status 403") || !strings.Contains(out, `"code":7`) || !strings.Contains(out, "uid 65534") {
			t.Errorf("GET %s as nobody: %s", url, out)
		}
	}
	res := asNobody(t, public, cliEnv(), "pipelines", "ls", "--api.grpc.address", grpcAddr)
	if res.code == 0 || !strings.Contains(res.stdout+res.stderr, "PermissionDenied") || !strings.Contains(res.stdout+res.stderr, "uid 65534") {
		t.Errorf("Conduit's CLI as nobody: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// The same CLI as conduit's own user is answered.
	if res := runUpstream(t, cli, grpcAddr, "pipelines", "ls"); res.code != 0 || !strings.Contains(res.stdout, "seq") {
		t.Errorf("Conduit's CLI as conduit's user: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
