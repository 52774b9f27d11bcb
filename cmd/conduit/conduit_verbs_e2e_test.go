package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// These tests run Conduit's CLI verbs of this binary (connectors,
// processors, connector-plugins, processor-plugins, pipelines ls, inspect,
// config, pipelines init) the way a Conduit user does, against a running
// conduit: the tables, and the --json shapes Conduit's CLI prints.

// verbs runs this binary's `conduit <args>` in the workspace with env.
func (w *workspace) verbs(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	return conduitCLI(t, w.dir, env, args...)
}

// mustVerbs is verbs that must succeed; it returns stdout.
func (w *workspace) mustVerbs(t *testing.T, env []string, args ...string) string {
	t.Helper()
	res := w.verbs(t, env, args...)
	if res.code != 0 {
		t.Fatalf("conduit %s: exit %d\n%s%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	}
	return res.stdout
}

// decodeJSON decodes the --json output of a command into v.
func decodeJSON(t *testing.T, what, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, out)
	}
}

func TestConduitVerbsAgainstConduit(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, conduitV1Pipeline)
	p := w.start("run", "--api.grpc.address", "127.0.0.1:0")
	httpAddr, grpcAddr := apiAddress(t, p), grpcAPIAddress(t, p)
	eventually(t, pollInterval, func() bool { return v1Status(t, "http://"+httpAddr, "seq") == "STATUS_RUNNING" },
		func() string { return "seq never ran:\n" + p.stderr.String() })
	// Both ways of pointing at conduit: the API's port (config), and
	// Conduit's flag for its gRPC address.
	viaHTTP := cliEnv("CONDUIT_API_HTTP_ADDRESS=" + httpAddr)
	grpcFlag := []string{"--api.grpc.address", grpcAddr}

	t.Run("tables", func(t *testing.T) {
		for _, tc := range []struct {
			args   []string
			header []string
			rows   map[string][]string // id -> cells that follow it
		}{
			{[]string{"connectors", "ls"}, []string{"ID", "PLUGIN", "TYPE", "PIPELINE_ID", "CREATED", "LAST_UPDATED"},
				map[string][]string{"seq:gen": {"builtin:generator", "source", "seq"}, "seq:out": {"builtin:file", "destination", "seq"}}},
			{[]string{"connectors", "list", "--pipeline-id", "seq"}, []string{"ID", "PLUGIN"},
				map[string][]string{"seq:gen": {"builtin:generator"}}},
			{[]string{"processors", "ls"}, []string{"ID", "PLUGIN", "PARENT", "CONDITION", "CREATED", "LAST_UPDATED"},
				map[string][]string{"seq:gen:tag": {"field.set", "connector", "(seq:gen)"}}},
			{[]string{"connector-plugins", "ls"}, []string{"NAME", "SUMMARY"},
				map[string][]string{"builtin:generator@v0.1.0": {"Generates", "records,"}, "builtin:file@v0.1.0": nil, "builtin:log@v0.1.0": nil}},
			{[]string{"processor-plugins", "ls", "--name", "field"}, []string{"NAME", "SUMMARY"},
				map[string][]string{"builtin:field.set@v0.1.0": nil}},
			{[]string{"pipelines", "ls"}, []string{"ID", "STATUS"}, map[string][]string{"seq": {"running"}}},
		} {
			for _, via := range []struct {
				name string
				env  []string
				args []string
			}{{"api.http.address", viaHTTP, nil}, {"--api.grpc.address", cliEnv(), grpcFlag}} {
				out := w.mustVerbs(t, via.env, append(slices.Clone(tc.args), via.args...)...)
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if got := strings.Fields(lines[0]); !slices.Equal(got[:len(tc.header)], tc.header) {
					t.Errorf("%v via %s: header %q, want it to start with %q", tc.args, via.name, lines[0], tc.header)
				}
				rows := tableRows(out)
				for id, cells := range tc.rows {
					row, ok := rows[id]
					if !ok {
						t.Errorf("%v via %s: no row %s in\n%s", tc.args, via.name, id, out)
						continue
					}
					if row = row[1:]; len(row) < len(cells) || !slices.Equal(row[:len(cells)], cells) {
						t.Errorf("%v via %s: row %s is %q, want it to start with %q", tc.args, via.name, id, row, cells)
					}
				}
				if tc.args[0] == "processor-plugins" && strings.Contains(out, "json.decode") {
					t.Errorf("--name field lists json.decode:\n%s", out)
				}
			}
		}
	})

	t.Run("json", func(t *testing.T) {
		var connectors struct {
			Connectors []struct {
				ID           string   `json:"id"`
				Type         string   `json:"type"`
				Plugin       string   `json:"plugin"`
				PipelineID   string   `json:"pipelineId"`
				ProcessorIDs []string `json:"processorIds"`
				Config       struct {
					Settings map[string]string `json:"settings"`
				} `json:"config"`
			} `json:"connectors"`
		}
		decodeJSON(t, "connectors ls --json", w.mustVerbs(t, viaHTTP, "connectors", "ls", "--json"), &connectors)
		if c := connectors.Connectors; len(c) != 2 || c[0].ID != "seq:gen" || c[0].Type != "TYPE_SOURCE" || c[0].PipelineID != "seq" ||
			!slices.Equal(c[0].ProcessorIDs, []string{"seq:gen:tag"}) || c[0].Config.Settings["rate"] != "200" || c[1].Plugin != "builtin:file" {
			t.Errorf("connectors ls --json: %+v", c)
		}

		var described struct {
			Connector struct {
				ID string `json:"id"`
			} `json:"connector"`
			Processors []struct {
				ID     string `json:"id"`
				Plugin string `json:"plugin"`
				Parent struct {
					Type string `json:"type"`
					ID   string `json:"id"`
				} `json:"parent"`
			} `json:"processors"`
		}
		decodeJSON(t, "connectors describe --json", w.mustVerbs(t, cliEnv(), "connectors", "describe", "seq:gen", "--json", grpcFlag[0], grpcFlag[1]), &described)
		if described.Connector.ID != "seq:gen" || len(described.Processors) != 1 || described.Processors[0].ID != "seq:gen:tag" ||
			described.Processors[0].Parent.Type != "TYPE_CONNECTOR" || described.Processors[0].Parent.ID != "seq:gen" {
			t.Errorf("connectors describe --json: %+v", described)
		}

		var processors struct {
			Processors []struct {
				ID     string `json:"id"`
				Plugin string `json:"plugin"`
			} `json:"processors"`
		}
		decodeJSON(t, "processors ls --json", w.mustVerbs(t, viaHTTP, "processors", "ls", "--json"), &processors)
		if len(processors.Processors) != 1 || processors.Processors[0].ID != "seq:gen:tag" || processors.Processors[0].Plugin != "field.set" {
			t.Errorf("processors ls --json: %+v", processors)
		}
		var processor struct {
			ID     string `json:"id"`
			Config struct {
				Settings map[string]string `json:"settings"`
				Workers  int               `json:"workers"`
			} `json:"config"`
		}
		decodeJSON(t, "processors describe --json", w.mustVerbs(t, viaHTTP, "processors", "describe", "seq:gen:tag", "--json"), &processor)
		if processor.ID != "seq:gen:tag" || processor.Config.Settings["value"] != "seen" || processor.Config.Workers != 1 {
			t.Errorf("processors describe --json: %+v", processor)
		}

		var plugins struct {
			Plugins []struct {
				Name         string         `json:"name"`
				SourceParams map[string]any `json:"sourceParams"`
			} `json:"plugins"`
		}
		decodeJSON(t, "connector-plugins ls --json", w.mustVerbs(t, viaHTTP, "connector-plugins", "ls", "--json"), &plugins)
		names := make([]string, 0, len(plugins.Plugins))
		for _, p := range plugins.Plugins {
			names = append(names, p.Name)
		}
		// Conduit's connectors compiled in are listed at their module's
		// version, as Conduit lists its built-in ones.
		kafka := "builtin:kafka@" + goModVersion(t, "github.com/conduitio/conduit-connector-kafka")
		postgres := "builtin:postgres@" + goModVersion(t, "github.com/conduitio/conduit-connector-postgres")
		if !slices.IsSorted(names) || !slices.Contains(names, "builtin:generator@v0.1.0") || !slices.Contains(names, kafka) ||
			!slices.Contains(names, postgres) {
			t.Errorf("connector-plugins ls --json names: %v, want %s and %s among them", names, kafka, postgres)
		}
		var plugin struct {
			Name         string `json:"name"`
			SourceParams map[string]struct {
				Type    string `json:"type"`
				Default string `json:"default"`
			} `json:"sourceParams"`
		}
		decodeJSON(t, "connector-plugins describe --json", w.mustVerbs(t, viaHTTP, "connector-plugins", "describe", "generator", "--json"), &plugin)
		if plugin.Name != "builtin:generator@v0.1.0" || plugin.SourceParams["rate"].Type != "TYPE_FLOAT" {
			t.Errorf("connector-plugins describe generator --json: %+v", plugin)
		}
		var pplugin struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		}
		decodeJSON(t, "processor-plugins describe --json", w.mustVerbs(t, viaHTTP, "processor-plugins", "describe", "field.set", "--json"), &pplugin)
		if pplugin.Name != "builtin:field.set@v0.1.0" || pplugin.Parameters["field"] == nil || pplugin.Parameters["value"] == nil {
			t.Errorf("processor-plugins describe field.set --json: %+v", pplugin)
		}

		var pipelines struct {
			Pipelines []struct {
				ID    string `json:"id"`
				State struct {
					Status string `json:"status"`
				} `json:"state"`
			} `json:"pipelines"`
		}
		decodeJSON(t, "pipelines ls --json", w.mustVerbs(t, viaHTTP, "pipelines", "ls", "--json"), &pipelines)
		if len(pipelines.Pipelines) != 1 || pipelines.Pipelines[0].ID != "seq" || pipelines.Pipelines[0].State.Status != "STATUS_RUNNING" {
			t.Errorf("pipelines ls --json: %+v", pipelines)
		}
	})

	t.Run("describe", func(t *testing.T) {
		out := w.mustVerbs(t, viaHTTP, "connectors", "describe", "seq:gen")
		for _, want := range []string{"ID: seq:gen\n", "Type: source\n", "Plugin: builtin:generator\n", "Pipeline ID: seq\n",
			"Config:\n  format.options.id: int\n  format.type: structured\n  rate: 200\n", "Processors:\n  - ID: seq:gen:tag\n    Plugin: field.set\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("connectors describe seq:gen: no %q in\n%s", want, out)
			}
		}
		out = w.mustVerbs(t, viaHTTP, "processors", "desc", "seq:gen:tag")
		for _, want := range []string{"ID: seq:gen:tag\n", "Parent: connector (seq:gen)\n", "Plugin: field.set\n", "  value: seen\n", "Workers: 1\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("processors describe seq:gen:tag: no %q in\n%s", want, out)
			}
		}
		out = w.mustVerbs(t, viaHTTP, "connector-plugins", "describe", "builtin:file")
		for _, want := range []string{"Name: builtin:file@v0.1.0\n", "\nSource Parameters:\n", "\nDestination Parameters:\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("connector-plugins describe builtin:file: no %q in\n%s", want, out)
			}
		}
		out = w.mustVerbs(t, viaHTTP, "processor-plugins", "describe", "field.set")
		if !strings.Contains(out, "\nParameters:\n") || !regexpRow(out, "field", "string", "required") {
			t.Errorf("processor-plugins describe field.set:\n%s", out)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"connectors", "describe", "seq:nope"}, `connector "seq:nope" not found`},
			{[]string{"processors", "describe", "seq:gen:nope"}, `processor "seq:gen:nope" not found`},
			{[]string{"connector-plugins", "describe", "nope"}, `connector plugin "nope" not found`},
			{[]string{"processor-plugins", "describe", "nope"}, `processor plugin "nope" not found`},
			{[]string{"inspect", "connector", "seq:nope", "-n", "1"}, `connector "seq:nope" not found`},
			{[]string{"inspect", "processor", "seq:gen:nope", "-n", "1"}, `processor "seq:gen:nope" not found`},
			{[]string{"connectors", "describe"}, "want one connector id"},
		} {
			res := w.verbs(t, viaHTTP, tc.args...)
			if res.code == 0 || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("conduit %s: exit %d, stderr %q; want an error with %q", strings.Join(tc.args, " "), res.code, res.stderr, tc.want)
			}
		}
	})

	t.Run("inspect", func(t *testing.T) {
		var recs []struct {
			Position  []byte            `json:"position"`
			Operation string            `json:"operation"`
			Metadata  map[string]string `json:"metadata"`
			Payload   struct {
				After map[string]any `json:"after"`
			} `json:"payload"`
		}
		out := w.mustVerbs(t, viaHTTP, "inspect", "connector", "seq:gen", "-n", "3")
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var rec struct {
				Position  []byte            `json:"position"`
				Operation string            `json:"operation"`
				Metadata  map[string]string `json:"metadata"`
				Payload   struct {
					After map[string]any `json:"after"`
				} `json:"payload"`
			}
			decodeJSON(t, "inspect connector", l, &rec)
			recs = append(recs, rec)
		}
		if len(recs) != 3 {
			t.Fatalf("inspect connector seq:gen -n 3: %d records:\n%s", len(recs), out)
		}
		for _, r := range recs {
			if r.Operation != "create" || r.Metadata["conduit.source.connector.id"] != "seq:gen" || r.Payload.After["id"] == nil || len(r.Position) == 0 {
				t.Errorf("inspect connector: record %+v, want a generator record read by seq:gen", r)
			}
			if _, tagged := r.Metadata["tag"]; tagged {
				t.Errorf("inspect connector seq:gen shows a record after its processor: %+v", r)
			}
		}

		var msg struct {
			Record struct {
				Metadata map[string]string `json:"metadata"`
				Payload  struct {
					After struct {
						StructuredData map[string]any `json:"structuredData"`
					} `json:"after"`
				} `json:"payload"`
			} `json:"record"`
		}
		out = w.mustVerbs(t, cliEnv(), "inspect", "processor", "seq:gen:tag", "--out", "-n", "1", "--json", grpcFlag[0], grpcFlag[1])
		decodeJSON(t, "inspect processor --out --json", strings.TrimSpace(out), &msg)
		if msg.Record.Metadata["tag"] != "seen" || msg.Record.Payload.After.StructuredData["id"] == nil {
			t.Errorf("inspect processor seq:gen:tag --out --json: %s", out)
		}
		out = w.mustVerbs(t, viaHTTP, "inspect", "processor", "seq:gen:tag", "-n", "1")
		if strings.Contains(out, `"tag":"seen"`) || !strings.Contains(out, `"conduit.source.connector.id":"seq:gen"`) {
			t.Errorf("inspect processor seq:gen:tag (in) shows %s; want the record before the processor", out)
		}
	})

	t.Run("inspect follows until interrupted", func(t *testing.T) {
		cmd := exec.Command(w.bin, "inspect", "connector", "seq:out")
		cmd.Dir, cmd.Env = w.dir, viaHTTP
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(stdout)
		for i := range 5 {
			if !sc.Scan() {
				t.Fatalf("inspect connector seq:out ended after %d records: %v", i, sc.Err())
			}
			if !strings.Contains(sc.Text(), `"tag":"seen"`) {
				t.Errorf("inspect connector seq:out: %s; want the records the destination is given (processed)", sc.Text())
			}
		}
	})
}

