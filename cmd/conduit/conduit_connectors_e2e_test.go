package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Conduit's own connectors, built from their published modules as a user
// builds them, once per test process, in a module of their own so that the
// runtime's go.mod stays out of it.
var (
	conduitConnectorsOnce sync.Once
	conduitConnectorsDir  string
	conduitConnectorsErr  error
)

// conduitConnectorVersions are the versions Conduit itself ships.
var conduitConnectorVersions = map[string]string{
	"generator": "v0.10.4",
	"file":      "v0.10.8",
}

func conduitConnectors(t *testing.T) string {
	t.Helper()
	conduitConnectorsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "conduit-e2e-conduit-connectors-")
		if err != nil {
			conduitConnectorsErr = err
			return
		}
		conduitConnectorsDir = dir
		mod := "module conduitconnectors\n\ngo 1.24\n\nrequire (\n"
		for name, version := range conduitConnectorVersions {
			mod += fmt.Sprintf("\tgithub.com/conduitio/conduit-connector-%s %s\n", name, version)
		}
		mod += ")\n"
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
			conduitConnectorsErr = err
			return
		}
		for name := range conduitConnectorVersions {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "conduit-connector-"+name),
				"github.com/conduitio/conduit-connector-"+name+"/cmd/connector")
			cmd.Dir = dir
			// The checksum database may not know these modules; the hashes
			// land in the temporary go.sum only.
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GONOSUMDB=github.com/conduitio", "GOWORK=off")
			if out, err := cmd.CombinedOutput(); err != nil {
				conduitConnectorsErr = fmt.Errorf("building Conduit's %s connector: %v\n%s", name, err, out)
				return
			}
		}
	})
	if conduitConnectorsErr != nil {
		t.Fatal(conduitConnectorsErr)
	}
	return conduitConnectorsDir
}

