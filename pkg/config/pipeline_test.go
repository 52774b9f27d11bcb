package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// loadOK loads a directory or file that must load without errors.
func loadOK(t *testing.T, path string) []Pipeline {
	t.Helper()
	ps, errs := LoadPipelines(path)
	for _, err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	return ps
}

func byID(ps []Pipeline) map[string]Pipeline {
	m := make(map[string]Pipeline, len(ps))
	for _, p := range ps {
		m[p.ID] = p
	}
	return m
}

func TestLoadPipelinesValidExample(t *testing.T) {
	ps := loadOK(t, filepath.Join("testdata", "valid"))
	if len(ps) != 2 {
		t.Fatalf("got %d pipelines, want 2", len(ps))
	}
	// Sorted by path: valid/example.yml before valid/more/...
	eq(t, "first pipeline", ps[0].ID, "example-pipeline")
	eq(t, "second pipeline", ps[1].ID, "generator-to-log")

	t.Run("example-pipeline as Conduit writes it", func(t *testing.T) {
		p := ps[0]
		eq(t, "File", p.File, filepath.Join("testdata", "valid", "example.yml"))
		eq(t, "Line", p.Line, 5)
		eq(t, "Status", p.Status, StatusRunning)
		eq(t, "Name", p.Name, "example-pipeline")
		eq(t, "Description", p.Description, "Generator to file")
		src := p.Source()
		eq(t, "source id", src.ID, "example-source")
		eq(t, "source plugin", src.Plugin, "builtin:generator")
		eq(t, "source name defaults to id", src.Name, "example-source")
		wantSettings := map[string]string{
			"format.type":         "structured",
			"format.options.id":   "int",
			"format.options.name": "string",
			"operations":          "create",
			"rate":                "10",
		}
		if !reflect.DeepEqual(src.Settings, wantSettings) {
			t.Errorf("source settings = %v, want %v", src.Settings, wantSettings)
		}
		eq(t, "line of rate", src.SettingLines["rate"], 18)
		dst := p.Destinations()
		if len(dst) != 1 || dst[0].Plugin != "builtin:file" || dst[0].Settings["path"] != "./example.out" {
			t.Errorf("destinations = %+v", dst)
		}
		// No dead-letter-queue block: Conduit's default.
		wantDLQ := DLQ{Plugin: "builtin:log", Settings: map[string]string{"level": "warn", "message": "record delivery failed"},
			WindowSize: 1, WindowNackThreshold: 0, Line: 5, SettingLines: map[string]int{}}
		if !reflect.DeepEqual(p.DLQ, wantDLQ) {
			t.Errorf("DLQ = %+v, want %+v", p.DLQ, wantDLQ)
		}
		if !reflect.DeepEqual(p.ErrorRecovery, ErrorRecoveryOverride{}) {
			t.Errorf("ErrorRecovery = %+v, want no override", p.ErrorRecovery)
		}
	})

	t.Run("generator-to-log with processors, DLQ and error recovery", func(t *testing.T) {
		p := ps[1]
		eq(t, "Status", p.Status, StatusStopped)
		eq(t, "Name defaults to id", p.Name, "generator-to-log")
		src := p.Source()
		wantSettings := map[string]string{
			"format.type":         "structured",
			"format.options.id":   "int",
			"format.options.name": "string",
			"operations":          "create",
			"rate":                "10.50", // as written, not 10.5
		}
		if !reflect.DeepEqual(src.Settings, wantSettings) {
			t.Errorf("nested settings = %v, want flattened %v", src.Settings, wantSettings)
		}
		eq(t, "line of format.options.id", src.SettingLines["format.options.id"], 14)
		if len(src.Processors) != 1 {
			t.Fatalf("source processors = %+v", src.Processors)
		}
		sp := src.Processors[0]
		eq(t, "connector processor id", sp.ID, "add-department")
		eq(t, "connector processor path", sp.Path, "connectors[source].processors[add-department]")
		eq(t, "connector processor workers default", sp.Workers, 1)
		eq(t, "connector processor setting", sp.Settings["field"], ".Payload.After.department")
		if len(p.Processors) != 1 {
			t.Fatalf("pipeline processors = %+v", p.Processors)
		}
		pr := p.Processors[0]
		eq(t, "processor plugin", pr.Plugin, "field.exclude")
		eq(t, "processor condition", pr.Condition, `{{ eq .Operation "create" }}`)
		eq(t, "processor workers", pr.Workers, 2)
		eq(t, "processor path", pr.Path, "processors[drop-secret]")
		wantDLQ := DLQ{Plugin: "builtin:file", Settings: map[string]string{"path": "./dlq.out"},
			WindowSize: 10, WindowNackThreshold: 2, Line: 36, SettingLines: map[string]int{"path": 39}}
		if !reflect.DeepEqual(p.DLQ, wantDLQ) {
			t.Errorf("DLQ = %+v, want %+v", p.DLQ, wantDLQ)
		}
		if p.ErrorRecovery.MinDelay == nil || *p.ErrorRecovery.MinDelay != 500*time.Millisecond {
			t.Errorf("error-recovery min-delay = %v", p.ErrorRecovery.MinDelay)
		}
		if p.ErrorRecovery.MaxRetries == nil || *p.ErrorRecovery.MaxRetries != 5 {
			t.Errorf("error-recovery max-retries = %v", p.ErrorRecovery.MaxRetries)
		}
		if p.ErrorRecovery.MaxDelay != nil || p.ErrorRecovery.Jitter != nil {
			t.Errorf("unset error-recovery fields must stay nil: %+v", p.ErrorRecovery)
		}
	})
}

