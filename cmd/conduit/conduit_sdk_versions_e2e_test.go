package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The connector of testdata/conduit-sdk-v0.12, built with Conduit's
// connector SDK v0.12 in a module of its own, once per test process.
var (
	sdk012Once sync.Once
	sdk012Path string
	sdk012Err  error
)

func sdk012Connector(t *testing.T) string {
	t.Helper()
	sdk012Once.Do(func() {
		dir, err := os.MkdirTemp("", "conduit-e2e-sdk012-")
		if err != nil {
			sdk012Err = err
			return
		}
		src, err := os.ReadFile(filepath.Join("testdata", "conduit-sdk-v0.12", "main.go"))
		if err != nil {
			sdk012Err = err
			return
		}
		mod := "module sdk012connector\n\ngo 1.24\n\nrequire github.com/conduitio/conduit-connector-sdk v0.12.0\n"
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
			sdk012Err = err
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
			sdk012Err = err
			return
		}
		sdk012Path = filepath.Join(dir, "connector")
		cmd := exec.Command("go", "build", "-o", sdk012Path, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GONOSUMDB=github.com/conduitio", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			sdk012Err = fmt.Errorf("building the SDK v0.12 connector: %v\n%s", err, out)
		}
	})
	if sdk012Err != nil {
		t.Fatal(sdk012Err)
	}
	return sdk012Path
}

// A connector built with Conduit's SDK v0.12 has no `specs` command; it is
// found by its specification's name nonetheless, under any file name, with
// or without the standalone: prefix, and runs.
func TestConduitSDKv012ConnectorIsFoundByItsSpecificationName(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: sdk012
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: 200
      - id: out
        type: destination
        plugin: standalone:sdk012@v1.2.3
        settings:
          path: ./keys.txt
      - id: unprefixed
        type: destination
        plugin: sdk012
        settings:
          path: ./keys2.txt
`)
	bin, err := os.ReadFile(sdk012Connector(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(w.dir, "connectors"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, "connectors", "conduit-connector-nats-like"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("conduit.yml", "log:\n  format: json\n  level: info\nconnectors:\n  path: ./connectors\n")
	p := w.start("run")
	waitForRecords(t, p, filepath.Join(w.dir, "keys.txt"), 10)
	// Unprefixed, the name resolves to the standalone connector first, as
	// under Conduit.
	waitForRecords(t, p, filepath.Join(w.dir, "keys2.txt"), 10)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}
	if msg := p.stderr.String(); !strings.Contains(msg, "found by its Conduit specification name") {
		t.Errorf("the connector was not found by its specification name:\n%s", msg)
	}
}
