package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// `make test` is the one test command of the README: it prepares the
// machine itself (tools/test-deps.sh) and CI runs the same command. These
// tests run the script against fake commands on PATH and an empty sysroot,
// so they neither need nor change what this machine has.

const testDepsScript = "../../tools/test-deps.sh"

// fakeMachine is a PATH of fake commands and a sysroot for the script.
type fakeMachine struct {
	t       *testing.T
	bin     string // the only directory on PATH
	sysroot string
	log     string // every fake command appends its name and arguments here
}

func newFakeMachine(t *testing.T, uid int) *fakeMachine {
	t.Helper()
	m := &fakeMachine{t: t, bin: t.TempDir(), sysroot: t.TempDir()}
	m.log = filepath.Join(t.TempDir(), "calls")
	// id -u prints uid; id -u postgres fails unless a postgres user was
	// made with m.postgresUser.
	m.command("id", `if [ $# -gt 1 ]; then [ -e "`+m.bin+`/.postgres-user" ]; exit; fi; echo `+strconv.Itoa(uid))
	m.command("go", "exit 0")
	return m
}

// command makes a fake command that logs its call and runs body.
func (m *fakeMachine) command(name, body string) {
	m.t.Helper()
	script := "#!/bin/sh\necho \"" + name + " $*\" >> " + m.log + "\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(m.bin, name), []byte(script), 0o755); err != nil {
		m.t.Fatal(err)
	}
}

// real puts the machine's own command on the fake PATH.
func (m *fakeMachine) real(names ...string) {
	m.t.Helper()
	for _, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			m.t.Fatalf("%s: %v", name, err)
		}
		if err := os.Symlink(p, filepath.Join(m.bin, name)); err != nil {
			m.t.Fatal(err)
		}
	}
}

// file makes a file of the sysroot, executable when mode says so.
func (m *fakeMachine) file(path string, mode os.FileMode) {
	m.t.Helper()
	p := filepath.Join(m.sysroot, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, mode); err != nil {
		m.t.Fatal(err)
	}
}

// complete gives the machine everything the tests need.
func (m *fakeMachine) complete() {
	for _, c := range []string{"gcc", "initdb", "promtool", "runuser"} {
		m.command(c, "exit 0")
	}
	m.command("pg_isready", "exit 0")
	if err := os.WriteFile(filepath.Join(m.bin, ".postgres-user"), nil, 0o644); err != nil {
		m.t.Fatal(err)
	}
	m.file("usr/bin/chromium", 0o755)
	m.file("usr/include/stdlib.h", 0o644)
}

type scriptResult struct {
	code   int
	stderr string
	calls  []string
}