// TestLoadPipelinesSeveralSources: a pipeline may have several sources,
// as under Conduit; each is a source of its own, in file order.
func TestLoadPipelinesSeveralSources(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "two-sources.yml"))
	if err != nil {
		t.Fatal(err)
	}
	ps, errs := ParsePipelines(FileContent{Name: "two-sources.yml", Data: data})
	if len(errs) > 0 || len(ps) != 1 {
		t.Fatalf("LoadPipelines: %d pipelines, errors %v", len(ps), errs)
	}
	var ids []string
	for _, c := range ps[0].Sources() {
		ids = append(ids, c.ID+"@"+c.Path)
	}
	eq(t, "sources", strings.Join(ids, " "), "src1@connectors[src1] src2@connectors[src2]")
	eq(t, "first source", ps[0].Source().ID, "src1")
	eq(t, "destinations", len(ps[0].Destinations()), 1)
}

// One file per structural error. Every file in testdata/bad must have a
// case, so a new bad file cannot go untested.
func TestLoadPipelinesBadFiles(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		line     int
		pipeline string
		field    string
		want     []string
	}{
		// yaml.v3 reports the line of the enclosing block (connectors:), not
		// the misindented line 7.
		{name: "malformed YAML", file: "invalid-yaml.yml", line: 7, want: []string{"invalid YAML"}},
		{name: "unsupported version", file: "bad-version.yml", line: 1, field: "version", want: []string{`unsupported version "3.0"`, "2.x"}},
		{name: "version 1 file", file: "version-1.yml", line: 3, pipeline: "old", field: "connectors", want: []string{"no source connector"}},
		{name: "missing version", file: "missing-version.yml", line: 1, field: "version", want: []string{"missing", `version: "2.2"`}},
		{name: "unknown top-level field", file: "unknown-top-field.yml", line: 2, field: "pipeline", want: []string{`unknown field; did you mean "pipelines"?`}},
		{name: "unknown pipeline field", file: "unknown-pipeline-field.yml", line: 4, pipeline: "orders", field: "descripton", want: []string{`unknown pipeline field; did you mean "description"?`}},
		{name: "unknown connector field", file: "unknown-connector-field.yml", line: 7, pipeline: "orders", field: "connectors[src].plugn", want: []string{`did you mean "plugin"?`}},
		{name: "unknown processor field", file: "unknown-processor-field.yml", line: 7, pipeline: "orders", field: "processors[p1].setings", want: []string{`did you mean "settings"?`}},
		{name: "unknown DLQ field", file: "unknown-dlq-field.yml", line: 6, pipeline: "orders", field: "dead-letter-queue.window-sise", want: []string{`did you mean "window-size"?`}},
		{name: "unknown error-recovery field", file: "unknown-error-recovery-field.yml", line: 5, pipeline: "orders", field: "error-recovery.min-dealy", want: []string{`did you mean "min-delay"?`}},
		{name: "missing pipeline id", file: "missing-pipeline-id.yml", line: 3, field: "pipelines[0].id", want: []string{"required"}},
		{name: "missing connector id", file: "missing-connector-id.yml", line: 5, pipeline: "orders", field: "connectors[0].id", want: []string{"required"}},
		{name: "missing connector type", file: "missing-connector-type.yml", line: 5, pipeline: "orders", field: "connectors[src].type", want: []string{"required (source or destination)"}},
		{name: "missing connector plugin", file: "missing-connector-plugin.yml", line: 5, pipeline: "orders", field: "connectors[src].plugin", want: []string{"required"}},
		{name: "missing processor plugin", file: "missing-processor-plugin.yml", line: 5, pipeline: "orders", field: "processors[p1].plugin", want: []string{"required"}},
		{name: "bad connector type", file: "bad-connector-type.yml", line: 6, pipeline: "orders", field: "connectors[src].type", want: []string{`must be one of source, destination, got "sorce"`, `did you mean "source"?`}},
		{name: "bad status", file: "bad-status.yml", line: 4, pipeline: "orders", field: "status", want: []string{`must be one of running, stopped, got "paused"`}},
		{name: "no source", file: "no-source.yml", line: 4, pipeline: "orders", field: "connectors", want: []string{"no source connector"}},
		{name: "no destination", file: "no-destination.yml", line: 4, pipeline: "orders", field: "connectors", want: []string{"no destination connector"}},
		{name: "duplicate connector id", file: "duplicate-connector-id.yml", line: 8, pipeline: "orders", field: "connectors[src].id", want: []string{`duplicate connector id "src" (first at line 5)`}},
		{name: "duplicate processor id across connector and pipeline", file: "duplicate-processor-id.yml", line: 15, pipeline: "orders", field: "processors[p1].id", want: []string{`duplicate processor id "p1" (first at line 9`}},
		{name: "settings is a list", file: "wrong-type-settings.yml", line: 9, pipeline: "orders", field: "connectors[src].settings", want: []string{"expected a map of settings, got a list"}},
		{name: "setting value is a list", file: "settings-list-value.yml", line: 9, pipeline: "orders", field: "connectors[src].settings.operations", want: []string{"got a list", "comma-separated"}},
		{name: "workers is a string", file: "wrong-type-workers.yml", line: 7, pipeline: "orders", field: "processors[p1].workers", want: []string{`expected an integer, got the string "two"`}},
		{name: "workers is zero", file: "zero-workers.yml", line: 7, pipeline: "orders", field: "processors[p1].workers", want: []string{"must be at least 1, got 0"}},
		{name: "connectors is a map", file: "wrong-type-connectors.yml", line: 5, pipeline: "orders", field: "connectors", want: []string{"expected a list of connectors", "got a map"}},
		{name: "jitter out of range", file: "error-recovery-jitter.yml", line: 6, pipeline: "orders", field: "error-recovery.jitter", want: []string{"must be between 0 and 1, got 1.5"}},
		{name: "duration without unit", file: "error-recovery-bad-duration.yml", line: 5, pipeline: "orders", field: "error-recovery.max-delay", want: []string{`invalid duration "5"`}},
		{name: "negative delay", file: "error-recovery-negative-delay.yml", line: 5, pipeline: "orders", field: "error-recovery.min-delay", want: []string{"must not be negative, got -1s"}},
		{name: "min-delay over max-delay", file: "error-recovery-min-over-max.yml", line: 5, pipeline: "orders", field: "error-recovery.min-delay", want: []string{"2m must not be greater than max-delay 1m"}},
		{name: "backoff factor below 1", file: "error-recovery-backoff.yml", line: 5, pipeline: "orders", field: "error-recovery.backoff-factor", want: []string{"must be at least 1, got 0.5"}},
		{name: "max-retries below -1", file: "error-recovery-max-retries.yml", line: 5, pipeline: "orders", field: "error-recovery.max-retries", want: []string{"got -2"}},
		{name: "max-retries-window zero", file: "error-recovery-window.yml", line: 5, pipeline: "orders", field: "error-recovery.max-retries-window", want: []string{"must be greater than 0"}},
		{name: "jitter is a string", file: "error-recovery-wrong-type.yml", line: 5, pipeline: "orders", field: "error-recovery.jitter", want: []string{`expected a number, got the string "a little"`}},
		{name: "DLQ threshold not below window", file: "dlq-threshold.yml", line: 6, pipeline: "orders", field: "dead-letter-queue.window-nack-threshold", want: []string{"window-nack-threshold (3) must be less than window-size (3)"}},
		{name: "DLQ negative window", file: "dlq-negative-window.yml", line: 5, pipeline: "orders", field: "dead-letter-queue.window-size", want: []string{"must not be negative, got -1"}},
		{name: "processor type and plugin", file: "processor-type-and-plugin.yml", line: 7, pipeline: "orders", field: "processors[p1].type", want: []string{"both plugin and type"}},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[tc.file] = true
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", "bad", tc.file)
			ps, errs := LoadPipelines(path)
			if len(ps) != 0 {
				t.Errorf("got valid pipelines %v, want none", ps)
			}
			if len(errs) != 1 {
				t.Fatalf("got %d errors %v, want 1", len(errs), errs)
			}
			wantPipelineError(t, errs[0], path, tc.line, tc.pipeline, tc.field, tc.want...)
		})
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !covered[e.Name()] {
			t.Errorf("testdata/bad/%s has no test case", e.Name())
		}
	}
}