// regexpRow reports whether a line of out has all the cells, in order.
func regexpRow(out string, cells ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		i := 0
		for _, c := range f {
			if i < len(cells) && strings.HasPrefix(c, cells[i]) {
				i++
			}
		}
		if i == len(cells) {
			return true
		}
	}
	return false
}

// Without a running conduit, every verb says where it looked and how to
// start one.
func TestConduitVerbsWithoutConduit(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	addr := freeAddress(t)
	for _, args := range [][]string{
		{"connectors", "ls"}, {"processors", "ls"}, {"connector-plugins", "ls"}, {"processor-plugins", "describe", "x"},
		{"inspect", "connector", "a:b"}, {"pipelines", "ls", "--json"},
	} {
		res := w.verbs(t, cliEnv(), append(args, "--api.grpc.address", addr)...)
		if res.code == 0 || !strings.Contains(res.stderr, "cannot reach the conduit API at "+addr) || !strings.Contains(res.stderr, "conduit run") {
			t.Errorf("conduit %s without conduit: exit %d, stderr %q", strings.Join(args, " "), res.code, res.stderr)
		}
	}
}

// With api.auth.token set, the verbs send the token they are configured
// with; without it they say where to set it.
func TestConduitVerbsWithToken(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, conduitV1Pipeline)
	const token = "verbs-e2e-token-0123456789abcdef"
	p := w.startWithEnv([]string{"CONDUIT_API_AUTH_TOKEN=" + token}, "run")
	addr := apiAddress(t, p)
	res := w.verbs(t, cliEnv("CONDUIT_API_HTTP_ADDRESS="+addr), "connectors", "ls")
	if res.code == 0 || !strings.Contains(res.stderr, "requires a token") {
		t.Errorf("connectors ls without the token: exit %d, stderr %q", res.code, res.stderr)
	}
	res = w.verbs(t, cliEnv("CONDUIT_API_HTTP_ADDRESS="+addr, "CONDUIT_API_AUTH_TOKEN=wrong-token-0123456789abcdef"), "connectors", "ls")
	if res.code == 0 || !strings.Contains(res.stderr, "rejected the token") {
		t.Errorf("connectors ls with a wrong token: exit %d, stderr %q", res.code, res.stderr)
	}
	out := w.mustVerbs(t, cliEnv("CONDUIT_API_HTTP_ADDRESS="+addr, "CONDUIT_API_AUTH_TOKEN="+token), "connectors", "ls")
	if _, ok := tableRows(out)["seq:gen"]; !ok {
		t.Errorf("connectors ls with the token:\n%s", out)
	}
}