// conduitWorkspace is a workspace with Conduit's connectors installed in
// ./connectors under the file names their builds have.
func conduitWorkspace(t *testing.T, pipeline string) *workspace {
	t.Helper()
	w := newWorkspace(t, pipeline)
	src := conduitConnectors(t)
	if err := os.MkdirAll(filepath.Join(w.dir, "connectors"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name := range conduitConnectorVersions {
		bin, err := os.ReadFile(filepath.Join(src, "conduit-connector-"+name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.dir, "connectors", "conduit-connector-"+name), bin, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// A pipeline names Conduit's connectors as a Conduit user does, by the
// name in their specification; records move from the runtime's generator
// through Conduit's file destination, and from Conduit's generator into
// the runtime's file destination.
func TestConduitStandaloneConnectorsMoveRecords(t *testing.T) {
	t.Parallel()
	w := conduitWorkspace(t, `version: "2.2"
pipelines:
  - id: into-conduit-file
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: 500
      - id: out
        type: destination
        plugin: standalone:file
        settings:
          path: ./conduit-file.jsonl
    error-recovery:
      min-delay: 100ms
  - id: from-conduit-generator
    connectors:
      - id: gen
        type: source
        plugin: standalone:generator@v0.10.4
        settings:
          format.type: structured
          format.options.id: int
          format.options.name: string
          rate: 500
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./from-conduit.jsonl
    error-recovery:
      min-delay: 100ms
`)
	p := w.start("run")
	into := filepath.Join(w.dir, "conduit-file.jsonl")
	waitForRecords(t, p, into, 50)
	from := filepath.Join(w.dir, "from-conduit.jsonl")
	waitForChanges(t, p, from, 50)
	for i, c := range changes(t, from)[:50] {
		if c.Operation != "create" || c.Payload.After == nil || c.Payload.After.Name == "" {
			t.Fatalf("record %d from Conduit's generator: %+v, want a create with a name", i+1, c)
		}
	}
	// Integers keep their type across the process boundary (the SDK
	// encodes them with a schema the runtime serves and decodes).
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if first := strings.SplitN(string(data), "\n", 2)[0]; strings.Contains(first, "e+") {
		t.Errorf("an integer became a float on the way: %s", first)
	}
	// The runtime names the standalone source in the records as Conduit
	// does ("pipeline:connector") and stamps when it read them.
	var first struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(string(data), "\n", 2)[0]), &first); err != nil {
		t.Fatal(err)
	}
	if md := first.Metadata; md["conduit.source.connector.id"] != "from-conduit-generator:gen" || md["opencdc.readAt"] == "" || md["opencdc.version"] != "" {
		t.Errorf("metadata of a record of Conduit's generator: %v, want conduit.source.connector.id from-conduit-generator:gen, opencdc.readAt and no opencdc.version", md)
	}

	// The plugin crashes: the pipeline recovers with a new process and the
	// sequence goes on without a gap.
	pid := childPID(t, p.cmd.Process.Pid, "conduit-connector-file")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e := waitForEvent(t, p, "into-conduit-file", "recovering", 1)
	if e.Class != "transient" {
		t.Errorf("recovering after the plugin was killed: %+v, want transient", e)
	}
	waitForEvent(t, p, "into-conduit-file", "recovered", 1)
	before := len(ids(t, into))
	waitForRecords(t, p, into, before+50)
	stopProcess(t, p)
	// A batch the plugin wrote but did not ack before it died comes again.
	checkSequence(t, ids(t, into), 1024)
	if pids := append(childPIDs(p.cmd.Process.Pid, "conduit-connector-file"), childPIDs(p.cmd.Process.Pid, "conduit-connector-generator")...); len(pids) != 0 {
		t.Fatalf("plugin processes left behind: %v", pids)
	}
}

// A Conduit connector that refuses its settings degrades its pipeline with
// the connector's own message; a name that nothing in connectors.path has
// says where it looked.
func TestConduitStandaloneConnectorThatCannotRunIsFatal(t *testing.T) {
	t.Parallel()
	w := conduitWorkspace(t, `version: "2.2"
pipelines:
  - id: bad-settings
    connectors:
      - id: gen
        type: source
        plugin: standalone:generator
        settings:
          format.type: sideways
      - id: out
        type: destination
        plugin: builtin:log
  - id: no-such
    connectors:
      - id: gen
        type: source
        plugin: standalone:kafka
      - id: out
        type: destination
        plugin: builtin:log
`)
	p := w.start("run")
	e := waitForEvent(t, p, "bad-settings", "degraded", 1)
	if e.Class != "fatal" || !strings.Contains(e.Error, "standalone:generator") || !strings.Contains(e.Error, "sideways") {
		t.Errorf("bad-settings: degraded %+v, want a fatal error with the connector's message", e)
	}
	e = waitForEvent(t, p, "no-such", "degraded", 1)
	if e.Class != "fatal" || !strings.Contains(e.Error, `Conduit connector named "kafka"`) || !strings.Contains(e.Error, "connectors") {
		t.Errorf("no-such: degraded %+v, want a fatal error saying where it looked", e)
	}
	stopProcess(t, p)
}

// A Conduit connector does not outlive a conduit that was SIGKILLed: its
// SDK does not notice that the runtime went away, and left running it
// would hold what it opened (a replication slot, say) from the plugin the
// next conduit starts.
func TestConduitStandaloneConnectorDiesWithConduit(t *testing.T) {
	t.Parallel()
	w := conduitWorkspace(t, `version: "2.2"
pipelines:
  - id: gen
    connectors:
      - id: gen
        type: source
        plugin: standalone:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: 200
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
`)
	p := w.start("run")
	waitForChanges(t, p, filepath.Join(w.dir, "out.jsonl"), 10)
	plugin := childPID(t, p.cmd.Process.Pid, "conduit-connector-generator")
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	eventually(t, pollInterval, func() bool { return !processRuns(plugin) },
		func() string {
			return fmt.Sprintf("the plugin (pid %d) still runs after conduit was SIGKILLed", plugin)
		})
}

// processRuns reports whether pid is a process that has not exited (a
// zombie has).
func processRuns(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != "Z" && state != "X"
}