func wantPipelineError(t *testing.T, err error, file string, line int, pipeline, field string, want ...string) {
	t.Helper()
	var pe *PipelineError
	if !errors.As(err, &pe) {
		t.Fatalf("error %q is %T, want *PipelineError", err, err)
	}
	if pe.File != file || pe.Line != line || pe.PipelineID != pipeline || pe.Field != field {
		t.Errorf("PipelineError{File: %q, Line: %d, PipelineID: %q, Field: %q}, want {%q, %d, %q, %q}\nmessage: %s",
			pe.File, pe.Line, pe.PipelineID, pe.Field, file, line, pipeline, field, err)
	}
	prefix := file + ":" + itoa(line)
	if pipeline != "" {
		prefix += `: pipeline "` + pipeline + `"`
	}
	if field != "" {
		prefix += ": " + field
	}
	if !strings.HasPrefix(err.Error(), prefix+": ") {
		t.Errorf("message %q does not start with %q", err, prefix+": ")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q does not contain %q", err, w)
		}
	}
}

// One broken pipeline or file must not stop the others.
func TestLoadPipelinesPartialFailure(t *testing.T) {
	dir := filepath.Join("testdata", "partial")
	ps, errs := LoadPipelines(dir)

	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID+"@"+filepath.Base(p.File))
	}
	wantIDs := []string{"good-a@a.yml", "shared@a.yml", "good-c@c.yml", "good-d@d.yaml"}
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Errorf("valid pipelines = %v, want %v (in path order, first definition of a duplicate wins)", ids, wantIDs)
	}
	if len(errs) != 3 {
		t.Fatalf("got %d errors, want 3:\n%v", len(errs), errs)
	}
	a, b, c := filepath.Join(dir, "a.yml"), filepath.Join(dir, "b.yml"), filepath.Join(dir, "c.yml")
	wantPipelineError(t, errs[0], a, 12, "bad-a", "connectors", "no destination connector")
	wantPipelineError(t, errs[1], b, 4, "", "", "invalid YAML")
	wantPipelineError(t, errs[2], c, 3, "shared", "id", "duplicate pipeline id, already defined at "+a+":16")
}