// `conduit config` shows what `conduit run` would use and where each value
// came from.
func TestConduitConfigCommand(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	w.write("conduit.yml", "log:\n  level: warn\napi:\n  auth:\n    token: config-e2e-secret-0123456789\n")
	out := w.mustVerbs(t, cliEnv("CONDUIT_DB_TYPE=inmemory"), "config", "--api.http.address", "127.0.0.1:9999")
	for _, want := range []string{
		"log.level: warn", "# conduit.yml:2",
		"db.type: inmemory", "# env CONDUIT_DB_TYPE",
		"api.http.address: 127.0.0.1:9999", "# flag --api.http.address",
		"pipelines.path: ./pipelines", "# default",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("conduit config: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "config-e2e-secret") {
		t.Errorf("conduit config shows the token:\n%s", out)
	}
	var m map[string]struct{ Value, Source string }
	decodeJSON(t, "config --json", w.mustVerbs(t, cliEnv(), "config", "--json"), &m)
	if m["log.level"].Value != "warn" || m["log.level"].Source != "conduit.yml:2" || m["api.auth.token"].Value != "*****" ||
		m["db.type"].Source != "default" {
		t.Errorf("config --json: log.level %+v, api.auth.token %+v, db.type %+v", m["log.level"], m["api.auth.token"], m["db.type"])
	}
	res := w.verbs(t, cliEnv(), "config", "--db.type", "postgres")
	if res.code == 0 || !strings.Contains(res.stderr, "db.postgres.url") {
		t.Errorf("config with db.type postgres and no URL: exit %d, stderr %q; want run's refusal", res.code, res.stderr)
	}
}

// The demo `pipelines init` writes runs as written: its generator's
// records reach the log destination.
func TestPipelinesInitDemoRuns(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	out := w.mustVerbs(t, cliEnv(), "pipelines", "init")
	path := filepath.Join("pipelines", "demo-pipeline.yaml")
	if !strings.Contains(out, path) {
		t.Errorf("pipelines init: %q does not name %s", out, path)
	}
	if res := w.verbs(t, cliEnv(), "pipelines", "init"); res.code == 0 || !strings.Contains(res.stderr, "already exists") {
		t.Errorf("pipelines init again: exit %d, stderr %q; want a refusal to overwrite", res.code, res.stderr)
	}
	// Conduit's flags: a name, the connectors, and where to write.
	w.mustVerbs(t, cliEnv(), "pipelines", "init", "mine", "--source", "generator", "--destination", "file", "--pipelines.path", "elsewhere")
	if data, err := os.ReadFile(filepath.Join(w.dir, "elsewhere", "mine.yaml")); err != nil ||
		!strings.Contains(string(data), "plugin: 'generator'") || !strings.Contains(string(data), "plugin: 'file'") {
		t.Errorf("pipelines init mine --pipelines.path elsewhere: %v\n%s", err, data)
	}
	p := w.start("run")
	eventually(t, pollInterval, func() bool {
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		for sc.Scan() {
			var l struct {
				Msg    string `json:"msg"`
				Record struct {
					Payload struct {
						After map[string]any `json:"after"`
					} `json:"payload"`
				} `json:"record"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Record.Payload.After["airline"] != nil && l.Record.Payload.After["scheduledDeparture"] != nil {
				return true
			}
		}
		return false
	}, func() string { return "the demo pipeline logged no generated record:\n" + p.stderr.String() })
	stopProcess(t, p)
}

// goModVersion is the version go.mod requires of module.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("go.mod does not require %s", module)
	return ""
}