func (m *fakeMachine) run() scriptResult {
	m.t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		m.t.Fatal(err)
	}
	cmd := exec.Command(bash, testDepsScript)
	cmd.Env = []string{"PATH=" + m.bin, "TEST_DEPS_SYSROOT=" + m.sysroot, "HOME=" + m.t.TempDir()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	res := scriptResult{stderr: stderr.String()}
	if exit, ok := err.(*exec.ExitError); ok {
		res.code = exit.ExitCode()
	} else if err != nil {
		m.t.Fatal(err)
	}
	if b, err := os.ReadFile(m.log); err == nil {
		res.calls = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	return res
}

func (r scriptResult) called(prefix string) bool {
	for _, c := range r.calls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// Without root and without apt-get nothing can be installed: the script
// names every missing package and the one apt-get line that installs them,
// says root is needed, and fails before any test runs.
func TestMakeTestSaysWhatToInstallWhenItCannot(t *testing.T) {
	m := newFakeMachine(t, 1000)
	res := m.run()
	if res.code == 0 {
		t.Fatalf("exit 0 on a machine with nothing; stderr:\n%s", res.stderr)
	}
	for _, want := range []string{
		"make test: this machine lacks what the tests need:",
		"the Debian packages gcc libc6-dev postgresql chromium prometheus util-linux (not root and no apt-get",
		"as root: apt-get install gcc libc6-dev postgresql chromium prometheus util-linux",
		"root: one test mounts a tmpfs",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}

	// Everything installed but not root: root is the one thing named.
	m = newFakeMachine(t, 1000)
	m.complete()
	res = m.run()
	if res.code == 0 || !strings.Contains(res.stderr, "root: one test mounts a tmpfs") || strings.Contains(res.stderr, "Debian packages") {
		t.Errorf("not root, all installed: exit %d, stderr:\n%s", res.code, res.stderr)
	}

	// No go command: said, not installed from Debian (its go is older).
	m = newFakeMachine(t, 0)
	m.complete()
	if err := os.Remove(filepath.Join(m.bin, "go")); err != nil {
		t.Fatal(err)
	}
	res = m.run()
	if res.code == 0 || !strings.Contains(res.stderr, "Go 1.26 or newer: no 'go' on PATH") {
		t.Errorf("without go: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// As root with apt-get, what is missing is installed (prometheus without
// its recommended exporters), and nothing when nothing is missing.
func TestMakeTestInstallsWhatIsMissingAsRoot(t *testing.T) {
	m := newFakeMachine(t, 0)
	m.command("apt-get", "exit 0")
	m.command("pg_isready", "exit 0")
	res := m.run()
	if res.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
	for _, want := range []string{
		"apt-get update -qq",
		"apt-get install -y -qq gcc libc6-dev postgresql chromium util-linux",
		"apt-get install -y -qq --no-install-recommends prometheus",
	} {
		if !res.called(want) {
			t.Errorf("no call %q; calls:\n%s", want, strings.Join(res.calls, "\n"))
		}
	}

	// Only the client missing: only the client installed.
	m = newFakeMachine(t, 0)
	m.complete()
	pgIsReady := filepath.Join(m.bin, "pg_isready")
	if err := os.Remove(pgIsReady); err != nil {
		t.Fatal(err)
	}
	m.command("apt-get", `printf '#!/bin/sh\nexit 0\n' > "`+pgIsReady+`"; chmod +x "`+pgIsReady+`"`)
	m.real("chmod")
	if res := m.run(); res.code != 0 || !res.called("apt-get install -y -qq postgresql-client") {
		t.Errorf("client missing: exit %d, calls %q, stderr:\n%s", res.code, res.calls, res.stderr)
	}

	m = newFakeMachine(t, 0)
	m.command("apt-get", "exit 0")
	m.complete()
	if res := m.run(); res.code != 0 || res.called("apt-get") {
		t.Errorf("all installed: exit %d, calls %q, stderr:\n%s", res.code, res.calls, res.stderr)
	}
}

// The store and cluster tests need the machine's PostgreSQL at
// 127.0.0.1:5432: when it does not answer, the script starts it.
func TestMakeTestStartsTheMachinesPostgreSQL(t *testing.T) {
	m := newFakeMachine(t, 0)
	m.complete()
	m.real("ls", "sort", "tail", "seq", "sleep")
	started := filepath.Join(m.bin, ".started")
	m.command("pg_isready", `[ "$*" = "-q -h 127.0.0.1 -p 5432" ] && [ -e "`+started+`" ]`)
	m.command("pg_ctlcluster", `: > "`+started+`"`)
	m.file("etc/postgresql/15/main/postgresql.conf", 0o644)
	res := m.run()
	if res.code != 0 || !res.called("pg_ctlcluster --skip-systemctl-redirect 15 main start") {
		t.Fatalf("exit %d, calls %q, stderr:\n%s", res.code, res.calls, res.stderr)
	}

	// No cluster to start: a clear failure, not a test run against nothing.
	m = newFakeMachine(t, 0)
	m.complete()
	m.real("ls", "sort", "tail")
	m.command("pg_isready", "exit 2")
	res = m.run()
	if res.code == 0 || !strings.Contains(res.stderr, "no PostgreSQL answers on 127.0.0.1:5432") {
		t.Errorf("no cluster: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// `make test` runs the set-up before the tests, and CI runs `make test`
// and nothing else.
func TestMakeTestRunsTheSetUpFirst(t *testing.T) {
	out, err := exec.Command("make", "-C", "../..", "-n", "test").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	setup, tests := -1, -1
	for i, l := range lines {
		if strings.Contains(l, "tools/test-deps.sh") && setup < 0 {
			setup = i
		}
		if strings.Contains(l, " test -race ") {
			tests = i
		}
	}
	if setup < 0 || tests < 0 || setup > tests {
		t.Errorf("make test does not run tools/test-deps.sh before the tests:\n%s", out)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(ci), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "set ") || strings.HasPrefix(l, "cd ") {
			continue
		}
		if l != "exec make test" {
			t.Errorf(".ci/run does more than make test: %q", l)
		}
	}
}