func TestLoadPipelinesDuplicateIDs(t *testing.T) {
	const valid = `
  - id: %s
    connectors:
      - {id: src, type: source, plugin: builtin:generator}
      - {id: dst, type: destination, plugin: builtin:log}`
	pipeline := func(id string) string { return strings.ReplaceAll(valid, "%s", id) }

	tests := []struct {
		name    string
		files   map[string]string
		wantIDs []string
		errFile string
		errLine int
		want    string
	}{
		{
			name:    "within one file",
			files:   map[string]string{"a.yml": "version: 2.2\npipelines:" + pipeline("x") + pipeline("x")},
			wantIDs: []string{"x"},
			errFile: "a.yml", errLine: 7,
			want: "already defined at DIR/a.yml:3",
		},
		{
			name: "across files, the first by path wins",
			files: map[string]string{
				"b.yml":     "version: 2.2\npipelines:" + pipeline("x"),
				"a/one.yml": "version: 2.2\npipelines:" + pipeline("x") + pipeline("y"),
			},
			wantIDs: []string{"x", "y"},
			errFile: "b.yml", errLine: 3,
			want: "already defined at DIR/a/one.yml:3",
		},
		{
			name: "an invalid first definition still claims the id",
			files: map[string]string{
				"a.yml": "version: 2.2\npipelines:\n  - id: x\n    status: sometimes\n",
				"b.yml": "version: 2.2\npipelines:" + pipeline("x"),
			},
			wantIDs: nil,
			errFile: "b.yml", errLine: 3,
			want: "already defined at DIR/a.yml:3",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				writeFile(t, dir, name, content)
			}
			ps, errs := LoadPipelines(dir)
			var ids []string
			for _, p := range ps {
				ids = append(ids, p.ID)
			}
			if !reflect.DeepEqual(ids, tc.wantIDs) {
				t.Errorf("valid ids = %v, want %v", ids, tc.wantIDs)
			}
			var dup error
			for _, err := range errs {
				if strings.Contains(err.Error(), "duplicate pipeline id") {
					dup = err
				}
			}
			if dup == nil {
				t.Fatalf("no duplicate-id error in %v", errs)
			}
			wantPipelineError(t, dup, filepath.Join(dir, tc.errFile), tc.errLine, "x", "id",
				strings.ReplaceAll(tc.want, "DIR", dir))
		})
	}
}

func TestLoadPipelinesMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	ps, errs := LoadPipelines(dir)
	if len(ps) != 0 || len(errs) != 1 {
		t.Fatalf("got %v, %v; want one error", ps, errs)
	}
	if !strings.HasPrefix(errs[0].Error(), dir+": ") || !strings.Contains(errs[0].Error(), "does not exist") {
		t.Errorf("message %q does not name the directory", errs[0])
	}
	if !errors.Is(errs[0], fs.ErrNotExist) {
		t.Error("errors.Is(err, fs.ErrNotExist) is false")
	}
}

func TestLoadPipelinesEmpty(t *testing.T) {
	tests := []struct {
		name    string
		content string
	}{
		{name: "empty file", content: ""},
		{name: "only comments", content: "# nothing yet\n"},
		{name: "no pipelines", content: "version: 2.2\n"},
		{name: "empty pipeline list", content: "version: 2.2\npipelines: []\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "p.yml", tc.content)
			ps := loadOK(t, dir)
			if len(ps) != 0 {
				t.Errorf("got %v", ps)
			}
		})
	}
	// An empty directory is not an error either.
	if ps := loadOK(t, t.TempDir()); len(ps) != 0 {
		t.Errorf("got %v", ps)
	}
}

func TestLoadPipelinesVersions(t *testing.T) {
	const body = `
pipelines:
  - id: p
    connectors:
      - {id: src, type: source, plugin: builtin:generator}
      - {id: dst, type: destination, plugin: builtin:log}
`
	tests := []struct {
		name    string
		version string
		ok      bool
	}{
		{name: "2.2 as a number", version: "2.2", ok: true},
		{name: "2.2 as a string", version: `"2.2"`, ok: true},
		{name: "2.0", version: "2.0", ok: true},
		{name: "2.1", version: "'2.1'", ok: true},
		{name: "2 as a string", version: `"2"`, ok: true},
		{name: "2 as a number", version: "2", ok: true},
		{name: "3", version: "3", ok: false},
		{name: "2.x", version: "2.x", ok: false},
		{name: "1.x", version: "1.x", ok: false},
		{name: "a list", version: "[2.2]", ok: false},
		{name: "empty", version: "", ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFile(t, dir, "p.yml", "version: "+tc.version+body)
			ps, errs := LoadPipelines(dir)
			if tc.ok {
				if len(errs) != 0 || len(ps) != 1 {
					t.Errorf("got %v, %v; want the pipeline", ps, errs)
				}
				return
			}
			if len(ps) != 0 || len(errs) != 1 {
				t.Fatalf("got %v, %v; want one error", ps, errs)
			}
			wantPipelineError(t, errs[0], path, 1, "", "version")
		})
	}
}

