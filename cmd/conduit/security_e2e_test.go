package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the other OS user the security tests run clients as.
const nobody = 65534

// asNobody runs a copy of bin as nobody, in a directory nobody may enter,
// with env only (no CONDUIT_ variables of the test's own).
func asNobody(t *testing.T, bin string, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s as nobody: %v", bin, strings.Join(args, " "), err)
	}
	return res
}

// publicCopies copies the conduit binary and this test binary where
// nobody may run them: both are built in directories only root may enter.
func publicCopies(t *testing.T) (conduit, test string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running clients as another user needs root")
	}
	dir, err := os.MkdirTemp("", "conduit-e2e-public-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cp := func(from, name string) string {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dir, name)
		if err := os.WriteFile(to, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return to
	}
	return cp(conduitBinary(t), "conduit"), cp(os.Args[0], "conduit.test")
}

const httpGetEnv = "CONDUIT_TEST_HTTP_GET"

// TestHTTPGetProcess is the HTTP client the security tests run as nobody:
// it prints the status of a GET of $CONDUIT_TEST_HTTP_GET, sending
// $CONDUIT_TEST_HTTP_GET_TOKEN if set.
func TestHTTPGetProcess(t *testing.T) {
	url := os.Getenv(httpGetEnv)
	if url == "" {
		return // run by the security tests only
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token := os.Getenv(httpGetEnv + "_TOKEN"); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("status %d\n%s\n", resp.StatusCode, body)
}

// getAsNobody GETs url as nobody and returns the status line and body.
func getAsNobody(t *testing.T, testBin, url, token string) string {
	t.Helper()
	res := asNobody(t, testBin, cliEnv(httpGetEnv+"="+url, httpGetEnv+"_TOKEN="+token), "-test.run=^TestHTTPGetProcess$")
	if res.code != 0 {
		t.Fatalf("GET %s as nobody: exit %d\n%s%s", url, res.code, res.stdout, res.stderr)
	}
	return res.stdout
}

// Without a token only conduit's own user and root may call the API;
// another user of the machine needs the token, and gets it only when one
// is set. Health probes stay open to everyone.
func TestAPIAnswersOtherUsersOnlyWithTheToken(t *testing.T) {
	cli, testBin := publicCopies(t)

	t.Run("without a token", func(t *testing.T) {
		w := newWorkspace(t, fmt.Sprintf(generatorToFile, 10))
		p := w.start("run")
		addr := apiAddress(t, p)
		if out := w.mustPipelines(addr, "list"); !strings.Contains(out, "seq") {
			t.Fatalf("conduit's own user (root): %s", out)
		}
		res := asNobody(t, cli, cliEnv("CONDUIT_API_HTTP_ADDRESS="+addr), "pipelines", "list")
		if res.code == 0 || strings.Contains(res.stdout, "seq") {
			t.Fatalf("nobody listed the pipelines without a token: exit %d\n%s", res.code, res.stdout)
		}
		for _, want := range []string{"uid 65534", "api.auth.token", "Authorization: Bearer"} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("the refusal does not say %q:\n%s", want, res.stderr)
			}
		}
		for path, want := range map[string]string{"/healthz": "status 200", "/readyz": "status 200", "/metrics": "status 403", "/ui/": "status 403"} {
			if got := getAsNobody(t, testBin, "http://"+addr+path, ""); !strings.HasPrefix(got, want) {
				t.Errorf("GET %s as nobody: %s, want %s", path, got, want)
			}
		}
	})

	t.Run("with a token", func(t *testing.T) {
		const token = "e2e-token-0123456789"
		w := newWorkspace(t, fmt.Sprintf(generatorToFile, 10))
		w.write("conduit.yml", "log:\n  format: json\napi:\n  auth:\n    token: "+token+"\n")
		if err := os.Chmod(filepath.Join(w.dir, "conduit.yml"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := w.start("run")
		addr := apiAddress(t, p)
		// Root's CLI reads the token from conduit.yml.
		if out := w.mustPipelines(addr, "list"); !strings.Contains(out, "seq") {
			t.Fatalf("root with the token in conduit.yml: %s", out)
		}
		res := asNobody(t, cli, cliEnv("CONDUIT_API_HTTP_ADDRESS="+addr), "pipelines", "list")
		if res.code == 0 || !strings.Contains(res.stderr, "requires a token") {
			t.Fatalf("nobody without the token: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		res = asNobody(t, cli, cliEnv("CONDUIT_API_HTTP_ADDRESS="+addr, "CONDUIT_API_AUTH_TOKEN="+token), "pipelines", "list")
		if res.code != 0 || !strings.Contains(res.stdout, "seq") {
			t.Fatalf("nobody with the token: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		// A browser run by nobody loads the console, which asks for the
		// token and sends it with its API calls.
		for _, c := range []struct{ path, token, want string }{
			{"/ui/", "", "status 200"},
			{"/metrics", "", "status 401"},
			{"/metrics", token, "status 200"},
			{"/healthz", "", "status 200"},
		} {
			if got := getAsNobody(t, testBin, "http://"+addr+c.path, c.token); !strings.HasPrefix(got, c.want) {
				t.Errorf("GET %s as nobody (token %q): %.200s, want %s", c.path, c.token, got, c.want)
			}
		}
	})
}

const protectedFilesPipelines = `version: "2.2"
pipelines:
  - id: into-store
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings: {format.type: structured, format.options.id: int, rate: 100}
      - id: out
        type: destination
        plugin: builtin:file
        settings: {path: ./conduit.db/MANIFEST}
  - id: into-config
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings: {format.type: structured, format.options.id: int, rate: 100}
      - id: out
        type: destination
        plugin: builtin:file
        settings: {path: ./conduit.yml}
  - id: through-link
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings: {format.type: structured, format.options.id: int, rate: 100}
      - id: out
        type: destination
        plugin: builtin:file
        settings: {path: ./out.jsonl}
`

// A file destination never writes into conduit's store, configuration or
// pipeline files, nor through a symbolic link planted at its path: a path
// that names conduit's files is refused when the file is loaded (the
// pipeline is invalid, its error names the path and the setting), one
// that reaches them only through the file system degrades the pipeline at
// open with an error naming the path; the next start opens the store as
// before.
func TestFileDestinationRefusesConduitsOwnFiles(t *testing.T) {
	w := newWorkspace(t, protectedFilesPipelines)
	w.write("secret", "root only\n")
	if err := os.Symlink("secret", filepath.Join(w.dir, "out.jsonl")); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(w.dir, "conduit.yml"))
	if err != nil {
		t.Fatal(err)
	}
	p := w.start("run")
	addr := apiAddress(t, p)
	invalid := map[string][]string{
		"into-store":  {"./conduit.db/MANIFEST", "store", "settings.path"},
		"into-config": {"./conduit.yml", "configuration file", "settings.path"},
	}
	degraded := map[string][]string{
		"through-link": {"./out.jsonl", "symbolic link", "follow-symlinks"},
	}
	type pipelineJSON struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		LastError struct {
			Class   string `json:"class"`
			Message string `json:"message"`
		} `json:"last_error"`
		ConfigErrors []struct {
			Message string `json:"message"`
		} `json:"config_errors"`
	}
	var list struct {
		Pipelines []pipelineJSON `json:"pipelines"`
	}
	eventually(t, pollInterval, func() bool {
		if err := json.Unmarshal([]byte(w.mustPipelines(addr, "list", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		settled := 0
		for _, pl := range list.Pipelines {
			if (pl.Status == "PIPELINE_STATUS_DEGRADED" && degraded[pl.ID] != nil) || (pl.Status == "PIPELINE_STATUS_INVALID" && invalid[pl.ID] != nil) {
				settled++
			}
		}
		return settled == len(invalid)+len(degraded)
	}, func() string { return fmt.Sprintf("not all refused: %+v\n%s", list, p.stderr.String()) })
	for _, pl := range list.Pipelines {
		if want, ok := degraded[pl.ID]; ok {
			if pl.LastError.Class != "ERROR_CLASS_FATAL" {
				t.Errorf("%s: class %s, want fatal", pl.ID, pl.LastError.Class)
			}
			for _, s := range want {
				if !strings.Contains(pl.LastError.Message, s) {
					t.Errorf("%s: the error does not say %q: %s", pl.ID, s, pl.LastError.Message)
				}
			}
		}
		if want, ok := invalid[pl.ID]; ok {
			var msgs []string
			for _, e := range pl.ConfigErrors {
				msgs = append(msgs, e.Message)
			}
			for _, s := range want {
				if !strings.Contains(strings.Join(msgs, "\n"), s) {
					t.Errorf("%s: the configuration error does not say %q: %q", pl.ID, s, msgs)
				}
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(w.dir, "secret")); string(b) != "root only\n" {
		t.Errorf("the symbolic link's target was written: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.dir, "conduit.yml")); !bytes.Equal(b, config) {
		t.Errorf("conduit.yml was written: %q", b)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
	// The store opens again: nothing was appended to its MANIFEST.
	p = w.start("run")
	if out := w.mustPipelines(apiAddress(t, p), "list"); !strings.Contains(out, "into-store") {
		t.Fatalf("second start: %s\n%s", out, p.stderr.String())
	}
}

// Idle keep-alive connections holding every API connection do not lock
// out health probes or the CLI: the longest idle one makes room.
func TestIdleConnectionsDoNotLockOutTheAPI(t *testing.T) {
	const maxConns = 4
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 10))
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\napi:\n  http:\n    max-connections: %d\n", maxConns))
	p := w.start("run")
	addr := apiAddress(t, p)
	for range 3 * maxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(e2eTimeout))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a health check beyond %d idle connections: %v", maxConns, err)
		}
		_ = resp.Body.Close()
	}
	client := &http.Client{Timeout: e2eTimeout}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with every connection held idle: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	if out := w.mustPipelines(addr, "list"); !strings.Contains(out, "seq") {
		t.Fatalf("the CLI with every connection held idle: %s", out)
	}
}

// Conduit's own user holding more connections than the cap with uploads
// it never finishes (a request head with a large Content-Length, one byte
// of body) does not lock out health probes or the CLI: a call whose body
// has not arrived makes room as an idle connection does. (Seen with 1,030
// uploads against the default cap of 1,024; a small cap makes the same
// case quick and independent of the file limit.)
func TestUnfinishedUploadsDoNotLockOutHealth(t *testing.T) {
	const maxConns = 16
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 10))
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\napi:\n  http:\n    max-connections: %d\n", maxConns))
	p := w.start("run")
	addr := apiAddress(t, p)
	for i := range maxConns + 6 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "POST /v1/pipelines HTTP/1.1\r\nHost: "+addr+"\r\n"+
			"Content-Type: application/json\r\nContent-Length: 900000\r\n\r\n{"); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	// A probe gives up after a few seconds; the read timeout that ends an
	// upload (30 s) is far longer.
	client := &http.Client{Timeout: 10 * time.Second}
	for range 3 {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("/healthz with every connection held by an unfinished upload: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz: %d", resp.StatusCode)
		}
	}
	if out := w.mustPipelines(addr, "list"); !strings.Contains(out, "seq") {
		t.Fatalf("the CLI with every connection held by an unfinished upload: %s", out)
	}
}
