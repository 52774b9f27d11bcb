package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// conduitInitDir is where testdata/conduit-init/conduit.yaml was written by
// Conduit's `conduit init`; its paths are absolute and start with it.
const conduitInitDir = "/tmp/conduit-workspace"

// A workspace made by Conduit's `conduit init` - its conduit.yaml, with
// Conduit's keys and none of conduit.yml, and its empty connectors/,
// processors/ and pipelines/ - runs here unchanged, with Conduit's run flags
// on the command line: the pipeline put in pipelines/ runs, the state goes
// to the badger directory conduit.yaml names, and the keys and flags that
// configure what this product lacks are named in one warning each.
func TestConduitInitWorkspaceRuns(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "conduit-init", "conduit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	w := &workspace{t: t, dir: t.TempDir(), bin: conduitBinary(t)}
	// What Conduit's init writes when run in w.dir.
	w.write("conduit.yaml", strings.ReplaceAll(string(data), conduitInitDir, w.dir))
	for _, d := range []string{"connectors", "processors", "pipelines"} {
		if err := os.Mkdir(filepath.Join(w.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.write("pipelines/seq.yaml", fmt.Sprintf(generatorToFile, 500))
	out := filepath.Join(w.dir, "out.jsonl")

	// Port 0 for both API addresses: tests run side by side.
	p := w.startWithEnv([]string{"CONDUIT_API_GRPC_ADDRESS=127.0.0.1:0"}, "run",
		"--preview.pipeline-arch-v2", "--dev.cpuprofile", filepath.Join(w.dir, "cpu.prof"),
		"--connectors.max-receive-record-size", "1048576", "--log.level", "trace",
		"--processors.path", filepath.Join(w.dir, "processors"))
	waitForRecords(t, p, out, 200)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGINT, want 0; output:\n%s", code, p.stderr.String())
	}
	if d := checkSequence(t, ids(t, out), 0); d != 0 {
		t.Fatalf("%d duplicates", d)
	}
	log := p.stderr.String()
	for _, want := range []string{
		"conduit.yaml: ignored 6 Conduit setting(s) this product does not have: connectors.max-receive-record-size, db.postgres.table, db.sqlite.path, db.sqlite.table, preview.pipeline-arch-v2, preview.pipeline-arch-v2-disable-metrics",
		"flags: ignored 3 Conduit setting(s) this product does not have: --connectors.max-receive-record-size, --dev.cpuprofile, --preview.pipeline-arch-v2",
		"log.level trace is Conduit's",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("output lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "unknown key") {
		t.Errorf("a key of Conduit's conduit.yaml was refused:\n%s", log)
	}
	// db.badger.path of conduit.yaml is where the state went.
	if st, err := os.Stat(filepath.Join(w.dir, "conduit.db")); err != nil || !st.IsDir() {
		t.Fatalf("no badger directory at conduit.yaml's db.badger.path: %v", err)
	}
}