func TestSettingsFlattening(t *testing.T) {
	tests := []struct {
		name      string
		settings  string // YAML under `settings:` at indent 10
		want      map[string]string
		wantLines map[string]int // lines relative to the settings: line (line 8 of the file)
	}{
		{
			name:     "numbers and bools as written",
			settings: "rate: 10\nratio: 1.50\nhex: 0x1F\nbig: 1e3\nflag: true\nyes: yes\nneg: -0",
			want:     map[string]string{"rate": "10", "ratio": "1.50", "hex": "0x1F", "big": "1e3", "flag": "true", "yes": "yes", "neg": "-0"},
		},
		{
			name:      "nested maps flattened with dots",
			settings:  "format:\n  type: structured\n  options:\n    id: int\nrate: 1",
			want:      map[string]string{"format.type": "structured", "format.options.id": "int", "rate": "1"},
			wantLines: map[string]int{"format.type": 2, "format.options.id": 4, "rate": 5},
		},
		{
			name:     "nested and dotted forms mix",
			settings: "format.type: raw\nformat:\n  options.id: int",
			want:     map[string]string{"format.type": "raw", "format.options.id": "int"},
		},
		{
			name:     "null is empty text",
			settings: "a: ~\nb:\nc: \"\"",
			want:     map[string]string{"a": "", "b": "", "c": ""},
		},
		{
			name:     "quoted numbers keep their text",
			settings: "rate: \"010\"\nid: '7'",
			want:     map[string]string{"rate": "010", "id": "7"},
		},
		{
			name:     "block scalar",
			settings: "script: |\n  line one\n  line two",
			want:     map[string]string{"script": "line one\nline two\n"},
		},
		{
			name:     "anchors and aliases",
			settings: "a: &v hello\nb: *v",
			want:     map[string]string{"a": "hello", "b": "hello"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := "version: 2.2\npipelines:\n  - id: p\n    connectors:\n      - id: src\n        type: source\n        plugin: builtin:generator\n        settings:\n" +
				indent(tc.settings, 10) +
				"\n      - {id: dst, type: destination, plugin: builtin:log}\n"
			dir := t.TempDir()
			writeFile(t, dir, "p.yml", file)
			ps := loadOK(t, dir)
			if len(ps) != 1 {
				t.Fatalf("got %d pipelines", len(ps))
			}
			src := ps[0].Source()
			if !reflect.DeepEqual(src.Settings, tc.want) {
				t.Errorf("settings = %q, want %q", src.Settings, tc.want)
			}
			for k, rel := range tc.wantLines {
				eq(t, "line of "+k, src.SettingLines[k], 8+rel)
			}
			if len(src.SettingLines) != len(src.Settings) {
				t.Errorf("SettingLines %v does not cover Settings %v", src.SettingLines, src.Settings)
			}
		})
	}

	t.Run("same setting twice via nesting is an error", func(t *testing.T) {
		file := "version: 2.2\npipelines:\n  - id: p\n    connectors:\n      - id: src\n        type: source\n        plugin: builtin:generator\n        settings:\n" +
			indent("format.type: raw\nformat:\n  type: structured", 10) + "\n"
		dir := t.TempDir()
		path := writeFile(t, dir, "p.yml", file)
		_, errs := LoadPipelines(dir)
		if len(errs) != 1 {
			t.Fatalf("got %v, want one error", errs)
		}
		wantPipelineError(t, errs[0], path, 11, "p", "connectors[src].settings.format.type", "set twice (first at line 9)")
	})
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

func TestPipelineDefaultsAndCompat(t *testing.T) {
	const file = `version: 2.1
pipelines:
  - id: p
    status:
    connectors:
      - id: src
        type: source
        plugin: generator
      - id: dst
        type: destination
        plugin: builtin:log
        name: "the log"
    processors:
      - id: old-style
        type: field.set
    dead-letter-queue:
      plugin: builtin:log
      window-size: 0
      window-nack-threshold: 5
---
version: "2.2"
pipelines:
  - id: second-document
    connectors:
      - {id: src, type: source, plugin: builtin:generator}
      - {id: dst, type: destination, plugin: builtin:log}
    dead-letter-queue:
      plugin: builtin:file
`
	dir := t.TempDir()
	writeFile(t, dir, "p.yml", file)
	ps := byID(loadOK(t, dir))
	p, ok := ps["p"]
	if !ok {
		t.Fatalf("pipeline p missing: %v", ps)
	}
	eq(t, "empty status means running", p.Status, StatusRunning)
	eq(t, "explicit connector name", p.Destinations()[0].Name, "the log")
	eq(t, "pre-2.2 processor type is the plugin", p.Processors[0].Plugin, "field.set")
	eq(t, "workers default", p.Processors[0].Workers, 1)
	eq(t, "window-size 0 allows any threshold", p.DLQ.WindowNackThreshold, 5)
	if !reflect.DeepEqual(p.DLQ.Settings, DefaultDLQSettings()) {
		t.Errorf("builtin:log DLQ without settings gets the default settings, got %v", p.DLQ.Settings)
	}
	second, ok := ps["second-document"]
	if !ok {
		t.Fatal("second YAML document not loaded")
	}
	if len(second.DLQ.Settings) != 0 {
		t.Errorf("a non-log DLQ plugin must not get log settings, got %v", second.DLQ.Settings)
	}
}

// The caller validates plugins and settings; its errors must point at the
// right line through the helpers.
func TestPipelineErrorHelpers(t *testing.T) {
	ps := loadOK(t, filepath.Join("testdata", "valid", "more", "generator-to-log.yaml"))
	if len(ps) != 1 {
		t.Fatalf("got %d pipelines", len(ps))
	}
	p := ps[0]
	file := p.File
	errBad := errors.New("bad")
	tests := []struct {
		name  string
		err   *PipelineError
		line  int
		field string
	}{
		{name: "setting", err: p.SettingError(0, "rate", errBad), line: 17, field: "connectors[source].settings.rate"},
		{name: "nested setting", err: p.SettingError(0, "format.options.name", errBad), line: 15, field: "connectors[source].settings.format.options.name"},
		{name: "missing setting points at the settings block", err: p.SettingError(1, "path", errBad), line: 27, field: "connectors[destination].settings.path"},
		{name: "connector plugin", err: p.ConnectorError(1, "plugin", errBad), line: 26, field: "connectors[destination].plugin"},
		{name: "connector itself", err: p.ConnectorError(0, "", errBad), line: 7, field: "connectors[source]"},
		{name: "connector processor setting", err: p.ProcessorError(p.Source().Processors[0], "settings.value", errBad), line: 23, field: "connectors[source].processors[add-department].settings.value"},
		{name: "pipeline processor plugin", err: p.ProcessorError(p.Processors[0], "plugin", errBad), line: 31, field: "processors[drop-secret].plugin"},
		{name: "DLQ setting", err: p.FieldError("dead-letter-queue.settings.path", errBad), line: 39, field: "dead-letter-queue.settings.path"},
		{name: "unknown field falls back to the pipeline", err: p.FieldError("nothing.here", errBad), line: 3, field: "nothing.here"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantPipelineError(t, tc.err, file, tc.line, "generator-to-log", tc.field, "bad")
			if !errors.Is(tc.err, errBad) {
				t.Error("errors.Is does not see the cause")
			}
		})
	}
	eq(t, "format", p.SettingError(0, "rate", errors.New(`unknown plugin "builtin:nope"`)).Error(),
		file+`:17: pipeline "generator-to-log": connectors[source].settings.rate: unknown plugin "builtin:nope"`)
}

func TestLoadPipelinesSingleFileAndOrder(t *testing.T) {
	dir := t.TempDir()
	mk := func(name, id string) {
		writeFile(t, dir, name, "version: 2.2\npipelines:\n  - id: "+id+"\n    connectors:\n      - {id: s, type: source, plugin: g}\n      - {id: d, type: destination, plugin: l}\n")
	}
	mk("b.yaml", "b")
	mk("a.yml", "a")
	mk("a/z.yml", "az")
	mk("UPPER.YML", "upper")
	mk("skip.json", "json")
	mk(".hidden.yml", "hidden")
	mk(".git/x.yml", "git")
	var ids []string
	for _, p := range loadOK(t, dir) {
		ids = append(ids, p.ID)
	}
	want := []string{"upper", "a", "az", "b"} // sorted by path
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("ids = %v, want %v", ids, want)
	}
	// pipelines.path may name a single file.
	ps := loadOK(t, filepath.Join(dir, "b.yaml"))
	if len(ps) != 1 || ps[0].ID != "b" {
		t.Errorf("single file: got %v", ps)
	}
}

// One pass over a file names every problem of each pipeline, not only the
// first: each wrong field, each connector and processor.
func TestAnInvalidPipelineReportsEveryProblem(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yml")
	data := `version: "2.2"
pipelines:
  - id: orders
    statuss: running
    connectors:
      - id: gen
        type: sauce
        plugin: builtin:generator
      - id: out
        type: destination
      - id: log
        type: destination
        plugin: builtin:log
        colour: red
    processors:
      - id: p1
    dead-letter-queue:
      window-size: many
  - id: fine
    connectors:
      - {id: gen, type: source, plugin: builtin:generator}
      - {id: out, type: destination, plugin: builtin:log}
`
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, errs := LoadPipelines(file)
	if len(ps) != 1 || ps[0].ID != "fine" {
		t.Errorf("valid pipelines %v, want fine only", ps)
	}
	want := []struct {
		line  int
		field string
	}{
		{4, "statuss"},
		{7, "connectors[gen].type"},
		{9, "connectors[out].plugin"},
		{14, "connectors[log].colour"},
		{16, "processors[p1].plugin"},
		{18, "dead-letter-queue.window-size"},
	}
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		var pe *PipelineError
		if !errors.As(errs[i], &pe) || pe.PipelineID != "orders" || pe.Line != w.line || pe.Field != w.field {
			t.Errorf("error %d: %v, want line %d, field %s", i, errs[i], w.line, w.field)
		}
	}
}

// A file that is not a pipeline file - a symlink to /etc/passwd, another
// program's configuration - is named in the error, never quoted; a value
// quoted from a pipeline file is cut short.
func TestErrorsDoNotQuoteFilesThatAreNotPipelineFiles(t *testing.T) {
	outside := t.TempDir()
	dir := filepath.Join(t.TempDir(), "pipelines")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"passwd":  "root:x:0:0:SECRET-ROOT:/root:/bin/bash\ndaemon:x:1:1:SECRET-DAEMON:/usr/sbin:/usr/sbin/nologin\n",
		"shadow":  "root:*:20228:0:99999:7:SECRET-SHADOW::\n",
		"app.yml": "api_key: SECRET-KEY\npassword: SECRET-PASSWORD\n",
		"list":    "- SECRET-ITEM\n",
	}
	for name, content := range secrets {
		if err := os.WriteFile(filepath.Join(outside, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, name), filepath.Join(dir, name+".yml")); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("SECRET-LONG-", 20)
	if err := os.WriteFile(filepath.Join(dir, "long.yml"), []byte("version: \"2.2\"\npipelines:\n  - id: p\n    status: "+long+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs := LoadPipelines(dir)
	if len(errs) != len(secrets)+1 {
		t.Fatalf("%d errors, want %d: %v", len(errs), len(secrets)+1, errs)
	}
	for _, err := range errs {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "long.yml"):
			if strings.Count(msg, "SECRET-LONG-") > 4 || !strings.Contains(msg, "240 characters") {
				t.Errorf("a long value is quoted whole: %s", msg)
			}
		case strings.Contains(msg, "SECRET") || strings.Contains(msg, "api_key") || strings.Contains(msg, "root"):
			t.Errorf("the error quotes a file that is not a pipeline file: %s", msg)
		case !strings.Contains(msg, "not a pipeline file"):
			t.Errorf("the error does not say the file is not a pipeline file: %s", msg)
		}
	}
}
